"""Build processed datasets: ``python -m experiments.build_data locomo [more names] [overrides]``.

No name (or ``--all``) builds every dataset config except ``custom``.
Extra arguments of the form key=value are Hydra overrides (e.g. data.root=/path/to/data).
"""

from __future__ import annotations

import json
import logging
import sys

from experiments.config import all_dataset_names, load_config
from experiments.datasets import prepare_dataset
from lethebench.schema import read_dataset


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    force = "--force" in argv
    argv = [a for a in argv if a not in ("--force", "--all")]
    names = [a for a in argv if "=" not in a] or all_dataset_names()
    overrides = [a for a in argv if "=" in a]
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in names:
        cfg = load_config([f"dataset={name}", *overrides])
        folder = prepare_dataset(cfg, force=force)
        card = read_dataset(folder, name).card
        print(f"{name}: {folder}\n  {json.dumps(card['counts'])}")


if __name__ == "__main__":
    main()
