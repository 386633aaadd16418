"""A tier's studies (modules run as their own processes, most of them calling the LLMs): their folders, command lines,
atomic runs, drift from the current settings, and their tables and documents for the report."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from analysis.declared_runs import DAMAGED_FOLDER
from analysis.site import printed_command
from experiments import reference_store as RS
from experiments.config import load_config, to_dict
from experiments.datasets import dataset_build_key
from experiments.prerequisites import Step, data_step
from experiments.reference import Study, load_tier, processed_folder, report_tiers, resolve
from experiments.reproduce_settings import base_overrides, from_store, tier_overrides
from experiments.store_seal import sealed_damage
from lethe.core.paths import Paths, machine_roots
from lethebench.studies import MANIFEST, StudyFolder


def study_folder(study: Study, cfg: DictConfig) -> Path:
    """``<results_dir>/studies/<name>`` of the run config the tier's runs use (``source=store``: the store's copy)."""
    if from_store(cfg):
        store = Paths.of(cfg).reference_store
        folder = RS.study_folder(store, study.tier, study.name)
        return folder / DAMAGED_FOLDER if sealed_damage(store, study.tier).of_study(study.name) else folder
    run_cfg = load_config([*tier_overrides(study.tier, cfg), *base_overrides(cfg)])
    return Paths.of(run_cfg).results / "studies" / study.name


def _override_value(value: object) -> str:
    """``value`` as a Hydra override value: as is when plain, else single-quoted."""
    text = str(value)
    if re.fullmatch(r"[\w/.\-+@%:]+", text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def study_dataset(study: Study, cfg: DictConfig) -> tuple[DictConfig, Path]:
    """The run config of the dataset ``study`` names (with the tier's and the command's overrides) and its
    processed folder."""
    ds_cfg = load_config([f"dataset={study.dataset}", *tier_overrides(study.tier, cfg), *base_overrides(cfg)])
    return ds_cfg, processed_folder(ds_cfg, dataset_build_key(ds_cfg))


def study_data_steps(studies: Sequence[Study], cfg: DictConfig, seen: set[str]) -> list[Step]:
    """The dataset builds the pending ``studies`` read and no step in ``seen`` makes (a tier of studies alone,
    such as ``judges``, starts from a fresh clone)."""
    return [step for st in studies if st.dataset for step in data_step(*study_dataset(st, cfg), seen)]


def study_command(study: Study, cfg: DictConfig) -> list[str]:
    """The study's command line: its declared overrides of its own top config, then its output folder
    (:func:`study_folder`), the run config's cache dir and (if named) processed dataset folder."""
    extra = [*tier_overrides(study.tier, cfg), *base_overrides(cfg)]
    run_cfg = load_config(extra)
    cmd = [
        sys.executable,
        "-m",
        study.module,
        *study.overrides,
        f"out_dir={_override_value(study_folder(study, cfg))}",
        f"cache_dir={_override_value(Paths.of(run_cfg).cache)}",
    ]
    if study.dataset:
        cmd.append(f"dataset_folder={_override_value(study_dataset(study, cfg)[1])}")
    if study.runs:
        declared = {r.key: r for r in load_tier(study.tier, cfg.reference_dir).runs}
        folders = {name: resolve(declared[key], base_overrides(cfg)).folder for name, key in study.runs}
        cmd.append("run_folders={" + ", ".join(f"{n}: {_override_value(f)}" for n, f in folders.items()) + "}")
    return cmd


def run_study(study: Study, cfg: DictConfig) -> Path:
    """Run a study as its own process; it writes its folder whole (lethebench.studies.StudyFolder.write: a crash
    leaves nothing) under the study's lock."""
    final = study_folder(study, cfg)
    with StudyFolder(final).claim():
        cmd = study_command(study, cfg)
        print("$ " + " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, cwd=Paths.default().root, check=True)
    return final


# Paths in a study's config that depend on where it ran, not on what it measured: compared by their last part (a
# run's or dataset's content hash), or not at all.
_STUDY_PATHS_BY_NAME = ("dataset_folder", "run_folders")
_STUDY_PATHS_IGNORED = ("out_dir", "cache_dir")


def _last_part(value: Any) -> Any:
    """A path's last part, or a mapping's paths' (``run_folders``: name -> folder)."""
    if isinstance(value, Mapping):
        return {k: Path(str(v)).name for k, v in value.items()}
    return Path(str(value)).name


def _comparable(config: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in config.items() if k not in _STUDY_PATHS_IGNORED}
    for key in _STUDY_PATHS_BY_NAME:
        if out.get(key):
            out[key] = _last_part(out[key])
    return out


def study_drift(study: Study, cfg: DictConfig) -> list[str]:
    """The config keys whose values differ between a finished study's manifest and what its command composes now
    (a changed default, declared override or read run); [] when it matches or has not run."""
    man_path = study_folder(study, cfg) / MANIFEST
    if not man_path.is_file():
        return []
    made = _comparable(json.loads(man_path.read_text()).get("config") or {})
    now = _comparable(
        OmegaConf.to_container(
            load_config(study_command(study, cfg)[3:], config_name=study.module.rsplit(".", 1)[-1]), resolve=True
        )
    )
    return sorted(k for k in {*made, *now} if made.get(k) != now.get(k))


def study_done(study: Study, cfg: DictConfig) -> bool:
    """Finished (``DONE``) and made with the config its command composes now; a drifted study is made again
    (a study of the reference store is as it was stored)."""
    if not StudyFolder(study_folder(study, cfg)).is_done:
        return False
    if from_store(cfg):
        return True
    drift = study_drift(study, cfg)
    if drift:
        print(f"study {study.name}: made with other settings ({', '.join(drift)}); it will be made again", flush=True)
    return not drift


def publish_studies(report: str, cfg: DictConfig, out_dir: Path) -> list[str]:
    """Copy each finished study's Markdown and JSON into the report folder; Markdown lines for the report."""
    lines = []
    for t in report_tiers(report, cfg.reference_dir):
        if not t.studies:
            continue
        roots = machine_roots(to_dict(load_config([*tier_overrides(t.name, cfg), *base_overrides(cfg)])))
        for st in t.studies:
            folder = StudyFolder(study_folder(st, cfg))
            dest = out_dir / st.publish
            if not folder.is_done:
                damaged = folder.path.name == DAMAGED_FOLDER
                lines.append(
                    f"- `{st.name}` (tier {t.name}): "
                    + (
                        "DAMAGED in the reference store (its files differ from the tier's seal)"
                        if damaged
                        else "not run"
                    )
                    + " (n/m†)"
                )
                continue
            dest.mkdir(parents=True, exist_ok=True)
            for f in sorted(folder.path.glob("*.md")) + sorted(
                folder.path.glob("*.json")
            ):  # the manifest as <name>.manifest.json
                RS.publish_portable(f, dest / (f"{st.name}.{f.name}" if f.name == MANIFEST else f.name), roots)
            md = folder.tables
            link = f"{st.publish}/{md[0].name}" if md else st.publish
            command = printed_command(RS.portable_text(str(folder.command), roots))  # as it runs now
            lines.append(f"- [`{st.name}`]({link}) (tier {t.name}): `{command}`")
    return lines


def _finished_studies(report: str, cfg: DictConfig) -> Iterator[tuple[Study, StudyFolder]]:
    """(study, folder) of every study of the report group ``report`` whose folder is finished (``DONE``)."""
    for t in report_tiers(report, cfg.reference_dir):
        for st in t.studies:
            folder = StudyFolder(study_folder(st, cfg))
            if folder.is_done:
                yield st, folder


def study_tables(report: str, cfg: DictConfig) -> dict[str, str]:
    """The Markdown table of every finished study of the report group ``report`` (its first .md file), by name."""
    tables = {st.name: folder.table for st, folder in _finished_studies(report, cfg)}
    return {name: text for name, text in tables.items() if text is not None}


def study_docs(report: str, cfg: DictConfig) -> dict[str, dict]:
    """The JSON document of every finished study of the report group ``report`` (its first .json file other than
    the manifest), by name: what the claims table reads (analysis/claims.py)."""
    docs = {st.name: folder.document for st, folder in _finished_studies(report, cfg)}
    return {name: doc for name, doc in docs.items() if doc is not None}
