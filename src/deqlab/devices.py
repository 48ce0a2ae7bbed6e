"""The devices a computation may use: ``cpu``, ``cuda`` or ``cuda:N``, checked before anything
runs (by ``deqlab reproduce``, ``deqlab verify`` and ``deqlab kernel`` alike)."""

from __future__ import annotations

import torch


class DeviceError(ValueError):
    """A device that is not ``cpu``, ``cuda`` or ``cuda:N``, or not on this machine; the
    message is one line, fit for a CLI."""


#: The device forms ``--device`` accepts (N: a CUDA device index).
DEVICES = ("cpu", "cuda", "cuda:N")


def check_device(device: str) -> str:
    """``cpu``, ``cuda`` or ``cuda:N`` (returned normalised); the CUDA device must exist.

    Raises :class:`DeviceError` (one line) for another form, when CUDA is not available,
    or when ``N`` is not below ``torch.cuda.device_count()``.
    """
    if not isinstance(device, str):
        raise DeviceError(f"`device` must be a str; got {type(device).__name__} {device!r}")
    kind, colon, index = device.strip().partition(":")
    if kind not in ("cpu", "cuda") or (colon and (kind == "cpu" or not index.isdigit())):
        raise DeviceError(
            f"`device` must be cpu, cuda or cuda:N (N a CUDA device index); got {device!r}"
        )
    if kind == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        raise DeviceError(
            f"device {device!r} was requested but CUDA is not available (torch {torch.__version__})"
        )
    if not colon:
        return "cuda"
    count = torch.cuda.device_count()
    if int(index) >= count:
        raise DeviceError(
            f"device {device!r} names CUDA device {int(index)}, but this machine has {count} "
            f"(cuda:0 to cuda:{count - 1})"
        )
    return f"cuda:{int(index)}"


def device_type(device: str) -> str:
    """``cpu`` or ``cuda``: the part of a device that decides a run's numbers (its hash)."""
    return device.partition(":")[0]
