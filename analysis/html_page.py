"""HTML building blocks of the static results site (analysis/site.py): escaping, the little Markdown the report
writes (inline code, bold, links, headings, lists, pipe tables), sortable tables, the page frame and the site's
one stylesheet and script (a vanilla sorter and row filter: no CDN, the pages work offline from disk).

Everything here is a pure function of its input, so two builds of the site are byte-identical.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from urllib.parse import quote

CSS = """\
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1b1f24;background:#fff}
nav{background:#24292f;padding:.5em 1.2em}nav a{color:#fff;margin-right:1.1em;text-decoration:none}
nav a:hover{text-decoration:underline}
main{padding:.6em 1.2em 2em;max-width:1500px}
h1{font-size:1.5em;margin:.5em 0}h2{font-size:1.2em;margin:1.3em 0 .4em;border-bottom:1px solid #d0d7de}
h3{font-size:1.05em}
code{font:13px/1.3 ui-monospace,SFMono-Regular,Menlo,monospace;background:#f3f4f6;padding:0 .2em;border-radius:3px}
pre{background:#f3f4f6;padding:.6em;overflow-x:auto}code.cmd{white-space:nowrap}
.scroll{overflow-x:auto;margin:.4em 0 1em}
table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #d0d7de;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f6f8fa;position:sticky;top:0}
table.sortable th{cursor:pointer;user-select:none;white-space:nowrap}
table.sortable th[aria-sort=ascending]::after{content:" \\25B2"}
table.sortable th[aria-sort=descending]::after{content:" \\25BC"}
tbody tr:nth-child(even){background:#fafbfc}
td.num,table.compact td{text-align:right;font-variant-numeric:tabular-nums}table.compact td:first-child,table.kv td{text-align:left}
.mark{font-weight:600;padding:0 .35em;border-radius:3px}
.mark-OK{background:#dafbe1;color:#116329}.mark-OKish{background:#fff8c5;color:#7d4e00}
.mark-FAIL,.mark-DAMAGED{background:#ffebe9;color:#a40e26}.mark-MISSING{background:#eaeef2;color:#57606a}
.filter{margin:.3em 0;padding:2px 6px;font-size:13px;width:22em}
figure{margin:1em 0 2em}figure img{max-width:100%;border:1px solid #d0d7de}
figcaption{max-width:60em;color:#424a53;margin-top:.3em}
.note{color:#57606a;max-width:75em}
"""

JS = """\
// Sortable tables (click a header; click again to reverse) and a row filter on long tables. Numbers sort as numbers
// (a bound such as "<1e-4" just below the number it bounds); missing cells (n/m, -, n/a) sort last either way; other text sorts
// naturally (q2 before q10). <html data-sorter="N"> records that the script ran over N sortable tables.
(function () {
  "use strict";
  var MISSING = ["", "-", "n/m", "n/m\\u2020", "n/a", "nan", "None"];
  var NUM = /^([<>]?)\\s*([-+\\u2212]?(?:\\d+\\.?\\d*|\\.\\d+)(?:e[-+]?\\d+)?)(?:$|[\\s%\\u2021\\u2020\\u25bc\\u25b2(])/i;
  function key(cell) {
    var text = cell.textContent.trim();
    if (MISSING.indexOf(text) >= 0) return {missing: true, text: text};
    var m = NUM.exec(text);
    if (!m) return {text: text};
    var n = parseFloat(m[2].replace("\\u2212", "-"));
    if (m[1] === "<") n -= 1e-12; else if (m[1] === ">") n += 1e-12;
    return {num: n, text: text};
  }
  function compare(a, b, numeric) {
    if (a.missing || b.missing) return a.missing && b.missing ? 0 : a.missing ? 1 : -1;
    if (numeric) return a.num - b.num;
    return a.text.localeCompare(b.text, undefined, {numeric: true});
  }
  function sortBy(table, col, dir) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var keys = rows.map(function (r) { return r.cells[col] ? key(r.cells[col]) : {missing: true, text: ""}; });
    var numeric = keys.every(function (k) { return k.missing || k.num !== undefined; });
    var order = rows.map(function (r, i) { return i; });
    order.sort(function (i, j) {
      var a = keys[i], b = keys[j];
      if (a.missing || b.missing) return compare(a, b, numeric);
      return dir * compare(a, b, numeric) || i - j;
    });
    var frag = document.createDocumentFragment();
    order.forEach(function (i) { frag.appendChild(rows[i]); });
    body.appendChild(frag);
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      if (i === col) th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    });
  }
  function filterRows(table, text) {
    var words = text.toLowerCase().split(/\\s+/).filter(Boolean);
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
      var t = r.textContent.toLowerCase();
      r.hidden = !words.every(function (w) { return t.indexOf(w) >= 0; });
    });
  }
  function init() {
    var tables = document.querySelectorAll("table.sortable");
    Array.prototype.forEach.call(tables, function (table) {
      if (!table.tHead || !table.tBodies.length) return;
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
        th.title = "sort by this column (click again to reverse)";
        th.addEventListener("click", function () {
          sortBy(table, col, th.getAttribute("aria-sort") === "ascending" ? -1 : 1);
        });
      });
      if (table.tBodies[0].rows.length > 25) {
        var box = document.createElement("input");
        box.type = "search";
        box.className = "filter";
        box.placeholder = "filter rows (all words)";
        box.addEventListener("input", function () { filterRows(table, box.value); });
        var at = table.parentNode.classList.contains("scroll") ? table.parentNode : table;
        at.parentNode.insertBefore(box, at);
      }
    });
    document.documentElement.setAttribute("data-sorter", String(tables.length));
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
"""


def esc(x: object) -> str:
    """``x`` as HTML text (None as an empty string)."""
    return "" if x is None else html.escape(str(x), quote=True)


def href(path: str) -> str:
    """A relative link target: each path part percent-encoded (``+`` and ``@`` kept), escaped for an attribute; a path
    whose first part looks like a scheme (a run or file named ``javascript:...``) is made ``./``-relative."""
    quoted = quote(path, safe="/+@:#.-_~")
    return esc("./" + quoted if _SCHEME.match(quoted) else quoted)


def mark(status: str) -> str:
    """A verification mark (OK, OKish, FAIL, MISSING, DAMAGED) as a coloured badge."""
    return f'<span class="mark mark-{esc(status)}">{esc(status)}</span>'


_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def inline_md(text: str, base: str = "") -> str:
    """The inline Markdown the report writes (``code``, **bold**, [text](link)) as HTML; a relative link is
    prefixed with ``base`` (where the Markdown's folder is, seen from the page)."""
    parts = re.split(r"(`[^`]+`)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f"<code>{esc(part[1:-1])}</code>")
            continue
        s = esc(part)
        s = _BOLD.sub(r"<strong>\1</strong>", s)
        s = _LINK.sub(lambda m: _link(m.group(1), html.unescape(m.group(2)), base), s)
        out.append(s)
    return "".join(out)


SAFE_SCHEMES = ("http", "https", "mailto")  # the only schemes a rendered link may use; relative links are the rest
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")


def _link(label: str, link: str, base: str) -> str:
    """``label`` (already HTML) as a link to ``link``, or as plain text when the link's scheme is not safe."""
    target = _target(link, base)
    return label if target is None else f'<a href="{target}">{label}</a>'


def _target(link: str, base: str) -> str | None:
    """The href of a Markdown link: http(s) and mailto as written, ``/`` and ``#`` as written, a relative path under
    ``base``; None for any other scheme (``javascript:``, ``data:``, ``vbscript:``, ..., however spelt: browsers drop
    control characters and spaces inside a scheme and ignore its case)."""
    squeezed = re.sub(r"[\x00-\x20\x7f]", "", link)
    scheme = _SCHEME.match(squeezed)
    if scheme:
        return esc(link) if scheme.group(1).lower() in SAFE_SCHEMES else None
    if squeezed.startswith(("/", "#")):
        return esc(link)
    return href(base + link)


def _split_row(line: str) -> list[str]:
    s = line.strip()
    s = s[1:] if s.startswith("|") else s
    s = s[:-1] if s.endswith("|") and not s.endswith("\\|") else s
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", s)]


def markdown(text: str, base: str = "") -> str:
    """Block Markdown as the report and the studies write it (headings, paragraphs, ``-`` lists, pipe tables,
    fenced code) as HTML; every pipe table becomes a sortable table."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append("<pre>" + esc("\n".join(lines[i + 1 : j])) + "</pre>")
            i = j + 1
        elif m := re.match(r"^(#{1,6})\s+(.*)$", line):
            level = min(len(m.group(1)) + 1, 6)  # the page's own title is the h1
            out.append(f"<h{level}>{inline_md(m.group(2), base)}</h{level}>")
            i += 1
        elif line.lstrip().startswith("|") and i + 1 < len(lines) and re.match(r"^\s*\|[\s:|-]+\|?\s*$", lines[i + 1]):
            header = _split_row(line)
            j = i + 2
            rows = []
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append(_split_row(lines[j]))
                j += 1
            out.append(table(header, rows, base=base, markdown_cells=True))
            i = j
        elif re.match(r"^\s*[-*]\s+", line):
            items = []
            while i < len(lines) and re.match(r"^\s*[-*]\s+", lines[i]):
                items.append(re.sub(r"^\s*[-*]\s+", "", lines[i]))
                i += 1
            out.append("<ul>" + "".join(f"<li>{inline_md(t, base)}</li>" for t in items) + "</ul>")
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not _starts_block(lines, i):
                para.append(lines[i].strip())
                i += 1
            out.append(f"<p>{inline_md(' '.join(para), base)}</p>")
    return "\n".join(out)


def _starts_block(lines: Sequence[str], i: int) -> bool:
    line = lines[i]
    return bool(
        line.startswith("```") or re.match(r"^#{1,6}\s", line) or re.match(r"^\s*[-*]\s+", line) or line.startswith("|")
    )


def _is_number(text: str) -> bool:
    """A number, perhaps after ``<`` and before a footnote mark (‡ † ▼ ▲ %), as the sorter reads one."""
    return bool(
        re.match(r"^[<>]?[-+\u2212]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?[%\u2021\u2020\u25bc\u25b2]?$", text.strip(), re.I)
    )


def table(
    header: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    base: str = "",
    markdown_cells: bool = False,
    raw_cols: Sequence[int] = (),
    compact: bool = False,
    extra_class: str = "",
) -> str:
    """A sortable table. Cells are escaped text (inline Markdown with ``markdown_cells``); columns in ``raw_cols``
    hold HTML made by the caller. Number cells are right-aligned. ``compact`` (the long per-query tables) leaves out
    the optional end tags and the cell classes (valid HTML, half the bytes) and right-aligns every cell but the first."""
    head = "".join(f"<th>{inline_md(str(h), base) if markdown_cells else esc(h)}</th>" for h in header)
    body = []
    end_td, end_tr = ("", "") if compact else ("</td>", "</tr>")
    for row in rows:
        cells = []
        for k, c in enumerate(row):
            text = "" if c is None else str(c)
            if k in raw_cols:
                inner = text
            elif markdown_cells:
                inner = inline_md(text, base)
            else:
                inner = esc(text)
            cls = ' class="num"' if not compact and _is_number(text) else ""  # compact: right-aligned by the CSS
            cells.append(f"<td{cls}>{inner}{end_td}")
        body.append("<tr>" + "".join(cells) + end_tr)
    return (
        f'<div class="scroll"><table class="{" ".join(c for c in ("sortable", "compact" if compact else "", extra_class) if c)}">'
        f"<thead><tr>{head}</tr></thead>\n"
        "<tbody>\n" + "\n".join(body) + "\n</tbody></table></div>"
    )


def key_values(pairs: Iterable[tuple[str, object]]) -> str:
    """A compact two-column table (field, value), left-aligned."""
    return table(["field", "value"], [(k, v) for k, v in pairs], compact=True, extra_class="kv")


def page(title: str, body: str, root: str, nav: Sequence[tuple[str, str]]) -> str:
    """A whole page: ``root`` leads from the page to the site's folder (``""``, ``"../"``); ``nav`` holds
    (label, path from the site's folder) links."""
    links = "".join(f'<a href="{href(root + path)}">{esc(label)}</a>' for label, path in nav)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)} · Lethe results</title>\n"
        f'<link rel="stylesheet" href="{href(root + "site.css")}">\n'
        f'<script src="{href(root + "site.js")}" defer></script>\n'
        "</head>\n<body>\n"
        f"<nav>{links}</nav>\n<main>\n<h1>{esc(title)}</h1>\n{body}\n</main>\n</body>\n</html>\n"
    )
