"""What a job records about where it ran, for sweeps beyond this machine.

``hydra/launcher=slurm`` (conf/hydra/launcher/slurm.yaml; the launcher class is
hydra_plugins.lethe_launchers.SlurmLauncher) submits each job of a multirun sweep to Slurm through
hydra-submitit-launcher; ``hydra/launcher=local`` runs them as local submitit processes (all at
once, so their latencies are contaminated: :func:`launch_info` marks such runs ``concurrent``, and the
run's ``timing_valid`` flag greys their latencies out in the report).
"""

from __future__ import annotations

import os
import socket
from typing import Any

# launcher choice (hydra/launcher=...) -> whether its jobs run at the same time on one machine
CONCURRENT_ON_ONE_MACHINE = {
    "basic": False,
    "joblib": True,
    "local": True,
    "submitit_local": True,
    "slurm": False,
    "slurm_gpu": False,
    "submitit_slurm": False,
}


def launch_info() -> dict[str, Any]:
    """Where this job ran, for its manifest: the Hydra launcher (``none`` outside a Hydra job, e.g. a run
    made by experiments.reproduce), its job id and number, the node, the Slurm job id if any, and whether
    the launcher runs its jobs concurrently on one machine (their latencies then contend)."""
    from hydra.core.hydra_config import HydraConfig

    info: dict[str, Any] = {
        "launcher": "none",
        "job_id": None,
        "job_num": None,
        "node": socket.gethostname(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "concurrent": False,
    }
    if HydraConfig.initialized():
        hc = HydraConfig.get()
        launcher = str(hc.runtime.choices.get("hydra/launcher") or "basic")
        multirun = str(hc.mode) == "RunMode.MULTIRUN"
        info.update(launcher=launcher, job_id=hc.job.get("id"), job_num=hc.job.get("num") if multirun else None)
        if launcher == "joblib":
            n_jobs = hc.launcher.get("n_jobs", -1)
            info["concurrent"] = multirun and n_jobs != 1
        else:
            info["concurrent"] = multirun and CONCURRENT_ON_ONE_MACHINE.get(launcher, False)
    return info
