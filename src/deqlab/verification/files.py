"""The files ``deqlab verify --input`` reads: X of shape (n, d), one sample per row, and
labels y of length n.

- ``.npz``: arrays ``X`` and ``y``;
- ``.pt``: a dict ``{"X": ..., "y": ...}`` or a pair ``(X, y)`` (read with
  ``torch.load(weights_only=True)``: no code is run; a file holding anything else, a model
  say, is named with what it holds);
- ``.npy``: one (n, d + 1) array whose last column holds the labels;
- ``.csv``: one sample per line, separated by commas (or semicolons, or tabs: the
  separator the first line uses most), a header line naming the columns; the labels are
  the column named ``label``, ``y`` or ``target`` (any case), or the one ``label_column``
  names or numbers. A file with no such column, or with more than one, is refused: a
  feature column is never taken for the labels, nor a label-like column for a feature,
  by guess.

Every reader says where it found the labels (:class:`DataFile` ``labels``); every problem
is one :class:`~deqlab.verification.inputs.InputError` line naming the file.
"""

from __future__ import annotations

import csv
import os
import pickle
import re
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from deqlab.data.npy import read_npy
from deqlab.verification.inputs import InputError

#: Extensions of the files ``--input`` reads.
FORMATS = (".npy", ".npz", ".pt", ".csv")
#: Header names taken as the label column of a CSV file.
LABEL_NAMES = ("label", "y", "target")
#: Separators a CSV file may use (the one its first line holds most is read).
SEPARATORS = (",", ";", "\t")


class DataFile(NamedTuple):
    """What :func:`load_file` read: ``X`` (n, d), ``y`` (n,) and where the labels were."""

    X: object
    y: object
    labels: str


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


#: What a .pt file must hold, as the errors say it.
PT_HOLDS = (
    "a dict {'X': ..., 'y': ...} or a pair (X, y) of tensors or arrays, saved with "
    "torch.save({'X': X, 'y': y}, path)"
)


def _read_pt(path: Path, _: str | None) -> DataFile:
    """A .pt file, read with ``weights_only=True``: tensors, arrays, dicts, lists; nothing
    in it is run. What it cannot read is named, with what the file must hold instead."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise InputError(_unreadable_pt(path, err)) from None
    if isinstance(obj, dict) and {"X", "y"} <= set(obj):
        return DataFile(obj["X"], obj["y"], "the entry 'y'")
    if isinstance(obj, list | tuple) and len(obj) == 2:
        return DataFile(obj[0], obj[1], "the second of the pair (X, y)")
    raise InputError(f"{str(path)!r} must hold {PT_HOLDS}; it holds a {type(obj).__name__}")


def _unreadable_pt(path: Path, err: Exception) -> str:
    """Why ``torch.load(weights_only=True)`` refused ``path``: not a torch.save file at all,
    or one holding objects other than data (a model, a class of the user's)."""
    with open(path, "rb") as handle:
        head = handle.read(2)
    if not (zipfile.is_zipfile(path) or head[:1] == b"\x80"):  # torch.save: a zip, or a pickle
        return f"{str(path)!r} is not a file torch.save wrote; it must hold {PT_HOLDS}"
    named = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(err))
    what = f"a {named.group(1)}" if named else "objects other than tensors, arrays and dicts"
    return (
        f"{str(path)!r} holds {what}, not data (it is read with weights_only=True: nothing "
        f"in it is run); it must hold {PT_HOLDS}"
    )


def _read_csv(path: Path, label_column: str | None) -> DataFile:
    with open(path, newline="", encoding="utf-8") as handle:
        text = handle.read()
    separator = _separator(text)
    rows = csv.reader(text.splitlines(), delimiter=separator)
    lines = [row for row in rows if row and any(c.strip() for c in row)]
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
    if separator != ",":
        where += f" ({_SEPARATOR_NAMES[separator]}-separated)"
    return DataFile(np.delete(table, label, axis=1), table[:, label], where)


_SEPARATOR_NAMES = {",": "comma", ";": "semicolon", "\t": "tab"}


def _separator(text: str) -> str:
    """The separator of :data:`SEPARATORS` the first non-empty line holds most (a comma
    where it holds none)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    counts = {s: first.count(s) for s in SEPARATORS}
    best = max(SEPARATORS, key=lambda s: counts[s])
    return best if counts[best] else ","


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
            if re.fullmatch(r"\s*-?\d+,\d+\s*", cell):
                hint += "; a decimal comma? write decimal points (1.5, not 1,5)"
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
        raise InputError(
            f"{str(path)!r} needs at least two columns (features and the label), separated by "
            "commas, semicolons or tabs; its first line has one"
        )
    if chosen is None:
        names = [h.lower() for h in header or []]
        found = [j for j, name in enumerate(names) if name in LABEL_NAMES]
        if not found:
            columns = f"its columns: {', '.join(header)}" if header else "it has no header line"
            raise InputError(
                f"{str(path)!r} has no label column (named {', '.join(LABEL_NAMES)}; "
                f"{columns}): name it with --label-column NAME|INDEX"
            )
        if len(found) > 1:
            both = ", ".join(repr(header[j]) for j in found)
            raise InputError(
                f"{str(path)!r} has {len(found)} label-like columns ({both}): name the label "
                "column with --label-column NAME (the others are then features; drop those "
                "that are not)"
            )
        return found[0]
    if header and chosen in header:
        return header.index(chosen)
    if chosen.lstrip("-").isdigit() and -width <= int(chosen) < width:
        return int(chosen) % width
    raise InputError(
        f"--label-column {chosen!r} is neither a column name of {str(path)!r} nor a column "
        f"number in 0..{width - 1}"
    )


_READERS = {".npy": _read_npy, ".npz": _read_npz, ".pt": _read_pt, ".csv": _read_csv}
