"""Build processed datasets (settings: ``conf/build_data.yaml``).

    python -m experiments.build_data dataset=locomo                   # one dataset
    python -m experiments.build_data -m dataset=locomo,techqa         # several (a Hydra sweep)
    python -m experiments.build_data -m 'dataset=glob(*,exclude=[custom,beir])'   # every dataset (make data)
    python -m experiments.build_data dataset=lethebench force=true data.root=/data

Any key of the run config is an override (``data.root``, ``data.processed``, ``chunking.*``,
``dataset.params.*``); :func:`build_data` does the work from a composed config.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from experiments.datasets import prepare_dataset
from lethe.core.arguments import check_arguments
from lethebench.schema import read_dataset


def build_data(cfg: DictConfig) -> Path:
    """Build (or reuse; rebuild with ``cfg.force``) the processed folder of ``cfg.dataset``; print its counts."""
    folder = prepare_dataset(cfg, force=bool(cfg.force))
    card = read_dataset(folder, cfg.dataset.name).card
    print(f"{cfg.dataset.name}: {folder}\n  {json.dumps(card['counts'])}", flush=True)
    return folder


@hydra.main(config_path="../conf", config_name="build_data", version_base="1.3")
def main(cfg: DictConfig) -> None:
    build_data(cfg)


if __name__ == "__main__":
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
