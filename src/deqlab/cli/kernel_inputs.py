"""What ``deqlab kernel`` reads and writes: X from a registered data set or a .npy file, the
memory plan — the whole matrix, a subsample S past memory
(:mod:`deqlab.verification.subsample`), or a refusal in one line before anything is drawn —
and ``--save``."""

from __future__ import annotations

from pathlib import Path

#: The matrix and the work array of its least eigenvalue (n×n float64 each), and the bytes
#: per point of the inputs and block buffers.
BUFFERS, PER_POINT = 2, 8 * 64
WHAT = "the kernel matrix and the work array of its least eigenvalue"


def read_array(path: Path):
    """X (d, n) float64 from a .npy file holding (n, d), one sample per row (the layout of
    ``verify --input``); :func:`deqlab.data.npy.read_npy` refuses what is not one finite real
    array, here also one that is not 2-D, empty, or has an all-zero sample."""
    import numpy as np
    import torch

    from deqlab.data.npy import read_npy

    where = f"`--input` {str(path)!r}"
    array = read_npy(path, where)
    if array.ndim != 2 or 0 in array.shape:
        raise ValueError(
            f"{where} holds an array of shape {array.shape}; expected X of shape (n, d) with "
            "n >= 1 samples (rows) and d >= 1 features"
        )
    zero = np.flatnonzero(~array.any(axis=1))
    if zero.size:
        shown = ", ".join(str(i) for i in zero[:5]) + (", ..." if zero.size > 5 else "")
        raise ValueError(
            f"{where} has {zero.size} all-zero row(s) (samples {shown}); the kernels need "
            "nonzero inputs (Assumption 2 takes ‖x_i‖ = √d)"
        )
    return torch.from_numpy(np.ascontiguousarray(array.T)).to(torch.float64)


def save_matrix(save: Path, M) -> None:
    """Write M as .npy atomically; an OSError becomes one ValueError line naming the file."""
    import numpy as np

    from deqlab._atomic import atomic_path

    try:
        with atomic_path(save) as tmp, open(tmp, "wb") as handle:
            np.save(handle, M.cpu().numpy())
    except OSError as err:
        where = f"`--save` {str(save)!r}"
        raise ValueError(f"{where} cannot be written: {err.strerror or err}") from None


def load_inputs(
    dataset: str | None,
    input_file: Path | None,
    n: int | None,
    d: int | None,
    seed: int,
    data_dir: Path | None,
    save: Path | None,
    device: str,
):
    """(X (d, n) float64, description, the subsample size past memory or None) from a
    registered data set or a .npy file; an n whose matrices cannot fit even on a subsample
    (or with ``--save``) is refused before the data are drawn (:func:`plan`)."""
    import torch

    from deqlab.data import get_dataset

    if (dataset is None) == (input_file is None):
        raise ValueError("give exactly one of --dataset NAME or --input X.npy")
    if input_file is not None:
        X = read_array(input_file)
        size = plan(f"`--input` {str(input_file)!r}", *X.shape[::-1], save, device)
        n_read, d_read = X.shape[1], X.shape[0]
        source = f"{input_file}, read as (n, d) = ({n_read}, {d_read}): one sample per row"
        return X, source, size
    if n is not None:
        plan("`--n`", n, d or 0, save, device)
    data = get_dataset(dataset, n=n, d=d, seed=seed, data_dir=data_dir)
    subject = "`--n`" if n is not None else f"`--dataset` {dataset}"
    size = plan(subject, data.X.shape[1], data.X.shape[0], save, device)
    return data.X.to(torch.float64), f"{data.name} (seed {seed})", size


def plan(subject: str, n: int, d: int, save: Path | None, device: str) -> int | None:
    """None where the matrix and its λ_min work array (:data:`BUFFERS` n×n float64) fit;
    past memory the size of the subsample S that does
    (:func:`deqlab.verification.subsample.size_for`). Refused in one line, with the estimate
    and the largest n that fits, where not even a subsample fits, or where ``--save`` asks
    for the whole matrix."""
    from deqlab._memory import MemoryRefusal, check_square
    from deqlab.verification import subsample

    size = subsample.size_for(n, d, buffers=BUFFERS, per_point=PER_POINT, device=device)
    if size is not None and save is None:
        return size
    try:
        check_square(subject, n, WHAT, buffers=BUFFERS, per_point=PER_POINT, device=device)
    except MemoryRefusal as err:
        if size is None:
            raise
        raise MemoryRefusal(
            f"{err}; --save writes the whole matrix: without it, deqlab kernel answers from a "
            "subsample (certified one-sided bounds)"
        ) from None
    return None
