"""notebooks/analysis.ipynb on a fresh clone: executed as ``jupyter execute`` runs it (from ``notebooks/``), it
shows every table and figure of the committed report from the reference store, makes its bring-your-own runs on
two LoCoMo conversations, and changes nothing git tracks."""

from __future__ import annotations

import os
import re
import subprocess

import nbformat
from nbclient import NotebookClient

from lethe.core.paths import PROJECT_ROOT


def _git_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _text(cell) -> str:
    """What a cell printed and displayed, as text."""
    out = []
    for o in cell.get("outputs", []):
        out.append(o.get("text", ""))
        data = o.get("data", {})
        out.append(str(data.get("text/markdown", "")) + str(data.get("text/plain", "")))
    return "".join(out)


def test_notebook_shows_the_store_and_brings_your_own(work):
    from tests.conftest import DATA_ROOT

    nb = nbformat.read(PROJECT_ROOT / "notebooks" / "analysis.ipynb", as_version=4)
    before = _git_status()
    # the defaults of a fresh clone, except that the runs, datasets and cache it makes go to the session's folders
    env = {
        "LETHE_DATA_ROOT": str(DATA_ROOT),
        "LETHE_PROCESSED": str(work["processed"]),
        "LETHE_CACHE": str(work["cache"]),
        "LETHE_RESULTS": str(work["results"]),
    }
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        NotebookClient(
            nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(PROJECT_ROOT / "notebooks")}}
        ).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors[0]
    setup, findings, means, tables, figures, byo = (_text(c) for c in code)

    found = re.search(r"(\d+) of (\d+) declared runs are finished \(source=store\)", setup)
    assert found and int(found.group(1)) == int(found.group(2)) > 200, setup  # every declared run is stored
    assert "## Findings" in findings and "Holm" in findings
    counted = re.search(r"([\d,]+) per-query values of (\d+) runs on (\d+) datasets", means)
    assert (
        counted
        and int(counted.group(2)) > 200
        and int(counted.group(3)) >= 6
        and "lethe_iter3" in means
        and "ndcg@10" in means
    ), means
    csvs = sorted((PROJECT_ROOT / "results" / "tables").glob("*.csv"))
    assert f"{len(csvs)} tables" in tables and all(p.stem in tables for p in csvs)
    pngs = sorted((PROJECT_ROOT / "results" / "figures").glob("*.png"))
    shown = [o for o in code[4].get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(pngs) >= 7 and len(shown) == len(pngs) and f"{len(pngs)} figures" in figures

    # bring your own: a Python retriever and an outside TF-IDF run file beside bm25 and window, one wide table
    assert all(s in byo for s in ("overlap", "tfidf", "window", "bm25", "nDCG@10 Δ", "R@50 sig", "base")), byo
    assert "locomo/tfidf: " in byo and "were cut" in byo  # the run file ranks later turns, which are cut
    assert (PROJECT_ROOT / "results" / "notebook" / "tfidf.trec").is_file()  # OUT is the checkout's, not notebooks/'s
    assert _git_status() == before  # it wrote only under ignored folders
