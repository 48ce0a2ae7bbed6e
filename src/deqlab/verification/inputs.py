"""The data ``deqlab verify`` checks: a data set of ``deqlab data list`` or the user's own,
validated with one clear message per problem, and measured against Assumption 2.

The user's data come as X of shape (n, d), one sample per row, and labels y of length n,
as arrays or from a file (:mod:`deqlab.verification.files`, which says where it found the
labels); :class:`Inputs` says the layout it read, which verify prints.

Inside, X is turned into the papers' convention, (d, n) with samples as columns, float64.
Problems that make every theorem vacuous are errors (:class:`InputError`): a shape
mismatch, NaN/Inf, complex numbers, entries so large that the kernels or the loss overflow
float64 (:data:`MAX_INPUT` and :data:`MAX_LABEL`), no data, n = 1, a zero input, duplicate
inputs (λ* = 0, so no width makes Condition 1 hold), labels of the wrong length, an
unreadable file. What merely departs from Assumption 2 (‖x_i‖ ≠ √d, parallel inputs) is
measured and reported as a hypothesis; inputs are scaled to norm √d only when
``normalize`` is asked for (rows to the sphere: Assumption 2, what the theorems assume),
and each feature to zero mean and unit variance only when ``standardize`` is (ours: a
common preprocessing, assumed by no theorem; with both, standardisation comes first).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import numpy as np
import torch

from deqlab.data.diagnostics import InputDiagnostics, input_diagnostics
from deqlab.data.preprocess import normalize_columns
from deqlab.papers.ling2023.claims import assumption2 as ling2023_assumption2
from deqlab.statements import Statement
from deqlab.verification.subsample import Subsample, diagnostics

#: The largest input entry verify takes (ours): K, the NTK and Condition 1's terms carry up
#: to the fourth power of an input's norm, which overflows float64 (1.8·10³⁰⁸) from about
#: 10⁷⁷; 10⁶⁰ leaves room for the factors of n and m beside it. --normalize lifts it.
MAX_INPUT = 1e60
#: The largest label verify takes (ours): Φ(0) = ½‖y‖² and the bounds built on it
#: overflow float64 from about 10¹⁵⁴.
MAX_LABEL = 1e100


class InputError(ValueError):
    """Data that verify cannot check; the message is one line saying what and where."""


@dataclass(frozen=True, eq=False)
class Inputs:
    """Validated data: ``X`` (d, n) float64 (samples are columns), ``y`` (n,) float64.

    ``name`` says where they came from and ``labels`` where the labels were; ``normalized``
    whether verify scaled the inputs to norm √d, ``standardized`` whether it scaled each
    feature to zero mean and unit variance; ``diagnostics`` the distance from Assumption 2
    (after any preprocessing).
    """

    X: torch.Tensor
    y: torch.Tensor
    name: str
    normalized: bool
    diagnostics: InputDiagnostics
    labels: str = "y"
    standardized: bool = False
    sample: Subsample | None = None

    @property
    def n(self) -> int:
        return self.X.shape[1]

    def subset(self, indices: torch.Tensor) -> Inputs:
        """These inputs at the points ``indices`` only (no subsample of their own)."""
        return replace(self, X=self.X[:, indices], y=self.y[indices], sample=None)

    @property
    def d(self) -> int:
        return self.X.shape[0]

    @property
    def preprocessing(self) -> str:
        """The preprocessing done, as " (standardised, then normalised)"; "" for none."""
        steps = (("standardised", self.standardized), ("normalised", self.normalized))
        done = [word for word, on in steps if on]
        return f" ({', then '.join(done)})" if done else ""

    @property
    def layout(self) -> str:
        """The layout read, as verify prints it."""
        return f"X read as (n, d) = ({self.n}, {self.d}): one sample per row"

    def summary(self) -> dict[str, object]:
        """The stable JSON keys describing the data."""
        diag = self.diagnostics
        return {
            "name": self.name,
            "n": self.n,
            "d": self.d,
            "layout": self.layout,
            "preprocessing": self.preprocessing,
            "labels": self.labels,
            "normalized": self.normalized,
            "standardized": self.standardized,
            "max_norm_error": diag.max_norm_error,
            "max_abs_cos": diag.max_abs_cos,
            "max_abs_cos_over": "every pair"
            if self.sample is None
            else f"the pairs of the subsample S ({self.sample.name})",
            "closest_pair": list(diag.closest_pair),
            "label_min": float(self.y.min()),
            "label_max": float(self.y.max()),
            "labels_distinct": int(torch.unique(self.y).numel()),
        }


def prepare(
    X: object,
    y: object,
    *,
    name: str = "data",
    normalize: bool = False,
    standardize: bool = False,
    labels: str = "y",
    sample: Subsample | None = None,
) -> Inputs:
    """Validate ``X`` (n, d) and ``y`` (n,) (array-likes) and return :class:`Inputs`
    (``labels``: where the labels came from, for the output; ``sample``: the subsample S
    verify answers from past memory, whose pairs alone Assumption 2 (i) is measured on).

    Raises :class:`InputError` for every problem the module docstring lists.
    """
    X = _as_float64("X", X)
    y = _as_float64("y", y)
    if X.ndim != 2:
        raise InputError(f"X must be 2-D, (n samples, d features); got shape {tuple(X.shape)}")
    n, d = X.shape
    if n == 0 or d == 0:
        raise InputError(f"the data are empty: X has shape {tuple(X.shape)} (n, d)")
    if y.ndim == 2 and 1 in y.shape:
        y = y.reshape(-1)
    if y.ndim != 1 or y.shape[0] != n:
        raise InputError(
            f"the labels have the wrong length: y has shape {tuple(y.shape)}, X has n = {n} rows"
        )
    _check_finite("X", X)
    _check_finite("y", y)
    _check_scale("y", y, MAX_LABEL, "Φ(0) = ½‖y‖² and the bounds built on it overflow "
                 "float64; rescale the labels")  # fmt: skip
    if n == 1:
        raise InputError("one sample (n = 1): λ*, λ_0 and Condition 1 need n ≥ 2 samples")
    zero = torch.nonzero((X == 0).all(dim=1)).flatten()
    if zero.numel():
        raise InputError(
            f"input {int(zero[0])} is all zeros: the kernels need nonzero inputs (Assumption 2 "
            "takes ‖x_i‖ = √d; normalising cannot scale a zero input)"
        )
    columns = X.T.contiguous()  # (d, n)
    if standardize:
        columns = standardize_features(_tamed(columns, columns.abs().max()))
    if normalize:
        columns = normalize_columns(_tamed(columns, columns.abs().amax(dim=0)))
    _check_scale("X", columns.T, MAX_INPUT, "K, the NTK and Condition 1 carry up to the "
                 "fourth power of an input's norm, which overflows float64; rescale X, or "
                 "pass --normalize (normalize=True) to scale every input to norm √d")  # fmt: skip
    _check_duplicates(columns)
    found = input_diagnostics(columns) if sample is None else diagnostics(columns, sample)
    return Inputs(columns, y, name, normalize, found, labels, standardize, sample)


def standardize_features(columns: torch.Tensor) -> torch.Tensor:
    """Each feature (row of ``columns``, (d, n)) to zero mean and unit variance over the n
    samples (population variance); a constant feature is refused, naming it."""
    mean = columns.mean(dim=1, keepdim=True)
    std = columns.std(dim=1, correction=0, keepdim=True)
    constant = torch.nonzero(std.flatten() == 0).flatten()
    if constant.numel():
        raise InputError(
            f"feature {int(constant[0])} is constant ({constant.numel()} constant feature(s)): "
            "--standardize cannot scale it to unit variance; drop it"
        )
    centred = (columns - mean) / std
    if bool((centred == 0).all(dim=0).any()):
        raise InputError(
            "an input is the mean of the data: standardised, it is all zeros (the kernels "
            "need nonzero inputs); drop it or do not --standardize"
        )
    return centred


def _tamed(columns: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``columns`` divided by ``scale`` (their largest magnitude, overall or per input) when
    that exceeds :data:`MAX_INPUT`: standardising and normalising do not depend on it, and
    the squares they take would otherwise overflow."""
    if not bool((scale > MAX_INPUT).any()):
        return columns
    return columns / torch.where(scale > 0, scale, torch.ones_like(scale))


def _check_scale(name: str, values: torch.Tensor, limit: float, why: str) -> None:
    """Refuse entries of magnitude above ``limit`` (``values``: (n, ...) samples first)."""
    magnitude = values.abs()
    largest = float(magnitude.max())
    if largest > limit:
        at = np.unravel_index(int(magnitude.argmax()), tuple(magnitude.shape))
        where = f"input {at[0]}, feature {at[1]}" if len(at) == 2 else f"label {at[0]}"
        raise InputError(
            f"{name}'s largest entry is {largest:.3g} ({where}); verify takes entries up to "
            f"{limit:.0e} in magnitude: {why}"
        )


def _as_float64(name: str, value: object) -> torch.Tensor:
    try:
        if isinstance(value, torch.Tensor):
            _check_real(name, value.dtype, value.is_complex())
            return value.detach().to(device="cpu", dtype=torch.float64)
        array = np.asarray(value)
        _check_real(name, array.dtype, np.iscomplexobj(array))
        return torch.as_tensor(np.asarray(array, dtype=np.float64))
    except (TypeError, ValueError) as err:
        if isinstance(err, InputError):
            raise
        raise InputError(f"{name} must hold numbers: {err}") from None


def _check_real(name: str, dtype: object, complex_: bool) -> None:
    """Refuse complex numbers (casting would silently keep the real part)."""
    if complex_:
        raise InputError(
            f"{name} holds complex numbers ({dtype}); verify needs real numbers: pass the "
            f"real part ({name}.real) or the magnitudes (abs({name})) if that is what you mean"
        )


def _check_finite(name: str, x: torch.Tensor) -> None:
    bad = torch.nonzero(~torch.isfinite(x))
    if bad.numel():
        where = ", ".join(str(int(i)) for i in bad[0])
        raise InputError(
            f"{name} has {bad.shape[0]} NaN/Inf entries (the first at index ({where}))"
        )


def _check_duplicates(columns: torch.Tensor) -> None:
    """Raise on two equal inputs: every feature matrix then has two equal columns."""
    _, inverse, counts = torch.unique(columns.T, dim=0, return_inverse=True, return_counts=True)
    repeated = torch.nonzero(counts[inverse] > 1).flatten()
    if repeated.numel():
        first = int(repeated[0])
        twin = int(next(int(j) for j in repeated[1:] if inverse[j] == inverse[first]))
        raise InputError(
            f"inputs {first} and {twin} are identical ({int((counts > 1).sum())} repeated "
            "input(s)): K and every Gram matrix Z(0)ᵀZ(0) have two equal columns, so "
            "λ* = λ_0 = 0 and no width makes Condition 1 (Eqs. (7)–(9)) hold; remove the "
            "duplicates"
        )


def assumption2(inputs: Inputs) -> list[Statement]:
    """Assumption 2 (i) on ``inputs`` (after any normalisation), built by
    :func:`deqlab.papers.ling2023.claims.assumption2` as in the experiments."""
    diag = inputs.diagnostics
    return ling2023_assumption2(
        diag.max_norm_error,
        diag.max_abs_cos,
        pair=diag.closest_pair,
        note=" (after --normalize)" if inputs.normalized else "",
        how_to_normalize="--normalize (normalize=True) scales every input to norm √d",
    )


def load_dataset(
    name: str,
    *,
    n: int | None = None,
    d: int | None = None,
    classes: tuple[int, ...] | None = None,
    seed: int = 0,
    data_dir: str | os.PathLike[str] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """(X (n, d), y (n,), description) of a data set of ``deqlab data list``.

    As :func:`deqlab.data.get_dataset` builds it for the experiments (image sets: ±1 class
    labels, inputs already at norm √d; the sphere: N(0, 1) labels). Its ValueErrors name
    the argument; a missing image set raises :class:`deqlab.data.DatasetNotFoundError`.
    """
    from deqlab.data import get_dataset

    data = get_dataset(name, n=n, d=d, classes=classes, seed=seed, data_dir=data_dir)
    where = f"{name} (seed {seed}" + (f", classes {list(classes)})" if classes else ")")
    return data.X.T, data.y, where
