"""The container every data set is returned in: inputs as columns, labels, provenance."""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, replace
from functools import cached_property

import torch

from deqlab.data.diagnostics import InputDiagnostics, input_diagnostics


@dataclass(frozen=True)
class DataInfo:
    """Where a data set came from and how it was built (plain data, JSON-friendly)."""

    source: str  # file or directory read, or "synthetic"
    seed: int
    labels: str  # "class" | "gaussian" | "uniform" | "index" | "regression"
    normalized: bool  # columns scaled to norm √d (Assumption 2)
    classes: tuple[int, ...] | None = None
    n_per_class: int | None = None
    split: str | None = None
    image_shape: tuple[int, ...] | None = None  # shape of one image before flattening

    def as_dict(self) -> dict[str, object]:
        """The fields as a dict of str, int, bool, list or None."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


@dataclass(frozen=True, eq=False)
class LabelledData:
    """Inputs ``X`` (d, n) — columns are samples, the papers' convention — and labels ``y``.

    ``y`` is (n,) for scalar labels, or (q, n) for vector targets (Zou et al.'s synthetic
    data). ``diagnostics`` (max |cos| between distinct inputs, duplicates; computed on
    first access, O(d n²)) says how far ``X`` is from Assumption 2 of Ling et al. (2023).
    """

    X: torch.Tensor
    y: torch.Tensor
    name: str
    info: DataInfo

    def __post_init__(self) -> None:
        if self.X.ndim != 2:
            raise ValueError(f"`X` must be 2-D (d, n); got shape {tuple(self.X.shape)}")
        if self.y.shape[-1] != self.X.shape[1] or self.y.ndim not in (1, 2):
            raise ValueError(
                f"`y` must have shape (n,) or (q, n) with n = {self.X.shape[1]}; "
                f"got {tuple(self.y.shape)}"
            )

    @property
    def d(self) -> int:
        """Input dimension."""
        return self.X.shape[0]

    @property
    def n(self) -> int:
        """Number of samples."""
        return self.X.shape[1]

    @cached_property
    def diagnostics(self) -> InputDiagnostics:
        """Distance from Assumption 2; warns (``UserWarning``) when inputs are duplicated."""
        result = input_diagnostics(self.X)
        if result.n_duplicates:
            warnings.warn(f"{self.name}: {result.warnings()[0]}", UserWarning, stacklevel=2)
        return result

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None):
        """A copy with ``X`` (and floating ``y``) moved to ``device`` / cast to ``dtype``."""
        y_dtype = dtype if self.y.is_floating_point() else None
        return replace(
            self, X=self.X.to(device=device, dtype=dtype), y=self.y.to(device=device, dtype=y_dtype)
        )
