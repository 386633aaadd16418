"""A tier of your own data (issue 36, item 3): a LoCoMo-format file run under its own ``dataset.name``, as
conf/dataset/locomo.yaml says to, computed and then crashed at ``action=report`` ("holds mine/bm25, not the
declared locomo/bm25"). A declared run is now reported under the dataset name its config gives."""

from __future__ import annotations

import json

import yaml

from experiments import reproduce as R
from lethe.core.paths import CONF_DIR
from tests.conftest import DATA_ROOT


def test_a_locomo_format_file_under_its_own_name_is_run_and_reported(tmp_path, work):
    data = tmp_path / "data" / "mine"
    data.mkdir(parents=True)
    convs = json.loads((DATA_ROOT / "locomo" / "locomo10.json").read_text())
    (data / "convs.json").write_text(json.dumps(convs[:1]))  # one conversation of your own, in LoCoMo's format
    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "tolerances.yaml").write_text((CONF_DIR / "reference" / "tolerances.yaml").read_text())
    (ref / "mine.yaml").write_text(
        yaml.safe_dump(
            {
                "description": "my conversations",
                "report": "mine",
                "runs": [
                    {
                        "datasets": ["locomo"],
                        "methods": ["window", "bm25"],
                        "overrides": [
                            "dataset.name=mine",
                            "dataset.files=[mine/convs.json]",
                            f"data.root={tmp_path / 'data'}",
                        ],
                    }
                ],
            }
        )
    )
    args = [
        "tier=mine",
        f"reference_dir={ref}",
        f"expected_dir={tmp_path / 'expected'}",
        f"results_dir={tmp_path / 'results'}",
        f"data.processed={work['processed']}",
        f"cache_dir={work['cache']}",
        f"out_dir.reference={tmp_path / 'local'}",
        "run.progress=false",
        "analysis.bootstrap_resamples=200",
        "analysis.permutation_resamples=200",
    ]
    assert R.reproduce(R.load([*args, "action=run"])) == 0
    assert sorted(p.name for p in (tmp_path / "results").iterdir() if not p.name.startswith(".")) == ["mine"]
    assert R.reproduce(R.load([*args, "action=report"])) == 0
    # a report group out_dir does not name goes to <out_dir.reference>/<group>: no +out_dir.mine=... needed
    report = (tmp_path / "local" / "mine" / "report.md").read_text()
    assert "| mine | bm25 | mine |" in report and "| method | supervision | mine |" in report
    assert "locomo" not in report.split("## Overview")[1].split("##")[0]  # the overview names your data, not LoCoMo
