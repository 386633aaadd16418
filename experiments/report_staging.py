"""All-or-nothing reports: one invocation's report groups are written into a scratch folder and swapped in at the end.

Every report group's folder (:func:`experiments.publishing.report_dir`: ``results/`` and ``results/seeds/`` for
``make report``) is mapped to the same place under one scratch folder ``.<root>.report.<random>.tmp`` beside their
common root, so every relative link between the groups' files reads as it will in place. The report, tables,
figures, cards, seed report and site are written there; only when every group succeeded is each entry a group
wrote (``report.md``, ``tables/``, ``figures/``, ``cards/``, ``site/``, ...) moved over its old version, one atomic
rename or folder exchange each, and the scratch folder removed. A report that fails or is killed (however: the
scratch folder's lock dies with it and the next report removes it) leaves the previous set exactly as it was. Only
the swap itself, a few renames at the very end, is not one step.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lethe.core.atomic import replace_entry, scratch_dir


class StagedReports:
    """The scratch copy of an invocation's report folders: :attr:`cfg` writes there, :meth:`step` records what each
    write adds, :meth:`swap` moves it into place."""

    def __init__(self, finals: Mapping[str, Path], scratch: Path, root: Path, cfg: DictConfig) -> None:
        self.finals = {g: Path(f) for g, f in finals.items()}
        self.root, self.scratch = root, scratch
        self.staged = {g: scratch / os.path.relpath(f, root) for g, f in self.finals.items()}
        self.entries: dict[str, set[str]] = {g: set() for g in finals}
        self.cfg = _redirected(cfg, self.staged)

    def _children(self, group: str) -> set[str]:
        folder = self.staged[group]
        others = {p for g, p in self.staged.items() if g != group}
        return {p.name for p in folder.iterdir() if p not in others} if folder.is_dir() else set()

    @contextlib.contextmanager
    def step(self, group: str) -> Iterator[None]:
        """Record the entries of ``group``'s folder that the block writes."""
        before = self._children(group)
        try:
            yield
        finally:
            self.entries[group] |= self._children(group) - before

    def in_place(self, exc: BaseException) -> str:
        """``exc``'s message with each scratch folder named as the folder it stands for."""
        text = str(exc)
        for group, staged in sorted(self.staged.items(), key=lambda g: -len(str(g[1]))):
            text = text.replace(str(staged), str(self.finals[group]))
        return text

    def swap(self) -> list[Path]:
        """Move every recorded entry over its final path; the final paths."""
        moved = []
        for group, names in self.entries.items():
            for name in sorted(names):
                dest = self.finals[group] / name
                replace_entry(self.staged[group] / name, dest)
                moved.append(dest)
        return moved


def _redirected(cfg: DictConfig, staged: Mapping[str, Path]) -> DictConfig:
    """``cfg`` with each report group's folder (``committed_dir`` when it names the group and the report reads the
    store, else ``out_dir``) pointing at its scratch copy."""
    from experiments.reproduce_settings import from_store

    out = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    OmegaConf.set_struct(out, False)
    committed = cfg.get("committed_dir") or {}
    for group, folder in staged.items():
        section = "committed_dir" if from_store(cfg) and group in committed else "out_dir"
        out[section][group] = str(folder)
    return out


@contextlib.contextmanager
def staged_reports(groups: Sequence[str], cfg: DictConfig) -> Iterator[StagedReports]:
    """A :class:`StagedReports` for ``groups`` (written with ``cfg``) for the block; the caller swaps it in."""
    from experiments.publishing import report_dir

    finals = {g: report_dir(g, cfg) for g in groups}
    root = Path(os.path.commonpath([str(f) for f in finals.values()])) if finals else Path(".")
    with scratch_dir(root.parent / f"{root.name}.report") as scratch:
        yield StagedReports(finals, scratch, root, cfg)
