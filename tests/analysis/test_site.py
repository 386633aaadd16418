"""The static results site (analysis/site.py): built from a few runs of the committed reference store and the committed
report's files, byte-identical from another folder, every link resolving, and every page loaded in headless Chromium
(skipped when no ``chromium`` is on PATH; ``make install`` installs it as root on Debian) without a console error,
its tables holding the committed values, sortable and filterable. The last test makes it the way ``make report``
does, through ``experiments.reproduce``, from a copy of the whole store and the committed report."""

from __future__ import annotations

import html
import json
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import unquote

import pandas as pd
import pytest
import yaml

from analysis import expected as E
from analysis.declared_runs import RunRef
from analysis.site import SiteStudy, SiteTier, build_site, command, score
from lethe.core.paths import PROJECT_ROOT

RESULTS = PROJECT_ROOT / "results"
STORE = RESULTS / "reference"
# (tier, run key): stored runs of three tiers (one with generated answers) and one left out of the small store (a
# declared run the store lacks, whether or not the committed store holds it)
RUNS = [
    ("core", "locomo/bm25"),
    ("core", "lethebench/lethe_iter3"),
    ("llm", "lethebench/lethe_iter4"),
    ("regimes", "techqa/cross_encoder+transfer"),
    ("ablations", "locomo/lethe_iter1+no_plan"),
]
STUDIES = [("core", "contradiction_rules_dev"), ("judges", "judge_validation_locomo"), ("seed003", "seed003_pairwise")]
NOT_STORED = {("ablations", "locomo/lethe_iter1+no_plan"), ("seed003", "seed003_pairwise")}  # left out of the copy


def _copy_inputs(dest: Path) -> Path:
    """The committed report's files and the chosen runs' and studies' part of the store, laid out as in results/."""
    dest.mkdir(parents=True)
    shutil.copy(RESULTS / "report.md", dest)
    for part in ("tables", "figures", "verification", "seeds"):
        shutil.copytree(RESULTS / part, dest / part)
    for tier, key in RUNS:
        if (tier, key) not in NOT_STORED and (STORE / tier / key).is_dir():
            shutil.copytree(STORE / tier / key, dest / "reference" / tier / key)
    for tier, name in STUDIES:
        if (tier, name) not in NOT_STORED and (STORE / tier / "studies" / name).is_dir():
            shutil.copytree(STORE / tier / "studies" / name, dest / "reference" / tier / "studies" / name)
    return dest


def _tiers(results: Path) -> list[SiteTier]:
    """The chosen runs and studies, declared as conf/reference/ declares them."""
    from experiments.reference import load_tier

    out = []
    for name in dict.fromkeys([t for t, _ in RUNS] + [t for t, _ in STUDIES]):
        tier = load_tier(name)
        declared = {d.key: d for d in tier.runs}
        refs = tuple(
            RunRef(
                declared[k].dataset,
                declared[k].label,
                name,
                results / "reference" / name / k,
                results / "reference" / "datasets",
                declared[k].describe(),
            )
            for t, k in RUNS
            if t == name
        )
        studies = tuple(
            SiteStudy(name, s, results / "reference" / name / "studies" / s) for t, s in STUDIES if t == name
        )
        out.append(SiteTier(name, tier.description, refs, studies))
    return out


def _build(results: Path) -> Path:
    return build_site(results, _tiers(results), seeds_dir=results / "seeds")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return _build(_copy_inputs(tmp_path_factory.mktemp("site") / "results"))


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _counts(summary: str) -> dict[str, int]:
    return {s: int(n) for n, s in re.findall(r"(\d+) (OK|OKish|FAIL|MISSING|DAMAGED)\b", summary)}


def test_verification_tables_parse_back_row_for_row():
    """parse_verification reads what format_verification writes (a study's metric with `|` in it, a missing value),
    and every committed table whole: its counts are the ones its own summary line gives."""
    df = E.compare(
        [
            ("locomo/bm25", {"evaluated": 10, "ndcg@10": 0.5}, {}),
            ("study/x", {"rules | - | all: tp": 3}, {}),
            ("locomo/vector", None, None),
        ],
        {"runs": {"locomo/bm25": {"metrics": {"evaluated": 10, "ndcg@10": 0.25}, "tolerance": 0.0}}},
        ["evaluated", "ndcg@10"],
    )
    rows = E.parse_verification(E.format_verification(df, "t"))
    assert [(r["run"], r["metric"], r["status"]) for r in rows] == [
        ("locomo/bm25", "evaluated", "OK"),
        ("locomo/bm25", "ndcg@10", "FAIL"),
        ("study/x", "rules | - | all: tp", "MISSING"),
        ("locomo/vector", "evaluated", "MISSING"),
        ("locomo/vector", "ndcg@10", "MISSING"),
    ]
    assert rows[1]["expected"] == "0.250000" and rows[1]["measured"] == "0.500000" and rows[1]["diff"] == "+2.50e-01"
    assert rows[3]["note"] == "not run (no finished results folder)"
    for path in sorted((RESULTS / "verification").glob("*.md")):
        text = path.read_text()
        parsed = E.parse_verification(text)
        counts = {s: sum(r["status"] == s for r in parsed) for s in E.STATUSES}
        assert {s: counts[s] for s in _counts(text.strip().splitlines()[-1])} == _counts(text.strip().splitlines()[-1])
        assert len(parsed) == sum(line.startswith("| ") for line in text.splitlines()) - 1, path.name


def test_the_site_is_the_same_from_another_folder_and_names_no_folder_of_this_machine(site, tmp_path):
    other = _build(_copy_inputs(tmp_path / "elsewhere" / "results"))
    here, there = _files(site), _files(other)
    assert here.keys() == there.keys() and [k for k in here if here[k] != there[k]] == []
    host = socket.gethostname()
    machine = [
        str(site.parent),
        str(tmp_path),
        str(PROJECT_ROOT),
        str(Path.home()) + "/",
        *([host] if len(host) >= 8 else []),
    ]
    assert {(k, m) for k, v in here.items() for m in machine if m.encode() in v} == set()


def _links(page: Path) -> list[str]:
    return [html.unescape(m) for m in re.findall(r'(?:href|src)="([^"]+)"', page.read_text())]


def broken_links(site: Path) -> list[tuple[str, str]]:
    """(page, link) of every link or image source of the site that leaves the results folder or finds nothing there
    (a missing file, or a #fragment no element has)."""
    results = site.parent.resolve()
    broken = []
    for page in sorted(site.rglob("*.html")):
        name = page.relative_to(site).as_posix()
        for link in _links(page):
            if re.match(r"^[a-z]+:", link):
                broken.append((name, link))  # no link leaves the folder: no CDN, no web
                continue
            path, _, frag = link.partition("#")
            target = (page.parent / unquote(path)).resolve() if path else page
            if (
                not target.is_file()
                or not target.is_relative_to(results)
                or frag
                and target.suffix == ".html"
                and f'id="{frag}"' not in target.read_text()
            ):
                broken.append((name, link))
    return broken


def test_every_relative_link_resolves_inside_the_results_folder(site):
    assert len(list(site.rglob("*.html"))) > 60
    assert broken_links(site) == []


def test_pages_hold_what_the_store_and_the_report_hold(site):
    bm25 = (site / "runs" / "core" / "locomo" / "bm25.html").read_text()
    pq = pd.read_parquet(STORE / "core" / "locomo" / "bm25" / "per_query.parquet")
    body = bm25.split("Per-query scores", 1)[1]
    assert body.count("\n<tr><td>") == len(pq) and f"({len(pq)} queries)" in body
    q = pq.sort_values("query_id").iloc[3]
    assert f"<tr><td>{q.query_id}<td>{q.category}<td>{score(q['ndcg@10'])}<td>" in body
    assert html.escape(command("core", "locomo/bm25")) in bm25
    missing = (site / "runs" / "ablations" / "locomo" / "lethe_iter1+no_plan.html").read_text()
    assert "not in the reference store" in missing and "Per-query" not in missing
    assert "not in the reference store" in (site / "studies" / "seed003" / "seed003_pairwise.html").read_text()
    index = (site / "index.html").read_text()
    finished = next(line for line in (RESULTS / "report.md").read_text().splitlines() if "runs are finished" in line)
    assert re.sub(r"^- |`", "", finished).split(";")[0] in index  # the report's own headline line
    for name in ("table1_locomo", "overview_ndcg10"):
        assert (site / "tables" / f"{name}.html").is_file() and f"tables/{name}.html" in index
    # the first screen is what was found: the findings, then the overview table; provenance below them
    findings, overview, provenance = (index.index(x) for x in ('id="findings"', 'id="overview"', "A static copy of"))
    assert findings < overview < index.index("<table", overview) < provenance
    assert (site / "seeds" / "table_seed001_1.html").is_file()


# headless Chromium over the DevTools protocol ---------------------------------------------------------------------


class Chromium:
    """One headless Chromium page driven over the DevTools protocol (websockets' sync client): load a page, run
    JavaScript, and collect what went wrong (uncaught exceptions, console errors, resources that failed to load)."""

    def __init__(self, exe: str, profile: Path) -> None:
        from websockets.sync.client import connect

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        port_file, deadline = profile / "DevToolsActivePort", time.monotonic() + 60
        while not (port_file.is_file() and len(port_file.read_text().splitlines()) >= 2):
            assert self.proc.poll() is None and time.monotonic() < deadline, "chromium did not start"
            time.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        self.ws = connect(f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=30)
        self.n, self.events = 0, []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", page=True)

    def _recv(self) -> dict:
        msg = json.loads(self.ws.recv(timeout=60))
        if "method" in msg:
            self.events.append(msg)
        return msg

    def call(self, method: str, page: bool = False, **params) -> dict:
        self.n += 1
        msg = {"id": self.n, "method": method, "params": params, **({"sessionId": self.session} if page else {})}
        self.ws.send(json.dumps(msg))
        while True:
            got = self._recv()
            if got.get("id") == self.n:
                assert "error" not in got, got
                return got.get("result", {})

    def load(self, path: Path) -> None:
        self.events.clear()
        done = self.call("Page.navigate", page=True, url=path.as_uri())
        assert not done.get("errorText"), (path, done)
        while not any(e["method"] == "Page.loadEventFired" for e in self.events):
            self._recv()

    def js(self, expression: str):
        got = self.call("Runtime.evaluate", page=True, expression=expression, returnByValue=True)
        assert "exceptionDetails" not in got, got["exceptionDetails"]
        return got["result"].get("value")

    def problems(self) -> list[str]:
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append(json.dumps(p["exceptionDetails"])[:300])
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
                out.append(str([a.get("value", a.get("description")) for a in p.get("args", [])]))
            elif e["method"] == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                out.append(f"{p['entry'].get('text')} {p['entry'].get('url', '')}")
        return out

    def close(self) -> None:
        self.ws.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip(
            "no chromium on PATH (make install adds it with apt-get as root): the site's browser test is skipped"
        )
    pytest.importorskip("websockets.sync.client", reason="the DevTools client needs websockets")
    b = Chromium(exe, tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


def test_every_page_loads_in_chromium_and_its_sorter_runs(site, browser):
    pages = sorted(site.rglob("*.html"))
    bad = {}
    for page in pages:
        browser.load(page)
        sortable = browser.js("document.querySelectorAll('table.sortable').length")
        ran = browser.js("document.documentElement.getAttribute('data-sorter')")
        images = browser.js("Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).length")
        problems = browser.problems()
        if problems or ran != str(sortable) or images:
            bad[page.relative_to(site).as_posix()] = (problems, ran, sortable, images)
    assert bad == {}
    figures = len(re.findall(r"^!\[", (RESULTS / "report.md").read_text(), re.M))
    browser.load(site / "figures.html")
    assert figures > 0 and browser.js("document.images.length") == figures
    assert browser.js("document.querySelectorAll('figcaption').length") == figures


def _column(browser, table: int, col: int) -> list[str]:
    return browser.js(
        f"Array.from(document.querySelectorAll('table.sortable')[{table}].tBodies[0].rows)"
        f".filter(r => !r.hidden).map(r => r.cells[{col}].textContent.trim())"
    )


def test_the_dom_holds_the_committed_values(site, browser):
    """The verification page shows locomo/bm25's expected nDCG@10 from results/expected/core.yaml as expected and as
    measured with the mark OK; the index counts each tier's marks as its verification table's summary line does."""
    expected = yaml.safe_load((PROJECT_ROOT / "results" / "expected" / "core.yaml").read_text())
    ndcg = f"{expected['runs']['locomo/bm25']['metrics']['ndcg@10']:.6f}"
    browser.load(site / "verification" / "core.html")
    header = browser.js(
        "Array.from(document.querySelectorAll('table.sortable')[0].tHead.rows[0].cells).map(c => c.textContent)"
    )
    assert header[:7] == [
        "run",
        "mark",
        "values",
        "evaluated expected",
        "evaluated measured",
        "nDCG@10 expected",
        "nDCG@10 measured",
    ]
    rows = browser.js(
        "Array.from(document.querySelectorAll('table.sortable')[0].tBodies[0].rows).map(r => Array.from(r.cells).map(c => c.textContent))"
    )
    bm25 = next(r for r in rows if r[0] == "locomo/bm25")
    assert bm25[1] == "OK" and bm25[5] == bm25[6] == ndcg and bm25[-1] == command("core", "locomo/bm25")
    browser.load(site / "index.html")
    tiers = browser.js(
        "Array.from(document.querySelectorAll('#verification ~ .scroll table')[0].tBodies[0].rows).map(r => Array.from(r.cells).map(c => c.textContent))"
    )
    marks = list(E.STATUSES)
    for row in tiers:
        path = RESULTS / "verification" / f"{row[0]}.md"
        if not path.is_file():
            assert row[4:] == ["-"] * len(marks), row
            continue
        counts = _counts(path.read_text().strip().splitlines()[-1])
        assert {m: int(row[4 + i]) for i, m in enumerate(marks) if m in counts} == counts, row


def test_a_table_sorts_by_a_click_and_filters_by_words(site, browser):
    browser.load(site / "tables" / "table1_locomo.html")
    header = browser.js("Array.from(document.querySelectorAll('table.sortable th')).map(c => c.textContent)")
    csv_header = pd.read_csv(RESULTS / "tables" / "table1_locomo.csv", nrows=0).columns.tolist()
    assert header == csv_header
    col = header.index("nDCG@10")
    before = _column(browser, 0, col)
    browser.js(f"document.querySelectorAll('table.sortable th')[{col}].click()")
    up = _column(browser, 0, col)
    numbers = [float(x) for x in up if x != "n/m†"]
    assert (
        sorted(up) == sorted(before)
        and numbers == sorted(numbers)
        and up[len(numbers) :] == ["n/m†"] * (len(up) - len(numbers))
    )
    assert browser.js(f"document.querySelectorAll('table.sortable th')[{col}].getAttribute('aria-sort')") == "ascending"
    browser.js(f"document.querySelectorAll('table.sortable th')[{col}].click()")
    down = [float(x) for x in _column(browser, 0, col) if x != "n/m†"]
    assert down == sorted(numbers, reverse=True)
    texts = browser.js(
        "Array.from(document.querySelectorAll('table.sortable')[0].tBodies[0].rows).map(r => r.textContent.toLowerCase())"
    )
    methods = _column(browser, 0, 0)
    browser.js(
        "const box = document.querySelector('input.filter'); box.value = 'cross_encoder alone';"
        "box.dispatchEvent(new Event('input'))"
    )
    shown = _column(browser, 0, 0)
    assert shown == [
        m for m, t in zip(methods, texts, strict=True) if "cross_encoder" in t and "alone" in t
    ]  # anywhere in the row
    assert "cross_encoder_alone" in shown and "bm25" not in shown
    assert browser.problems() == []


def test_the_report_action_writes_the_site_from_the_store_alone(tmp_path, monkeypatch):
    """``make report``'s action (tier=all, source=store) writes ``site/`` beside the committed report, with a page per
    stored run; written again from a copy of that folder, byte-identical. The report step itself is stubbed: the
    committed report's files are copied in as it writes them (tests/experiments/test_reproduce_reports.py tests it),
    and the whole store is read."""
    from experiments import publishing as P
    from experiments import reproduce as R

    def args(base: Path) -> list[str]:
        return [
            "tier=all",
            "action=report",
            "source=store",
            f"store_dir={base / 'reference'}",
            f"committed_dir.reference={base}",
            f"committed_dir.seeds={base / 'seeds'}",
        ]

    written = []

    def copy_report(report: str, cfg) -> None:  # where the report is written (a scratch folder, swapped in after)
        written.append(report)
        out = P.report_dir(report, cfg)
        if report == "seeds":
            shutil.copytree(RESULTS / "seeds", out, dirs_exist_ok=True)
            return
        for part in ("tables", "figures"):
            shutil.copytree(RESULTS / part, out / part)
        shutil.copy(RESULTS / "report.md", out)

    monkeypatch.setattr(R, "write_report", copy_report)
    a = tmp_path / "a" / "results"
    for part in ("reference", "verification"):
        shutil.copytree(RESULTS / part, a / part)
    assert R.reproduce(R.load(args(a))) == 0
    assert written == ["reference", "seeds"]
    runs = json.loads((STORE / "index.json").read_text())
    for tier, part in runs.items():
        for key in part["runs"]:
            assert (a / "site" / "runs" / tier / f"{key}.html").is_file(), (tier, key)
        for name in part["studies"]:
            assert (a / "site" / "studies" / tier / f"{name}.html").is_file(), (tier, name)
    assert broken_links(a / "site") == []
    b = tmp_path / "b" / "results"
    shutil.copytree(a, b, ignore=shutil.ignore_patterns("site"))
    P.write_site("reference", R.load(args(b)))
    assert _files(a / "site") == _files(b / "site")
    store = R.load(args(b))
    assert P.site_wanted("reference", store) and not P.site_wanted("seeds", store) and not P.site_wanted("smoke", store)
    assert not P.site_wanted("reference", R.load([*args(b), "source=runs"]))  # your own runs' report: no site
