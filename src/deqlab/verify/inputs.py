"""The data ``deqlab verify`` checks: a data set of ``deqlab data list`` or the user's own,
validated with one clear message per problem, and measured against Assumption 2.

The user's data come as X of shape (n, d), one sample per row, and labels y of length n:

- ``.npz``: arrays ``X`` and ``y``;
- ``.pt``: a dict ``{"X": ..., "y": ...}`` or a pair ``(X, y)`` (read with
  ``torch.load(weights_only=True)``: no code is run);
- ``.npy``: one (n, d + 1) array whose last column holds the labels;
- ``.csv``: one sample per line, comma-separated, an optional header line; the labels are
  the column named ``label``, ``y`` or ``target``, else the last one (``label_column``
  names or numbers another).

Inside, X is turned into the papers' convention, (d, n) with samples as columns, float64.
Problems that make every theorem vacuous are errors (:class:`InputError`): a shape
mismatch, NaN/Inf, no data, n = 1, a zero input, duplicate inputs (λ* = 0, so no width
makes Condition 1 hold), labels of the wrong length, an unreadable file. What merely
departs from Assumption 2 (‖x_i‖ ≠ √d, parallel inputs) is measured and reported as a
hypothesis; inputs are scaled to norm √d only when ``normalize`` is asked for.
"""

from __future__ import annotations

import csv
import os
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from deqlab.data.diagnostics import InputDiagnostics, input_diagnostics
from deqlab.data.preprocess import normalize_columns
from deqlab.experiments.ling2023.statements import assumption2 as ling2023_assumption2
from deqlab.statements import Statement

#: Extensions of the files ``--input`` reads.
FORMATS = (".npy", ".npz", ".pt", ".csv")
#: Header names taken as the label column of a CSV file, in this order.
LABEL_NAMES = ("label", "y", "target")


class InputError(ValueError):
    """Data that verify cannot check; the message is one line saying what and where."""


@dataclass(frozen=True, eq=False)
class Inputs:
    """Validated data: ``X`` (d, n) float64 (samples are columns), ``y`` (n,) float64.

    ``name`` says where they came from; ``normalized`` whether verify scaled the inputs to
    norm √d; ``diagnostics`` the distance from Assumption 2 (after any normalisation).
    """

    X: torch.Tensor
    y: torch.Tensor
    name: str
    normalized: bool
    diagnostics: InputDiagnostics

    @property
    def n(self) -> int:
        return self.X.shape[1]

    @property
    def d(self) -> int:
        return self.X.shape[0]

    def summary(self) -> dict[str, object]:
        """The stable JSON keys describing the data."""
        diag = self.diagnostics
        return {
            "name": self.name,
            "n": self.n,
            "d": self.d,
            "normalized": self.normalized,
            "max_norm_error": diag.max_norm_error,
            "max_abs_cos": diag.max_abs_cos,
            "closest_pair": list(diag.closest_pair),
            "label_min": float(self.y.min()),
            "label_max": float(self.y.max()),
            "labels_distinct": int(torch.unique(self.y).numel()),
        }


def prepare(X: object, y: object, *, name: str = "data", normalize: bool = False) -> Inputs:
    """Validate ``X`` (n, d) and ``y`` (n,) (array-likes) and return :class:`Inputs`.

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
    if n == 1:
        raise InputError("one sample (n = 1): λ*, λ_0 and Condition 1 need n ≥ 2 samples")
    zero = torch.nonzero((X == 0).all(dim=1)).flatten()
    if zero.numel():
        raise InputError(
            f"input {int(zero[0])} is all zeros: the kernels need nonzero inputs (Assumption 2 "
            "takes ‖x_i‖ = √d; normalising cannot scale a zero input)"
        )
    columns = X.T.contiguous()  # (d, n)
    if normalize:
        columns = normalize_columns(columns)
    _check_duplicates(columns)
    return Inputs(columns, y, name, normalize, input_diagnostics(columns))


def _as_float64(name: str, value: object) -> torch.Tensor:
    try:
        if isinstance(value, torch.Tensor):
            return value.detach().to(device="cpu", dtype=torch.float64)
        return torch.as_tensor(np.asarray(value, dtype=np.float64))
    except (TypeError, ValueError) as err:
        raise InputError(f"{name} must hold numbers: {err}") from None


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


def load_file(path: str | os.PathLike[str], *, label_column: str | None = None) -> tuple:
    """(X (n, d), y (n,)) as numpy arrays from one of :data:`FORMATS` (module docstring)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise InputError(
            f"cannot read {str(path)!r}: the extension must be one of {', '.join(FORMATS)}"
        )
    if not path.is_file():
        raise InputError(f"cannot read {str(path)!r}: no such file")
    if label_column is not None and suffix != ".csv":
        raise InputError("--label-column applies to .csv files only")
    try:
        return _READERS[suffix](path, label_column)
    except InputError:
        raise
    except (OSError, ValueError, KeyError, EOFError, RuntimeError, zipfile.BadZipFile,
            pickle.UnpicklingError) as err:  # fmt: skip
        lines = str(err).strip().splitlines()
        message = lines[0][:200] if lines else type(err).__name__
        raise InputError(f"cannot read {str(path)!r}: {message}") from None


def _read_npy(path: Path, _: str | None) -> tuple:
    array = np.load(path, allow_pickle=False)
    if array.ndim != 2 or array.shape[1] < 2:
        raise InputError(
            f"{str(path)!r} must hold one (n, d + 1) array, the labels in its last column; "
            f"got shape {array.shape}"
        )
    return array[:, :-1], array[:, -1]


def _read_npz(path: Path, _: str | None) -> tuple:
    with np.load(path, allow_pickle=False) as archive:
        missing = [k for k in ("X", "y") if k not in archive.files]
        if missing:
            raise InputError(
                f"{str(path)!r} must hold arrays named X and y; it has "
                f"{', '.join(archive.files) or 'none'}"
            )
        return archive["X"], archive["y"]


def _read_pt(path: Path, _: str | None) -> tuple:
    obj = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(obj, dict) and {"X", "y"} <= set(obj):
        return obj["X"], obj["y"]
    if isinstance(obj, list | tuple) and len(obj) == 2:
        return obj[0], obj[1]
    raise InputError(f"{str(path)!r} must hold a dict with keys X and y, or a pair (X, y)")


def _read_csv(path: Path, label_column: str | None) -> tuple:
    with open(path, newline="", encoding="utf-8") as handle:
        lines = [row for row in csv.reader(handle) if row and any(c.strip() for c in row)]
    if not lines:
        raise InputError(f"{str(path)!r} is empty")
    header = None if _numeric(lines[0]) else [c.strip() for c in lines[0]]
    body = lines[1:] if header else lines
    label = _label_index(path, header, len(lines[0]), label_column)
    rows = []
    for number, row in enumerate(body, start=2 if header else 1):
        if len(row) != len(lines[0]):
            raise InputError(
                f"{str(path)!r}, line {number}: {len(row)} columns, the first line has "
                f"{len(lines[0])}"
            )
        try:
            rows.append([float(c) for c in row])
        except ValueError:
            raise InputError(f"{str(path)!r}, line {number}: a value is not a number") from None
    table = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(lines[0]))
    return np.delete(table, label, axis=1), table[:, label]


def _numeric(row: list[str]) -> bool:
    try:
        [float(c) for c in row]
    except ValueError:
        return False
    return True


def _label_index(path: Path, header: list[str] | None, width: int, chosen: str | None) -> int:
    if width < 2:
        raise InputError(f"{str(path)!r} needs at least two columns (features and the label)")
    if chosen is None:
        names = [h.lower() for h in header or []]
        return next((names.index(k) for k in LABEL_NAMES if k in names), width - 1)
    if header and chosen in header:
        return header.index(chosen)
    if chosen.lstrip("-").isdigit() and -width <= int(chosen) < width:
        return int(chosen) % width
    raise InputError(
        f"--label-column {chosen!r} is neither a column name of {str(path)!r} nor a column "
        f"number in 0..{width - 1}"
    )


_READERS = {".npy": _read_npy, ".npz": _read_npz, ".pt": _read_pt, ".csv": _read_csv}


def assumption2(inputs: Inputs) -> list[Statement]:
    """Assumption 2 (i) on ``inputs`` (after any normalisation), built by
    :func:`deqlab.experiments.ling2023.statements.assumption2` as in the experiments."""
    diag = inputs.diagnostics
    return ling2023_assumption2(
        diag.max_norm_error, diag.max_abs_cos, pair=diag.closest_pair,
        note=" (after --normalize)" if inputs.normalized else "",
        how_to_normalize="--normalize (normalize=True) scales every input to norm √d",
    )  # fmt: skip


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
