"""Device names (deqlab/devices.py): the accepted forms, one-line errors, and one run
identity for every CUDA device."""

import pytest
import torch

from deqlab.devices import DeviceError, check_device, device_type
from deqlab.experiments.config import config_hash
from test_runs_store import LsqConfig


def test_check_device_forms_and_errors(monkeypatch):
    assert check_device("cpu") == "cpu" and device_type("cuda:3") == "cuda"
    for bad in ("tpu", "cuda:", "cuda:x", "cpu:0", "cuda:-1", "gpu:0"):
        with pytest.raises(DeviceError, match=r"`device` must be cpu, cuda or cuda:N"):
            check_device(bad)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError, match=r"device 'cuda:0' was requested but CUDA is not"):
        check_device("cuda:0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert check_device("cuda") == "cuda" and check_device("cuda:01") == "cuda:1"
    with pytest.raises(
        DeviceError,
        match=r"device 'cuda:2' names CUDA device 2, but this machine has 2 "
        r"\(cuda:0 to cuda:1\)",
    ):
        check_device("cuda:2")
    base = LsqConfig()  # any CUDA device gives the run the same identity
    assert config_hash("x", base, device=device_type("cuda:1")) == config_hash(
        "x", base, device="cuda"
    )
