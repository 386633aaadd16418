"""ONNX Runtime inference for the sentence-transformers models (bi-encoder, cross-encoder) on CPU.

The torch model's whole sentence-transformers forward (a bi-encoder's Transformer + Pooling +
Normalize; a cross-encoder's Transformer with its one-logit head) is exported once with
``torch.onnx.export`` (the TorchScript exporter: it needs only the ``onnx`` package), so the graph
returns what the torch path returns: sentence embeddings (n, dim) or logits (n, 1). Inputs are the
tokenizer's tensors (``input_ids``, ``token_type_ids``, ``attention_mask``) with dynamic batch and
length; tokenization is the model's own (``model.preprocess``), identical to the torch path, or, once an export
exists, the model folder's ``tokenizer.json`` run by the ``tokenizers`` library alone (:class:`FileTokenizer`), so that
a process that only encodes loads neither torch's model nor sentence-transformers: each export records whether that
tokenizer gives exactly the model's token ids on a probe (:data:`TOKENIZER_PROBE`), and only then is it used.

Options (:class:`OnnxOptions`, from ``conf/model/*.yaml`` ``onnx:``): ``quantize`` ``none`` (fp32,
equal to the torch path within float rounding) or ``int8_dynamic`` (ONNX Runtime's dynamic int8
quantization of the weights: lossy, an option only), the export ``opset``, ONNX Runtime's intra-op
``threads`` (null: torch's thread count, so both paths use the same), its ``graph_optimization``
level and ``batch_size``, the inputs per run (null: the caller's; small batches of length-sorted
inputs keep the activations in cache, which pays on CPU).

Every export is checked against the torch model on a probe batch (two inputs of different lengths)
and an fp32 export that differs by more than :data:`FP32_CHECK_TOL` raises: no silent fallback.
Exports are cached in ``<cache_dir>/models/onnx/<key>/`` (``model.onnx`` + ``export.json`` + ``checksums.json``,
checked on every reuse: a damaged export is quarantined and made again), the key
being a hash of the source weights' sha256, the model kind, the model folder's config and tokenizer files
(:func:`structure_digest`), the export options and the versions of the exporting packages; each folder is written
atomically (:func:`lethe.core.atomic.atomic_dir`).

Batching: a list of inputs is tokenized in one call, sorted by token length (longest first) and cut
into batches of ``batch_size``, each trimmed to its own longest input, so padding stays small.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lethe.core.atomic import atomic_dir
from lethe.core.checksums import folder_damage, quarantine, write_checksums
from lethe.core.devices import onnx_providers
from lethe.core.hashing import content_hash, sha256_file, sha256_text

log = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx")
QUANTIZE = ("none", "int8_dynamic")
GRAPH_OPTIMIZATION = ("disable", "basic", "extended", "all")
KINDS = {"bi_encoder": "sentence_embedding", "cross_encoder": "scores"}  # kind -> the ST forward output exported
RECIPE = 1  # bump when the export recipe below changes (a new cache key)
FP32_CHECK_TOL = 1e-3  # largest |torch - onnx| allowed on the probe batch of an fp32 export
ONNX_FILE = "model.onnx"
EXPORT_JSON = "export.json"
PROBE = [
    (
        "What did Caroline research last week?",
        "Caroline said she researched adoption agencies for LGBTQ+ people and found two in her city.",
    ),
    ("db2 error", "SQL0805N"),
]


class OnnxExportError(RuntimeError):
    """The export to ONNX failed or its output disagrees with the torch model."""


def check_backend(backend: str) -> str:
    """``backend`` if it is one of :data:`BACKENDS`, else ValueError."""
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: expected one of {list(BACKENDS)}")
    return backend


@dataclass(frozen=True)
class OnnxOptions:
    """ONNX export and ONNX Runtime session settings (every key comes from config)."""

    quantize: str  # "none" (fp32) or "int8_dynamic" (lossy)
    opset: int  # ONNX opset of the export
    threads: int | None  # ONNX Runtime intra-op threads; None = torch.get_num_threads()
    graph_optimization: str  # ONNX Runtime graph optimization level (disable, basic, extended, all)
    batch_size: int | None  # inputs per ONNX Runtime run; None = the caller's batch size (the torch path's)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | OnnxOptions) -> OnnxOptions:
        """From a config mapping holding exactly the five keys (ValueError otherwise)."""
        if isinstance(cfg, OnnxOptions):
            return cfg
        keys = {"quantize", "opset", "threads", "graph_optimization", "batch_size"}
        given = set(cfg)
        if given != keys:
            raise ValueError(
                f"onnx options: expected keys {sorted(keys)}, got {sorted(given)} "
                f"(missing {sorted(keys - given)}, unknown {sorted(given - keys)})"
            )
        opts = cls(
            quantize=str(cfg["quantize"]),
            opset=int(cfg["opset"]),
            threads=None if cfg["threads"] is None else int(cfg["threads"]),
            graph_optimization=str(cfg["graph_optimization"]),
            batch_size=None if cfg["batch_size"] is None else int(cfg["batch_size"]),
        )
        if opts.quantize not in QUANTIZE:
            raise ValueError(f"onnx.quantize={opts.quantize!r}: expected one of {list(QUANTIZE)}")
        if opts.graph_optimization not in GRAPH_OPTIMIZATION:
            raise ValueError(
                f"onnx.graph_optimization={opts.graph_optimization!r}: expected one of {list(GRAPH_OPTIMIZATION)}"
            )
        for key in ("threads", "batch_size"):
            if getattr(opts, key) is not None and getattr(opts, key) < 1:
                raise ValueError(f"onnx.{key} must be >= 1 or null, got {getattr(opts, key)}")
        return opts

    def numerics(self) -> dict[str, Any]:
        """The options that can change the numbers computed (not ``threads`` or ``batch_size``, which
        change them only by float rounding): for cache namespaces."""
        return {"quantize": self.quantize, "opset": self.opset, "graph_optimization": self.graph_optimization}


def _versions() -> dict[str, str]:
    """The installed versions of the exporting packages (read from their metadata: importing torch costs seconds)."""
    from importlib.metadata import version

    return {name: version(name) for name in ("torch", "onnx", "onnxruntime")}


def structure_digest(source_dir: str | Path) -> str:
    """sha256 of what, besides the weights, makes the exported graph: the model folder's config and tokenizer files
    (``*.json``, ``*.txt``: names and bytes) and the sentence-transformers version that builds its modules from them."""
    from importlib.metadata import version

    root = Path(source_dir)
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".json", ".txt"))
    return content_hash(
        {
            "files": {str(p.relative_to(root)): sha256_file(p) for p in files},
            "sentence_transformers": version("sentence-transformers"),
        }
    )


def export_key(source_sha256: str, kind: str, options: OnnxOptions, structure: str = "") -> str:
    """16-hex cache key of an export: source weights, model kind, the model's structure (:func:`structure_digest`
    of its folder: pooling, head, architecture, tokenizer), export options, exporter versions."""
    versions = _versions()
    blob = {
        "source_sha256": source_sha256,
        "kind": kind,
        "quantize": options.quantize,
        "opset": options.opset,
        "structure": sha256_text(structure),
        "recipe": RECIPE,
        "torch": versions["torch"],
        "onnx": versions["onnx"],
        # the quantizer is onnxruntime's: its version matters only to quantized exports
        "onnxruntime": versions["onnxruntime"] if options.quantize != "none" else None,
    }
    return content_hash(blob, 16)


def _input_names(model: Any) -> list[str]:
    feats = model.preprocess([PROBE[0]] if _is_cross(model) else [PROBE[0][0]])
    return [k for k, v in feats.items() if hasattr(v, "dtype")]


def _is_cross(model: Any) -> bool:
    return type(model).__name__ == "CrossEncoder"


def _probe_features(model: Any) -> dict[str, Any]:
    return model.preprocess(PROBE if _is_cross(model) else [p[1] for p in PROBE])


def _export(model: Any, kind: str, dest: Path, options: OnnxOptions) -> dict[str, Any]:
    """Export ``model``'s forward output of ``kind`` to ``dest/model.onnx``; check it on the probe batch."""
    import torch

    output = KINDS[kind]
    names = _input_names(model)

    class Forward(torch.nn.Module):
        def __init__(self, inner: Any):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors: Any) -> Any:
            features = dict(zip(names, tensors, strict=True))
            features["modality"] = "text"
            return self.inner(features)[output]

    feats = _probe_features(model)
    args = tuple(feats[n] for n in names)
    model.eval()
    fp32 = dest / ("model.fp32.onnx" if options.quantize != "none" else ONNX_FILE)
    t0 = time.perf_counter()
    try:
        with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer warnings about Python values fixed in the graph; checked below
            torch.onnx.export(
                Forward(model).eval(),
                args,
                str(fp32),
                dynamo=False,
                input_names=names,
                output_names=[output],
                opset_version=options.opset,
                dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in names}, output: {0: "batch"}},
            )
            expected = Forward(model).eval()(*args).detach().float().numpy()
    except Exception as exc:  # noqa: BLE001 - re-raised with the context the config needs
        raise OnnxExportError(
            f"exporting {kind} {type(model).__name__} to ONNX failed ({type(exc).__name__}: {exc}); "
            "the config asks for backend=onnx: set backend=torch to use the torch path"
        ) from exc
    export_s = time.perf_counter() - t0
    if options.quantize == "int8_dynamic":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        root = logging.getLogger()
        level = root.level
        root.setLevel(max(level, logging.WARNING))  # the quantizer logs every tensor at INFO on the root logger
        try:
            quantize_dynamic(str(fp32), str(dest / ONNX_FILE), weight_type=QuantType.QInt8)
        finally:
            root.setLevel(level)
        fp32.unlink()
    got = OnnxSession(dest / ONNX_FILE, options).run({n: feats[n].numpy() for n in names})
    diff = float(np.abs(got.reshape(expected.shape) - expected).max())
    if options.quantize == "none" and not diff <= FP32_CHECK_TOL:
        raise OnnxExportError(
            f"the fp32 ONNX export of {kind} {type(model).__name__} differs from torch by {diff:.3g} "
            f"(> {FP32_CHECK_TOL}) on the probe batch"
        )
    return {
        "input_names": names,
        "output": output,
        "output_width": int(expected.shape[-1]),
        "probe_max_abs_diff": diff,
        "export_seconds": round(export_s, 3),
    }


def export_folder(cache_dir: str | Path, source_sha256: str, kind: str, options: OnnxOptions, source_dir: Path) -> Path:
    """Where the export of the model in ``source_dir`` (weights ``source_sha256``) is cached: ``<cache_dir>/models/onnx/<key>/``."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}: expected one of {list(KINDS)}")
    return Path(cache_dir) / "models" / "onnx" / export_key(source_sha256, kind, options, structure_digest(source_dir))


def ensure_export(
    model: Any, kind: str, source_sha256: str, options: OnnxOptions, cache_dir: Path, source_dir: Path
) -> Path:
    """The cached export folder of ``model`` (loaded from ``source_dir``; :func:`export_folder`), exported on first
    use."""
    folder = export_folder(cache_dir, source_sha256, kind, options, source_dir)
    if folder.exists():
        damage = folder_damage(folder)
        if not damage:
            return folder
        moved = quarantine(folder)  # edited, truncated or from before checksums: never loaded
        log.warning(
            "ONNX export %s is damaged (%s): moved to %s; exporting again", folder, "; ".join(damage[:3]), moved
        )
    with atomic_dir(folder) as tmp:
        info = _export(model, kind, tmp, options)
        meta = {
            "kind": kind,
            "source_sha256": source_sha256,
            "structure": repr(model),
            "recipe": RECIPE,
            "options": {"quantize": options.quantize, "opset": options.opset},  # what the file depends on
            "versions": _versions(),
            "max_seq_length": int(model.max_seq_length),
            "tokenizer": _tokenizer_check(model, source_dir),
            **info,
        }
        (tmp / EXPORT_JSON).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        write_checksums(tmp)  # checked on every reuse
    return folder


class OnnxSession:
    """One ONNX Runtime session on ``device`` (a resolved torch device name, lethe.core.devices):
    ``run(feeds)`` -> the graph's single output (float32)."""

    def __init__(self, path: str | Path, options: OnnxOptions, device: str = "cpu"):
        import onnxruntime as ort

        self.threads = int(options.threads) if options.threads is not None else _torch_threads()
        so = ort.SessionOptions()
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[options.graph_optimization]
        so.log_severity_level = 3
        self.device = device
        self.session = ort.InferenceSession(str(path), so, providers=onnx_providers(device))
        self.input_names = [i.name for i in self.session.get_inputs()]

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        """Run one batch; ``feeds`` maps each input name to an int64 array (batch, tokens)."""
        return self.session.run(None, {n: np.ascontiguousarray(feeds[n], dtype=np.int64) for n in self.input_names})[0]


def sorted_batches(lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Indices of ``lengths`` sorted longest first (ties: input order), cut into batches of ``batch_size``."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


class FileTokenizer:
    """A model folder's ``tokenizer.json`` run by the ``tokenizers`` library alone (no transformers, torch or
    sentence-transformers import): texts, or (query, text) pairs, truncated longest first to ``max_length`` tokens and
    padded on the right to the longest -> int64 arrays (n, tokens) ``input_ids``, ``token_type_ids``, ``attention_mask``."""

    def __init__(self, path: str | Path, max_length: int):
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(path))
        padding = self.tok.padding or {}  # the file's padding settings: its pad token and type id
        if "pad_id" not in padding:
            raise ValueError(f"{path} names no padding token")
        self.pad_id, self.pad_type_id = int(padding["pad_id"]), int(padding.get("pad_type_id", 0))
        self.tok.no_padding()
        self.tok.enable_truncation(max_length=int(max_length))

    def __call__(self, inputs: Sequence[Any]) -> dict[str, np.ndarray]:
        enc = self.tok.encode_batch([tuple(x) if isinstance(x, (tuple, list)) else x for x in inputs])
        shape = (len(enc), max((len(e.ids) for e in enc), default=0))
        out = {
            "input_ids": np.full(shape, self.pad_id, np.int64),
            "token_type_ids": np.full(shape, self.pad_type_id, np.int64),
            "attention_mask": np.zeros(shape, np.int64),
        }
        for i, e in enumerate(enc):
            n = len(e.ids)
            out["input_ids"][i, :n], out["token_type_ids"][i, :n], out["attention_mask"][i, :n] = (
                e.ids,
                e.type_ids,
                e.attention_mask,
            )
        return out


TOKENIZER_FILE = "tokenizer.json"
# texts the export compares both tokenizers on: accents, CJK, emoji, control characters, an empty text, one past the
# model's length
TOKENIZER_PROBE = [
    *(t for pair in PROBE for t in pair),
    "  Café naïve résumé ÀÉÎ  ",
    "中文字符 and 日本語, emoji 🤖",
    "tab\tnew\nline don't-stop.me,now!",
    "",
    "token " * 600,
]


def _model_features(model: Any, inputs: Sequence[Any]) -> dict[str, np.ndarray]:
    """The sentence-transformers model's own tokenization of ``inputs`` as int64 arrays (n, tokens)."""
    return {n: t.numpy() for n, t in model.preprocess(list(inputs)).items() if hasattr(t, "numpy")}


def _tokenizer_check(model: Any, source_dir: Path) -> dict[str, Any]:
    """Whether ``source_dir``'s ``tokenizer.json`` alone (:class:`FileTokenizer`) tokenizes exactly as ``model`` on
    :data:`TOKENIZER_PROBE`: recorded in the export, so that later processes may skip loading the model."""
    length = int(model.max_seq_length)
    inputs: list[Any] = (
        [(q, t) for q in TOKENIZER_PROBE[:2] for t in TOKENIZER_PROBE] if _is_cross(model) else TOKENIZER_PROBE
    )
    try:
        ours = FileTokenizer(Path(source_dir) / TOKENIZER_FILE, length)(inputs)
    except (OSError, ValueError) as exc:
        return {"max_length": length, "equal": False, "why": f"{type(exc).__name__}: {exc}"}
    theirs = _model_features(model, inputs)
    equal = all(n in ours and np.array_equal(ours[n], a) for n, a in theirs.items())
    return {"max_length": length, "equal": equal, "why": None if equal else "the token ids differ on the probe"}


class _OnnxModel:
    """A sentence-transformers model run by ONNX Runtime: tokenized by the loaded model, or (:meth:`from_cache`) by
    its folder's ``tokenizer.json`` alone once an export exists whose tokenizer check passed."""

    kind = ""

    def __init__(
        self,
        model: Any,
        source_sha256: str,
        options: OnnxOptions | Mapping[str, Any],
        cache_dir: str | Path | None,
        device: str = "cpu",
        *,
        source_dir: str | Path,
    ):
        self.model = model
        self.options = OnnxOptions.from_config(options)
        self.source_sha256 = source_sha256
        self._tmp = None
        if cache_dir is None:  # no cache: export into a temporary folder kept as long as this object
            self._tmp = tempfile.TemporaryDirectory(prefix="lethe-onnx-")
            cache_dir = self._tmp.name
        if getattr(model.tokenizer, "padding_side", "right") != "right":
            raise ValueError("the ONNX backend trims right-padded batches; this tokenizer pads on the left")
        self._open(
            ensure_export(model, self.kind, source_sha256, self.options, Path(cache_dir), Path(source_dir)), device
        )
        self.max_seq_length = int(model.max_seq_length)
        self.tokenizer_source = "model"
        self._tokenize: Any = lambda inputs: _model_features(model, inputs)

    @classmethod
    def from_cache(
        cls,
        source_dir: str | Path,
        source_sha256: str,
        options: OnnxOptions | Mapping[str, Any],
        cache_dir: str | Path,
        device: str = "cpu",
    ) -> Any:
        """The model from its cached export and its folder's ``tokenizer.json`` alone, loading neither torch's model nor
        sentence-transformers; None when no undamaged export exists yet or its tokenizer check did not pass (then the
        constructor loads the model, and exports it)."""
        options = OnnxOptions.from_config(options)
        folder = export_folder(cache_dir, source_sha256, cls.kind, options, Path(source_dir))
        if not folder.is_dir() or folder_damage(folder):
            return None
        export = json.loads((folder / EXPORT_JSON).read_text())
        check = export.get("tokenizer") or {}
        if not check.get("equal"):
            return None
        self = cls.__new__(cls)
        self.model, self.options, self.source_sha256, self._tmp = None, options, source_sha256, None
        self._open(folder, device)
        self.max_seq_length = int(export["max_seq_length"])
        self.tokenizer_source = TOKENIZER_FILE
        self._tokenize = FileTokenizer(Path(source_dir) / TOKENIZER_FILE, int(check["max_length"]))
        return self

    def _open(self, folder: Path, device: str) -> None:
        self.folder = folder
        self.export = json.loads((folder / EXPORT_JSON).read_text())
        self.session = OnnxSession(folder / ONNX_FILE, self.options, device)

    def _run(self, inputs: list[Any], batch_size: int) -> np.ndarray:
        """Outputs (n, ...) in input order: one tokenizer call, then length-sorted trimmed batches of
        ``options.batch_size`` inputs (or ``batch_size`` when that is None)."""
        batch_size = self.options.batch_size or batch_size
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        feats = self._tokenize(inputs)
        arrays = {n: feats[n] for n in self.session.input_names}
        lengths = arrays["attention_mask"].sum(axis=1)
        out: np.ndarray | None = None
        for idx in sorted_batches(lengths, batch_size):
            width = int(lengths[idx].max())
            res = self.session.run({n: a[idx, :width] for n, a in arrays.items()})
            if out is None:
                out = np.empty((len(inputs), *res.shape[1:]), np.float32)
            out[idx] = res
        assert out is not None
        return out

    def describe(self) -> dict[str, Any]:
        """Options, intra-op threads in use, the tokenizer used, and the export (folder, probe difference, versions)."""
        return {
            "backend": "onnx",
            "options": asdict(self.options),
            "threads": self.session.threads,
            "device": self.session.device,
            "providers": self.session.session.get_providers(),
            "tokenizer": self.tokenizer_source,
            "export": {
                "dir": str(self.folder) if self._tmp is None else None,
                **{k: self.export.get(k) for k in ("probe_max_abs_diff", "versions", "recipe", "source_sha256")},
            },
        }


class OnnxBiEncoder(_OnnxModel):
    """A SentenceTransformer on ONNX Runtime: ``encode(texts)`` -> L2-normalized float32 (n, dim)."""

    kind = "bi_encoder"

    @property
    def dim(self) -> int:
        """Width of the vectors (the export's output width)."""
        return int(self.export["output_width"])

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        vecs = self._run(list(texts), batch_size)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return (vecs / np.maximum(norms, np.float32(1e-12))).astype(np.float32, copy=False)


class OnnxCrossEncoder(_OnnxModel):
    """A CrossEncoder on ONNX Runtime: ``score(query, texts)`` -> raw logits float32 (n,)."""

    kind = "cross_encoder"

    @property
    def tokenizer(self) -> Any:
        return self.model.tokenizer

    def score(self, query: str, texts: Sequence[str], batch_size: int) -> np.ndarray:
        if not texts:
            return np.zeros(0, np.float32)
        return self._run([(query, t) for t in texts], batch_size).reshape(-1)


def inference_info(model: Any) -> dict[str, Any]:
    """Backend and settings of a loaded model (a torch sentence-transformers model or an ONNX one),
    for run manifests."""
    if isinstance(model, _OnnxModel):
        return {**model.describe(), "max_length": model.max_seq_length}
    return {
        "backend": "torch",
        "max_length": int(model.max_seq_length),
        "torch_threads": _torch_threads(),
        "device": str(model.device),
    }


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())
