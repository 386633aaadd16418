"""Hydra launcher plugins of the Lethe harness (Hydra instantiates launchers only from the ``hydra_plugins``
namespace). Self-contained: Hydra imports every module here at start-up, so nothing of the project is imported.

- :class:`SlurmLauncher` (conf/hydra/launcher/slurm.yaml): hydra-submitit-launcher's Slurm launcher, which refuses a
  machine without ``sbatch`` before anything is pickled, checks that the virtual environment its ``setup`` lines
  activate exists, prints the composed settings, the job list and the sbatch script without submitting when
  ``hydra.launcher.dry_run=true``, and prints a progress line in the submitting terminal as each job ends.
- :class:`LocalLauncher` (conf/hydra/launcher/local.yaml): submitit's local executor, with the same progress lines.
- The resolver ``${lethe_project_root:}``: the checkout holding this plugin (marked by ``.project-root``), resolved
  when the launcher is made, i.e. when the sweep is launched; slurm.yaml's default ``setup`` activates its ``.venv``.
"""

# no `from __future__ import annotations`: Hydra executes this module during plugin discovery without registering
# it in sys.modules, where dataclasses would look up string annotations
import dataclasses
import logging
import math
import os
import shlex
import shutil
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from omegaconf import OmegaConf

from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf, SlurmQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher as _SubmititLocal
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as _SubmititSlurm

log = logging.getLogger(__name__)

ROOT_MARKER = ".project-root"  # as lethe.core.paths.ROOT_MARKER (not imported: see the module docstring)
DOCS = "docs/running.md, 'Clusters (Slurm), local submitit and GPUs'"


class SlurmNotAvailable(RuntimeError):
    """hydra/launcher=slurm on a machine without Slurm's ``sbatch``."""


class MissingEnvironment(RuntimeError):
    """A ``setup`` line activates a virtual environment that does not exist."""


def project_root() -> Path:
    """The checkout holding this plugin if it carries ``.project-root``, else the nearest folder at or above the
    working directory that does (an installed, non-editable copy of the plugin); RuntimeError if neither."""
    here = Path(__file__).resolve().parents[2]
    cwd = Path.cwd().resolve()
    for d in (here, cwd, *cwd.parents):
        if (d / ROOT_MARKER).is_file():
            return d
    raise RuntimeError(
        f"${{lethe_project_root:}}: no {ROOT_MARKER} marker in {here} nor at or above {cwd}; run the sweep from the "
        "project folder, or set hydra.launcher.setup to explicit paths"
    )


OmegaConf.register_new_resolver("lethe_project_root", lambda: str(project_root()), replace=True)


@dataclass
class LetheSlurmQueueConf(SlurmQueueConf):
    """submitit_slurm's schema plus ``dry_run`` (print what would be submitted, submit nothing)."""

    _target_: str = "hydra_plugins.lethe_launchers.SlurmLauncher"
    dry_run: bool = False


ConfigStore.instance().store(
    group="hydra/launcher", name="lethe_submitit_slurm", node=LetheSlurmQueueConf(), provider="lethe_launchers"
)


@dataclass
class TimedJobReturn(JobReturn):
    """Hydra's JobReturn with the job's wall time and node, measured where the job ran."""

    seconds: float | None = None
    node: str | None = None


def fmt_seconds(s: float | None) -> str:
    """'42 s', '3 min 05 s', '1 h 02 min'; '?' when unknown (the format of experiments.progress.fmt_seconds)."""
    if s is None or not math.isfinite(s):
        return "?"
    s = float(round(max(0.0, float(s))))
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


def _yaml_value(v: Any) -> str:
    """A launcher setting spelled as in the YAML files (null, true, false)."""
    return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def job_names(job_overrides: Sequence[Sequence[str]]) -> list[str]:
    """A short name per job: its overrides whose value differs between the jobs (all of them if none differ)."""
    given = [list(filter_overrides(o)) for o in job_overrides]
    values: dict[str, set[str]] = {}
    for overrides in given:
        for o in overrides:
            key, _, value = o.partition("=")
            values.setdefault(key.lstrip("+~"), set()).add(value)
    for overrides in given:
        present = {o.partition("=")[0].lstrip("+~") for o in overrides}
        for key in values:
            if key not in present:
                values[key].add("\0absent")
    swept = {k for k, v in values.items() if len(v) > 1}
    names = []
    for i, overrides in enumerate(given):
        picked = [o for o in overrides if o.partition("=")[0].lstrip("+~") in swept]
        names.append(" ".join(picked or overrides) or f"job {i}")
    return names


def error_summary(exc: BaseException) -> str:
    """One line for a failed job's error: the exception's first line; for submitit's errors, the line that says
    what happened (a job without a result: its state; a job that raised in submitit: the trace's last line)."""
    name = type(exc).__name__
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
    dashes = [i for i, x in enumerate(lines) if set(x) == {"-"}]
    if name == "UncompletedJobError" and len(lines) >= 2:
        text = f"the job ended without a result: it {lines[1]}"  # "has not produced any output (state: ...)"
    elif name == "FailedJobError" and len(dashes) >= 2:
        text = lines[dashes[1] - 1]
    else:
        text = lines[0] if lines else ""
    return f"{name}: {text}"[:400]


def follow_jobs(
    jobs: Sequence[Any],
    job_overrides: Sequence[Sequence[str]],
    poll_s: float,
    out: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
) -> list[JobReturn]:
    """Wait for every submitit job, printing ``[done/total] name: status in X · elapsed Y`` as each one ends, in the
    order they end. A job that raised in Hydra, or ended without a result (killed, out of memory, over its time
    limit), is printed FAILED with its error and log, and returned as a FAILED JobReturn: the sweeper raises its
    error once every job has ended, so no job is lost behind an earlier failure."""
    names = job_names(job_overrides)
    total, start = len(jobs), clock()
    results: list[JobReturn | None] = [None] * total
    waiting = list(range(total))
    here = socket.gethostname()
    while waiting:
        for i in list(waiting):
            if not jobs[i].done():
                continue
            waiting.remove(i)
            try:
                ret = jobs[i].results()[0]
            except Exception as exc:  # the job left no result: recorded as FAILED, raised later by the sweeper
                ret = JobReturn(overrides=list(job_overrides[i]), status=JobStatus.FAILED)
                ret.return_value = exc
            results[i] = ret
            value = ret._return_value
            if ret.status == JobStatus.FAILED:
                status = "FAILED"
            elif isinstance(value, dict) and value.get("skipped"):
                status = "skipped"
            else:
                status = "done"
            seconds, node = getattr(ret, "seconds", None), getattr(ret, "node", None)
            took = f" in {fmt_seconds(seconds)}" if seconds is not None else ""
            where = f" on {node}" if node and node != here else ""
            out(
                f"[{total - len(waiting)}/{total}] {names[i]}: {status}{took}{where} · "
                f"elapsed {fmt_seconds(clock() - start)}"
            )
            if status == "FAILED":
                paths = getattr(jobs[i], "paths", None)
                logs = f" (log: {paths.stderr})" if paths is not None else ""
                out(f"    {error_summary(value)}{logs}")
        if waiting:
            time.sleep(poll_s)
    return [r for r in results if r is not None]


class _FollowingLauncher:
    """hydra-submitit-launcher's launch (version 1.2.0), ending with :func:`follow_jobs` instead of waiting on each
    job's ``results()`` in turn, and timing each job where it runs."""

    POLL_S = 1.0  # as submitit's own Job.wait(); submitit throttles the sacct calls behind job.done() itself
    # how long an ended job's result file is waited for (submitit's default, 15 s, covers a shared file system's lag)
    RESULTS_WAIT_S: float | None = None
    params: dict[str, Any]
    config: Any
    _EXECUTOR: str

    def __call__(self, *args: Any, **kwargs: Any) -> JobReturn:
        start = time.monotonic()
        ret = super().__call__(*args, **kwargs)  # type: ignore[misc]
        fields = {f.name: getattr(ret, f.name) for f in dataclasses.fields(ret)}
        return TimedJobReturn(**fields, seconds=time.monotonic() - start, node=socket.gethostname())

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import submitit

        assert self.config is not None and len(job_overrides) > 0
        init_keys = {"submitit_folder", "max_num_timeout"}
        init_params = {"folder": self.params["submitit_folder"]}
        init_params.update({f"{self._EXECUTOR}_{k}": v for k, v in self.params.items() if k == "max_num_timeout"})
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init_params)
        executor.update_parameters(**submitit_parameters(self.params, self._EXECUTOR, init_keys))

        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        log.info(f"Submitit '{self._EXECUTOR}' sweep output dir : {sweep_dir}")
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep:
            os.chmod(sweep_dir, mode=int(str(self.config.hydra.sweep.mode), 8))
        job_params = []
        for n, overrides in enumerate(job_overrides):
            idx = initial_job_idx + n
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            job_params.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state()))
        jobs = executor.map_array(self, *zip(*job_params, strict=True))
        if self.RESULTS_WAIT_S is not None:
            for job in jobs:
                job._results_timeout_s = self.RESULTS_WAIT_S
        print(
            f"Submitted {len(jobs)} job(s) to submitit's {self._EXECUTOR} executor (logs under "
            f"{executor.folder}); a line as each one ends:",
            flush=True,
        )
        return follow_jobs(jobs, job_overrides, self.POLL_S, out=lambda line: print(line, flush=True))


def submitit_parameters(params: dict[str, Any], executor: str, init_keys: set[str]) -> dict[str, Any]:
    """The launcher's keys as hydra-submitit-launcher passes them to ``AutoExecutor.update_parameters``: the generic
    ones (BaseQueueConf's) as they are, every other one prefixed with the executor's name."""
    generic = set(OmegaConf.structured(BaseQueueConf).keys())
    return {k if k in generic else f"{executor}_{k}": v for k, v in params.items() if k not in init_keys}


class LocalLauncher(_FollowingLauncher, _SubmititLocal):
    """submitit's local executor (conf/hydra/launcher/local.yaml) with progress lines in the submitting terminal."""

    # a local job writes its result before its process ends, on this machine's disk: a job that ended without one
    # (killed, out of memory) is reported at once instead of after submitit's 15 s wait for a shared file system
    RESULTS_WAIT_S = 0.0


def venv_problems(setup: Sequence[str] | None) -> list[str]:
    """One message per ``setup`` line that sources a virtual environment's ``bin/activate`` missing here."""
    problems = []
    for line in setup or []:
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if len(words) >= 2 and words[0] in ("source", ".") and words[1].endswith("bin/activate") and "$" not in line:
            activate = Path(words[1])
            if not activate.is_file():
                problems.append(
                    f"hydra.launcher.setup line {line!r} activates the virtual environment {activate.parent.parent}, "
                    f"which does not exist ({activate} is missing). Create it there (make install), on a file system "
                    "the nodes see, or set hydra.launcher.setup to the lines that prepare your environment on the "
                    f"nodes ({DOCS})"
                )
    return problems


class SlurmLauncher(_FollowingLauncher, _SubmititSlurm):
    """hydra-submitit-launcher's Slurm launcher (conf/hydra/launcher/slurm.yaml). It first checks that ``sbatch``
    exists and that the environment its setup lines activate does, so that a sweep that cannot run fails before
    any job is pickled or submitted; ``dry_run=true`` prints what would be submitted and submits nothing."""

    POLL_S = 10.0  # result files checked every 10 s per job on a shared file system; sacct is throttled by submitit

    def __init__(self, dry_run: bool = False, **params: Any) -> None:
        super().__init__(**params)
        self.dry_run = bool(dry_run)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        if self.dry_run:
            self.print_dry_run(job_overrides, initial_job_idx)
            return []
        if shutil.which("sbatch") is None:
            raise SlurmNotAvailable(
                "hydra/launcher=slurm needs Slurm: `sbatch` is not on PATH on this machine. Run the sweep on a "
                "Slurm login node, or here with hydra/launcher=local (submitit processes) or without a launcher "
                "override (one job at a time). hydra.launcher.dry_run=true prints what would be submitted."
            )
        problems = venv_problems(self.params.get("setup"))
        if problems:
            raise MissingEnvironment("\n".join(problems))
        return super().launch(job_overrides, initial_job_idx)

    def sbatch_script(self, n_jobs: int) -> str:
        """The sbatch script submitit would submit for ``n_jobs`` jobs (an array when more than one), rendered by
        submitit's own Slurm executor from this launcher's parameters, translated as AutoExecutor does."""
        from submitit.auto.auto import AutoExecutor
        from submitit.slurm.slurm import SlurmExecutor

        class RenderOnly(SlurmExecutor):
            """Renders, never submits: no ``srun`` needed here, and no submission command."""

            @classmethod
            def affinity(cls) -> int:
                return 2

            def _make_submission_command(self, submission_file_path: Path) -> list[str]:
                raise RuntimeError("a dry run submits nothing")

        ex = RenderOnly(self.params["submitit_folder"], max_num_timeout=self.params.get("max_num_timeout", 3))
        given = {k: v for k, v in self.params.items() if k not in {"submitit_folder", "max_num_timeout"}}
        given = {k: v for k, v in given.items() if v is not None}
        generic = set(AutoExecutor._typed_parameters())
        parameters = ex._convert_parameters({k: v for k, v in given.items() if k in generic})
        parameters.update({k: v for k, v in given.items() if k not in generic})
        ex.update_parameters(**parameters)
        if n_jobs > 1:  # as SlurmExecutor's array submission
            ex.parameters["map_count"] = n_jobs
        return ex._make_submission_file_text(ex._submitit_command_str, "dry-run")

    def print_dry_run(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> None:
        """Print the composed settings, the job list and the sbatch script; submit nothing. Raises
        MissingEnvironment after printing when a setup line activates a missing environment."""
        p = self.params
        lines = [
            f"Dry run (hydra.launcher.dry_run=true): {len(job_overrides)} job(s) would be submitted to Slurm; "
            "nothing is submitted.",
            "Launcher settings (hydra.launcher):",
        ]
        main = ["partition", "account", "qos", "cpus_per_task", "mem_gb", "timeout_min", "gpus_per_node", "gres"]
        main += ["constraint", "array_parallelism", "submitit_folder"]
        for key in main + sorted(k for k in p if k not in main and k != "setup"):
            lines.append(f"  {key}: {_yaml_value(p.get(key))}")
        lines.append("  setup:" + ("" if p.get("setup") else " []"))
        lines += [f"    {line}" for line in p.get("setup") or []]
        lines.append(f"Jobs ({len(job_overrides)}):")
        for n, overrides in enumerate(job_overrides):
            lines.append(f"  #{initial_job_idx + n} : {' '.join(overrides)}")
        lines.append("sbatch script (submitit, as it would be submitted):")
        lines += [f"  | {x}" for x in self.sbatch_script(len(job_overrides)).splitlines()]
        if shutil.which("sbatch") is None:
            lines.append("Note: `sbatch` is not on PATH here; submit from a Slurm login node.")
        print("\n".join(lines), flush=True)
        problems = venv_problems(p.get("setup"))
        if problems:  # as the submission would
            raise MissingEnvironment("\n".join(problems))
