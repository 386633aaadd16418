"""Devices (issue 17): names are checked, ``auto`` resolves to what this machine has, placement is recorded
in the manifest and stays out of the config hash; a CUDA run agrees with the CPU (where a GPU exists)."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.run_identity import run_identity
from experiments.runner import run_experiment
from lethe.core.devices import DeviceError, check_device, onnx_providers, resolve_device
from lethebench.runs import RunFolder
from tests.conftest import TWO_CONVS


@pytest.mark.parametrize("name", ["cpu", "cuda", "cuda:1", "mps", "auto"])
def test_known_device_names_pass(name):
    assert check_device(name) == name


@pytest.mark.parametrize("name", ["gpu", "cuda:", "CPU", "cuda:x", "", None])
def test_unknown_device_names_name_the_key(name):
    with pytest.raises(DeviceError, match=r"embedder\.device="):
        check_device(name, "embedder.device")


def test_auto_resolves_to_what_this_machine_has():
    import torch

    expected = "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
    assert resolve_device("auto") == expected
    assert onnx_providers("cpu") == ["CPUExecutionProvider"]


def test_a_gpu_this_machine_lacks_is_a_clear_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    with pytest.raises(DeviceError, match="method.model.device='cuda:0': torch sees no CUDA GPU"):
        resolve_device("cuda:0", "method.model.device")


def test_device_auto_runs_here_records_its_choice_and_keeps_the_config_hash(cfg_for, locomo_path):
    cpu = cfg_for("method=vector", f"dataset.scopes={TWO_CONVS}", "embedder.device=cpu")
    auto = cfg_for("method=vector", f"dataset.scopes={TWO_CONVS}", "embedder.device=auto", "run.overwrite=true")
    key = "k"
    assert run_identity(cpu, key).config_hash == run_identity(auto, key).config_hash  # placement is not hashed
    folder = run_experiment(auto)
    manifest = RunFolder(folder).manifest
    emb = manifest["method"]["embedder"]
    assert emb["device_config"] == "auto" and emb["device"] == resolve_device("auto")
    assert manifest["config"]["embedder"]["device"] == "auto"


@pytest.mark.gpu
def test_the_embedder_on_cuda_agrees_with_the_cpu():
    from experiments.config import load_config
    from lethe.retrieval.embedder import Embedder

    texts = ["Caroline went to the LGBTQ support group on 7 May 2023.", "What did Melanie paint?", "a" * 300]
    cfg = dict(load_config([]).embedder)
    cpu = Embedder(cfg, device="cpu", show_progress=False, backend="torch").encode(texts, "doc")
    gpu = Embedder(cfg, device="cuda", show_progress=False, backend="torch").encode(texts, "doc")
    assert np.min(np.sum(cpu * gpu, axis=1)) > 0.9999
