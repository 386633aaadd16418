"""Hydra launcher plugins of the Lethe harness (Hydra instantiates launchers only from the ``hydra_plugins``
namespace). Self-contained: Hydra imports every module here at start-up, so nothing of the project is imported.
"""

from __future__ import annotations

import shutil
from typing import Any, Sequence

from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as _SubmititSlurm


class SlurmNotAvailable(RuntimeError):
    """hydra/launcher=slurm on a machine without Slurm's ``sbatch``."""


class SlurmLauncher(_SubmititSlurm):
    """hydra-submitit-launcher's Slurm launcher, which first checks that ``sbatch`` exists, so that a sweep
    on a machine without Slurm fails before any job is pickled or submitted (conf/hydra/launcher/slurm.yaml)."""

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        if shutil.which("sbatch") is None:
            raise SlurmNotAvailable(
                "hydra/launcher=slurm needs Slurm: `sbatch` is not on PATH on this machine. Run the sweep on a "
                "Slurm login node, or here with hydra/launcher=local (submitit processes) or without a launcher "
                "override (one job at a time)."
            )
        return super().launch(job_overrides, initial_job_idx)
