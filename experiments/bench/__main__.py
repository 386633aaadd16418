"""``python -m experiments.bench [sections=[...]] [key=value ...]`` (``make bench``; settings: ``conf/bench.yaml``)."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from experiments.bench import bench
from lethe.core.arguments import check_arguments


@hydra.main(config_path="../../conf", config_name="bench", version_base="1.3")
def main(cfg: DictConfig) -> None:
    bench(cfg)


if __name__ == "__main__":
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
