"""Export a processed dataset to BEIR's format (settings: ``conf/export_beir.yaml``).

    python -m experiments.export_beir dataset=lethebench out_dir=data/beir/lethebench
    python -m experiments.export_beir dataset=locomo out_dir=/tmp/locomo_beir
    python -m experiments.export_beir dataset=custom dataset.folder=/path/to/folder out_dir=/tmp/mine_beir

The dataset is built first if it is not (as ``experiments.build_data`` would); :func:`export` does the
work from a composed config and prints how to load the folder back with ``dataset=beir``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from experiments.datasets import prepare_dataset
from lethe.core.arguments import check_arguments
from lethe.core.paths import Paths
from lethebench.export_beir import beir_files, export_beir
from lethebench.schema import read_dataset


def export(cfg: DictConfig) -> Path:
    """Write ``cfg.dataset``'s processed folder as a BEIR folder at ``cfg.out_dir``; return that folder."""
    out = Paths.of(cfg).resolve(cfg.out_dir)  # before any work: a missing out_dir (???) stops here
    folder = prepare_dataset(cfg)
    ds = read_dataset(folder, cfg.dataset.name)
    export_beir(ds, out)
    files = ",".join(beir_files(out))
    print(
        f"{cfg.dataset.name}: {folder}\n  -> {out} ({len(ds.corpus)} docs, {len(ds.queries)} queries, "
        f"{sum(len(v) for v in ds.qrels.values())} qrels)\n  load it back: python -m experiments.build_data "
        f"dataset=beir dataset.name={cfg.dataset.name}_beir dataset.beir_dir={out} 'dataset.files=[{files}]'",
        flush=True,
    )
    return out


@hydra.main(config_path="../conf", config_name="export_beir", version_base="1.3")
def main(cfg: DictConfig) -> None:
    export(cfg)


if __name__ == "__main__":
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
