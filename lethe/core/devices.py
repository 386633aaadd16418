"""Where a model runs: ``device`` names (``cpu``, ``cuda``, ``cuda:N``, ``mps``, ``auto``) and their resolution.

Placement is not part of a run's identity (experiments.run_identity drops ``device`` and ``n_gpu_layers``
from the hashed config): the same model on another device computes the same function, and results agree
within the tolerance classes of ``conf/reference/tolerances.yaml`` (float rounding can swap near-tied
documents). The device a run actually used is recorded in its manifest (the methods' ``describe()``).
"""

from __future__ import annotations

import re

DEVICE_NAMES = ("cpu", "cuda", "cuda:N", "mps", "auto")
_DEVICE = re.compile(r"^(cpu|cuda|cuda:\d+|mps|auto)$")


class DeviceError(ValueError):
    """A device that is misspelled or not present on this machine."""


def check_device(device: str, key: str = "device") -> str:
    """``device`` if it is one of :data:`DEVICE_NAMES` (``N`` a GPU index), else DeviceError naming ``key``."""
    if not isinstance(device, str) or not _DEVICE.match(device):
        raise DeviceError(f"{key}={device!r}: expected one of {', '.join(DEVICE_NAMES)}")
    return device


def _mps_available() -> bool:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()


def resolve_device(device: str, key: str = "device") -> str:
    """The torch device to use: ``auto`` -> ``cuda`` if torch sees a CUDA GPU, else ``mps`` if available,
    else ``cpu``; an explicit GPU that this machine lacks raises DeviceError naming ``key``."""
    import torch

    device = check_device(device, key)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "mps" if _mps_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError(
                f"{key}={device!r}: torch sees no CUDA GPU here (torch {torch.__version__}); "
                f"use cpu or auto, or install a CUDA build of torch (docs/running.md, 'Clusters (Slurm), local submitit and GPUs')"
            )
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise DeviceError(f"{key}={device!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    if device == "mps" and not _mps_available():
        raise DeviceError(f"{key}='mps': this machine has no Apple MPS device; use cpu or auto")
    return device


def onnx_providers(device: str, key: str = "device") -> list:
    """ONNX Runtime execution providers for a resolved torch ``device``: the CPU provider for cpu; the CUDA
    provider (GPU index ``N``) for cuda[:N], which needs onnxruntime-gpu (DeviceError otherwise); mps has no
    ONNX Runtime provider (DeviceError: use backend torch there)."""
    import onnxruntime as ort

    if device == "cpu":
        return ["CPUExecutionProvider"]
    if device.startswith("cuda"):
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise DeviceError(
                f"{key}={device!r} with backend onnx needs onnxruntime-gpu (this onnxruntime has "
                f"{ort.get_available_providers()}); install it or use backend torch"
            )
        index = int(device.split(":")[1]) if ":" in device else 0
        return [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"]
    raise DeviceError(f"{key}={device!r}: ONNX Runtime has no provider for it; use backend torch")
