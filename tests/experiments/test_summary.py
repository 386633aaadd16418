"""python -m experiments.summary (conf/summary.yaml): one line per finished run under results_dir; the
command line itself (a Hydra app) runs from any folder without leaving outputs/ there or changing it."""

from __future__ import annotations

import pytest

from experiments.config import load_config
from experiments.summary import summary
from tests.support.processes import run_module


def test_top_config_holds_the_run_configs_results_dir():
    assert load_config([], config_name="summary").results_dir == load_config([]).results_dir
    assert load_config(["results_dir=/x"], config_name="summary").results_dir == "/x"


def test_one_line_per_finished_run(work, e2e_runs):
    table = summary(load_config([f"results_dir={work['results']}"], config_name="summary"))
    assert table.splitlines()[0].split()[7:12] == ["nDCG@10", "R@10", "R@50", "RR@10", "P@10"]  # ir_measures names
    for method, folder in e2e_runs.items():
        assert any(f" {method} " in line and folder.name[:8] in line for line in table.splitlines())


ASKED = ["nDCG@10", "R@100", "R@1000", "Judged@10", "P(rel=2)@5"]  # the issue's own list, as a user writes it


def test_the_metrics_asked_for_are_the_columns_and_equal_ir_measures_per_query(work, capsys, tmp_path):
    """run.metrics decides the columns of the end-of-run table, the summary and the site's run page, as written; the measures
    ranx lacks (Judged@10, P(rel=2)@5) come from ir_measures, and every value equals ir_measures per query."""
    import ir_measures

    from experiments.runner import run_experiment
    from lethebench.runs import RunFolder
    from tests.conftest import overrides_for

    asked = "run.metrics=[" + ",".join(f"'{m}'" for m in ASKED) + "]"
    over = overrides_for({**work, "results": tmp_path}, "method=bm25", "dataset.scopes=[conv-26]", asked)
    over = [o if o != "run.print_summary=false" else "run.print_summary=true" for o in over]
    folder = RunFolder(run_experiment(load_config(over)))
    header = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("dataset "))
    assert header.split()[7:12] == ASKED
    table = summary(load_config([f"results_dir={tmp_path}", asked], config_name="summary"))
    assert table.splitlines()[0].split()[7:12] == ASKED
    # per query: ir_measures on the run's own files, in its written order (rank-derived scores)
    ranked = {q: {d: float(len(r) - i) for i, (d, _) in enumerate(r)} for q, r in folder.run.items() if r}
    measures = [ir_measures.parse_measure(m) for m in ASKED]
    theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures, folder.qrels, ranked)}
    pq = folder.per_query.set_index("query_id")
    for name, column in zip(ASKED, ["ndcg@10", "recall@100", "recall@1000", "Judged@10", "P(rel=2)@5"], strict=True):
        ours = pq.loc[list(folder.qrels), column]
        assert ours.tolist() == pytest.approx([theirs.get((q, name), 0.0) for q in ours.index], abs=1e-9), name
    assert 0 < pq["Judged@10"].mean() < 1 and folder.metrics["means"]["P(rel=2)@5"] == pytest.approx(
        pq.loc[list(folder.qrels), "P(rel=2)@5"].mean()
    )
    # the site's run page lists the same names, as written, with the stored means
    from analysis.site import asked_metrics

    shown = asked_metrics(folder.manifest, folder.metrics)
    assert [m for m, _ in shown] == ASKED and "n/m" not in dict(shown).values()
    assert dict(shown)["P(rel=2)@5"] == f"{folder.metrics['means']['P(rel=2)@5']:.4f}"
    # asked after the run (not stored): computed from its run files, the same values
    later = summary(load_config([f"results_dir={tmp_path}", "run.metrics=['AP(rel=2)',Bpref]"], config_name="summary"))
    assert later.splitlines()[0].split()[7:9] == ["AP(rel=2)", "Bpref"] and "n/m" not in later.splitlines()[2]


def test_no_finished_runs_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match="no finished runs"):
        summary(load_config([f"results_dir={tmp_path}"], config_name="summary"))


def test_the_command_line_from_another_folder(tmp_path):
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    r = run_module(
        "experiments.summary", f"results_dir={tmp_path / 'none'}", f"hydra.run.dir={tmp_path / 'hydra'}", cwd=cwd
    )
    assert r.returncode != 0 and "no finished runs under" in r.stderr + r.stdout
    assert list(cwd.iterdir()) == []  # no outputs/ folder, nothing else
    assert (tmp_path / "hydra" / ".hydra" / "config.yaml").is_file()  # Hydra's record of the resolved config
