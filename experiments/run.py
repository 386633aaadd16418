"""Hydra entry point: one (dataset, method) run per job.

    python -m experiments.run dataset=locomo method=bm25
    python -m experiments.run -m method=window,bm25,vector dataset=locomo
    python -m experiments.run -m method=window,bm25,vector hydra/launcher=joblib
"""

from __future__ import annotations

import logging

import hydra
from omegaconf import DictConfig

from experiments.runner import run_experiment


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> str:
    logging.getLogger("experiments").setLevel(logging.INFO)
    return str(run_experiment(cfg))


if __name__ == "__main__":
    main()
