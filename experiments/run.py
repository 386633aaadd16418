"""Hydra entry point: one (dataset, method) run per job.

python -m experiments.run dataset=locomo method=bm25
python -m experiments.run -m method=window,bm25,vector dataset=locomo
python -m experiments.run -m method=window,bm25,vector hydra/launcher=joblib
"""

from __future__ import annotations

import logging
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from experiments.runner import run_job
from lethe.core.arguments import check_arguments
from lethe.core.typed_config import ConfigError


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, object]:
    logging.getLogger("experiments").setLevel(logging.INFO)
    try:
        out = run_job(cfg)
    except ConfigError as exc:  # a refused config: one line, not Hydra's traceback (a sweep still records the job)
        if HydraConfig.get().mode != RunMode.RUN:
            raise
        raise SystemExit(f"Error: {exc}") from None
    return {"folder": str(out.folder), "skipped": out.skipped}  # the sweep's progress line reads "skipped"


if __name__ == "__main__":
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
