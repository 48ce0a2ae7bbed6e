"""The data ``deqlab verify`` checks: a data set of ``deqlab data list`` or the user's own,
validated with one clear message per problem, and measured against Assumption 2.

The user's data come as X of shape (n, d), one sample per row, and labels y of length n:

- ``.npz``: arrays ``X`` and ``y``;
- ``.pt``: a dict ``{"X": ..., "y": ...}`` or a pair ``(X, y)`` (read with
  ``torch.load(weights_only=True)``: no code is run);
- ``.npy``: one (n, d + 1) array whose last column holds the labels;
- ``.csv``: one sample per line, comma-separated, a header line naming the columns; the
  labels are the column named ``label``, ``y`` or ``target`` (any case), or the one
  ``label_column`` names or numbers. A file with no such column is refused: a feature
  column is never taken for the labels by guess.

Every reader says where it found the labels (:class:`DataFile` ``labels``), and
:class:`Inputs` the layout it read, which verify prints.

Inside, X is turned into the papers' convention, (d, n) with samples as columns, float64.
Problems that make every theorem vacuous are errors (:class:`InputError`): a shape
mismatch, NaN/Inf, no data, n = 1, a zero input, duplicate inputs (λ* = 0, so no width
makes Condition 1 hold), labels of the wrong length, an unreadable file. What merely
departs from Assumption 2 (‖x_i‖ ≠ √d, parallel inputs) is measured and reported as a
hypothesis; inputs are scaled to norm √d only when ``normalize`` is asked for (rows to the
sphere: Assumption 2, what the theorems assume), and each feature to zero mean and unit
variance only when ``standardize`` is (ours: a common preprocessing, assumed by no theorem;
with both, standardisation comes first).
"""

from __future__ import annotations

import csv
import os
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from deqlab.data.diagnostics import InputDiagnostics, input_diagnostics
from deqlab.data.npy import read_npy
from deqlab.data.preprocess import normalize_columns
from deqlab.experiments.ling2023.statements import assumption2 as ling2023_assumption2
from deqlab.statements import Statement

#: Extensions of the files ``--input`` reads.
FORMATS = (".npy", ".npz", ".pt", ".csv")
#: Header names taken as the label column of a CSV file, in this order.
LABEL_NAMES = ("label", "y", "target")


class InputError(ValueError):
    """Data that verify cannot check; the message is one line saying what and where."""


class DataFile(NamedTuple):
    """What :func:`load_file` read: ``X`` (n, d), ``y`` (n,) and where the labels were."""

    X: object
    y: object
    labels: str


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

    @property
    def n(self) -> int:
        return self.X.shape[1]

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
) -> Inputs:
    """Validate ``X`` (n, d) and ``y`` (n,) (array-likes) and return :class:`Inputs`
    (``labels``: where the labels came from, for the output).

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
    if standardize:
        columns = standardize_features(columns)
    if normalize:
        columns = normalize_columns(columns)
    _check_duplicates(columns)
    return Inputs(columns, y, name, normalize, input_diagnostics(columns), labels, standardize)


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


def load_file(path: str | os.PathLike[str], *, label_column: str | None = None) -> DataFile:
    """X (n, d), y (n,) and where the labels were, from one of :data:`FORMATS` (module
    docstring)."""
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
    except (
        OSError,
        ValueError,
        KeyError,
        EOFError,
        RuntimeError,
        zipfile.BadZipFile,
        pickle.UnpicklingError,
    ) as err:
        lines = str(err).strip().splitlines()
        message = lines[0][:200] if lines else type(err).__name__
        raise InputError(f"cannot read {str(path)!r}: {message}") from None


def _read_npy(path: Path, _: str | None) -> DataFile:
    """The one .npy reader of deqlab (:func:`deqlab.data.npy.read_npy`: the header checked
    against the file's size, no pickles), its one line kept as it is."""
    try:
        array = read_npy(path, repr(str(path)))
    except ValueError as err:
        raise InputError(str(err)) from None
    if array.ndim != 2 or array.shape[1] < 2:
        raise InputError(
            f"{str(path)!r} must hold one (n, d + 1) array, the labels in its last column; "
            f"got shape {array.shape}"
        )
    return DataFile(array[:, :-1], array[:, -1], f"the last column ({array.shape[1] - 1})")


def _read_npz(path: Path, _: str | None) -> DataFile:
    with np.load(path, allow_pickle=False) as archive:
        missing = [k for k in ("X", "y") if k not in archive.files]
        if missing:
            raise InputError(
                f"{str(path)!r} must hold arrays named X and y; it has "
                f"{', '.join(archive.files) or 'none'}"
            )
        return DataFile(archive["X"], archive["y"], "the array y")


def _read_pt(path: Path, _: str | None) -> DataFile:
    obj = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(obj, dict) and {"X", "y"} <= set(obj):
        return DataFile(obj["X"], obj["y"], "the entry 'y'")
    if isinstance(obj, list | tuple) and len(obj) == 2:
        return DataFile(obj[0], obj[1], "the second of the pair (X, y)")
    raise InputError(f"{str(path)!r} must hold a dict with keys X and y, or a pair (X, y)")


def _read_csv(path: Path, label_column: str | None) -> DataFile:
    with open(path, newline="", encoding="utf-8") as handle:
        lines = [row for row in csv.reader(handle) if row and any(c.strip() for c in row)]
    if not lines:
        raise InputError(f"{str(path)!r} is empty")
    width = len(lines[0])
    header = None if _numeric(lines[0]) else [c.strip() for c in lines[0]]
    body = lines[1:] if header else lines
    label = _label_index(path, header, width, label_column)
    names = header or [f"column {j}" for j in range(width)]
    rows = [
        _csv_row(path, number, row, names, label)
        for number, row in enumerate(body, start=2 if header else 1)
    ]
    table = np.asarray(rows, dtype=np.float64).reshape(len(rows), width)
    where = f"column {names[label]!r}" if header else f"column {label}"
    return DataFile(np.delete(table, label, axis=1), table[:, label], where)


def _csv_row(path: Path, number: int, row: list[str], names: list[str], label: int) -> list:
    """One line of numbers; a wrong length or a non-number names the line, column, value."""
    if len(row) != len(names):
        raise InputError(
            f"{str(path)!r}, line {number}: {len(row)} columns, the first line has {len(names)}"
        )
    values = []
    for j, cell in enumerate(row):
        try:
            values.append(float(cell))
        except ValueError:
            what = "the label column" if j == label else "column"
            hint = "; labels must be numbers (encode the classes as 0, 1, …)" if j == label else ""
            raise InputError(
                f"{str(path)!r}, line {number}: {what} {names[j]!r} holds {cell.strip()!r}, "
                f"not a number{hint}"
            ) from None
    return values


def _numeric(row: list[str]) -> bool:
    try:
        [float(c) for c in row]
    except ValueError:
        return False
    return True


def _label_index(path: Path, header: list[str] | None, width: int, chosen: str | None) -> int:
    """The label column: ``chosen`` (a name or a number), else the one named as in
    :data:`LABEL_NAMES`; none is an error (never a guess)."""
    if width < 2:
        raise InputError(f"{str(path)!r} needs at least two columns (features and the label)")
    if chosen is None:
        names = [h.lower() for h in header or []]
        found = next((names.index(k) for k in LABEL_NAMES if k in names), None)
        if found is None:
            columns = f"its columns: {', '.join(header)}" if header else "it has no header line"
            raise InputError(
                f"{str(path)!r} has no label column (named {', '.join(LABEL_NAMES)}; "
                f"{columns}): name it with --label-column NAME|INDEX"
            )
        return found
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
