"""``deqlab kernel``: the population Gram matrix K (or K^(l), or the DEQ NTK) of a data set."""

from __future__ import annotations

import warnings
from pathlib import Path

import typer

from deqlab.cli.app import JSON_HELP, app, echo_json, fail, warn
from deqlab.data.registry import DATASETS

#: Accuracy of K = K^(∞) (absolute, on the normalised entries): population_gram's tol.
_K_TOL = 1e-14
#: The first bytes of every .npy file (numpy.lib.format.MAGIC_PREFIX).
_NPY_MAGIC = b"\x93NUMPY"


def _parse_depth(text: str) -> int | None:
    """``--depth``: a non-negative integer, or ``inf`` (None) for the limit K."""
    if text.strip().lower() in ("inf", "infinity", "∞"):
        return None
    try:
        depth = int(text)
    except ValueError:
        try:  # 1e9 is an integer too
            number = float(text)
            depth = int(number) if number.is_integer() else -1
        except (ValueError, OverflowError):
            depth = -1
    if depth < 0:
        raise fail(f"`--depth` must be a non-negative integer or 'inf'; got {text!r}")
    return depth


def _read_array(path: Path):
    """X from a .npy file, as float64 torch; a file that is not one finite real 2-D array is
    a one-line ValueError naming it. Pickled data is never loaded (``allow_pickle=False``)."""
    import numpy as np
    import torch

    where = f"`--input` {str(path)!r}"
    if not path.exists():
        raise ValueError(f"{where}: no such file")
    if path.is_dir():
        raise ValueError(f"{where} is a directory, not a .npy file")
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(_NPY_MAGIC))
            if head.startswith(b"PK"):
                raise ValueError(
                    f"{where} is a .npz archive, not a .npy array file; save the one array X "
                    "with numpy.save"
                )
            if head != _NPY_MAGIC:
                raise ValueError(
                    f"{where} is not a valid .npy array file (it does not start with the NumPy "
                    "header; pickled data is never loaded); save X with numpy.save"
                )
            handle.seek(0)
            array = np.load(handle, allow_pickle=False)
    except OSError as err:
        raise ValueError(f"{where} cannot be read: {err.strerror or err}") from None
    except (ValueError, EOFError) as err:
        if str(err).startswith(where):
            raise
        if "Object arrays" in str(err):
            raise ValueError(
                f"{where} holds Python objects (dtype object), not numbers; pickled data is "
                "never loaded"
            ) from None
        detail = " ".join(str(err).split()) or "the file ends early"
        raise ValueError(f"{where} is not a valid .npy array file: {detail}") from None
    if array.dtype.kind not in "fiu":
        raise ValueError(
            f"{where} holds an array of dtype {array.dtype}; expected real numbers (float or int)"
        )
    if array.ndim != 2:
        raise ValueError(
            f"{where} holds an array of shape {array.shape}; expected X of shape (d, n), one "
            "point per column"
        )
    if 0 in array.shape:
        raise ValueError(
            f"{where} holds an array of shape {array.shape}; expected X of shape (d, n) with "
            "d >= 1 features and n >= 1 columns (points)"
        )
    bad = int((~np.isfinite(array)).sum()) if array.dtype.kind == "f" else 0
    if bad:
        raise ValueError(f"{where} has {bad} NaN/Inf entries; X must be finite")
    return torch.from_numpy(np.ascontiguousarray(array)).to(torch.float64)


def _check_save(save: Path) -> None:
    """Refuse a ``--save`` target that is a directory or lies where nothing can be written,
    before anything is computed."""
    import tempfile

    where = f"`--save` {str(save)!r}"
    if save.is_dir():
        raise ValueError(f"{where} is a directory; give a file name, e.g. {save / 'K.npy'}")
    parent = save.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{where} cannot be written: {str(parent)!r} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as err:
        raise ValueError(
            f"{where} cannot be written: {str(parent)!r} is not writable ({err.strerror or err})"
        ) from None


def _save_matrix(save: Path, M) -> None:
    """Write M as .npy atomically; an OSError becomes one ValueError line naming the file."""
    import numpy as np

    from deqlab._atomic import atomic_path

    try:
        with atomic_path(save) as tmp, open(tmp, "wb") as handle:
            np.save(handle, M.cpu().numpy())
    except OSError as err:
        where = f"`--save` {str(save)!r}"
        raise ValueError(f"{where} cannot be written: {err.strerror or err}") from None


def _load_inputs(
    dataset: str | None,
    input_file: Path | None,
    n: int | None,
    d: int | None,
    seed: int,
    data_dir: Path | None,
):
    """(X (d, n) float64, description) from a registered data set or a .npy file."""
    import torch

    if (dataset is None) == (input_file is None):
        raise ValueError("give exactly one of --dataset NAME or --input X.npy")
    if input_file is not None:
        return _read_array(input_file), f"{input_file} (columns are points)"
    from deqlab.data import get_dataset

    data = get_dataset(dataset, n=n, d=d, seed=seed, data_dir=data_dir)
    return data.X.to(torch.float64), f"{data.name} (seed {seed})"


@app.command(
    "kernel",
    epilog=(
        "Examples:\n\n  deqlab kernel --dataset sphere --n 200 --d 50\n\n"
        "  deqlab kernel --dataset digits --n 100 --depth 3 --json\n\n"
        "  deqlab kernel --input X.npy --ntk --parameterization ntk --save K.npy"
    ),
)
def kernel(
    dataset: str | None = typer.Option(
        None, "--dataset", metavar="NAME", help=f"A data set: {', '.join(DATASETS)}."
    ),
    input_file: Path | None = typer.Option(
        None, "--input", help="A .npy file holding X of shape (d, n), one point per column."
    ),
    n: int | None = typer.Option(None, "--n", help="Number of points (data set default)."),
    d: int | None = typer.Option(None, "--d", help="Input dimension ('sphere' only)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the data set draw."),
    sigma_w2: float = typer.Option(0.08, "--sigma-w2", help="σ_w² of Assumption 1, in (0, 1)."),
    depth: str = typer.Option(
        "inf",
        "--depth",
        metavar="L|inf",
        help="Layers l of K^(l), or 'inf' for K. Beyond the depth where K^(l) is within "
        f"{_K_TOL:g} of K (15 layers at σ_w² = 0.08), K itself is computed, and said so.",
    ),
    ntk: bool = typer.Option(False, "--ntk", help="The infinite-width DEQ NTK instead of K."),
    parameterization: str = typer.Option(
        "standard",
        "--parameterization",
        metavar="standard|ntk",
        help="NTK normalisation: 'standard' (Θ/m) or 'ntk'.",
    ),
    save: Path | None = typer.Option(None, "--save", help="Write the matrix here (.npy)."),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="Data root for image sets."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Print λ*, the condition number and the diagonal of K (Ling et al. 2023, Eq. (14))."""
    from deqlab.theory.kernels import converged_depth, least_eigenvalue, population_gram
    from deqlab.theory.ntk import deq_ntk

    layers = _parse_depth(depth)
    if dataset is not None and dataset not in DATASETS:
        choices = ", ".join(repr(name) for name in DATASETS)
        raise fail(f"`--dataset` must be one of {choices}; got {dataset!r}")
    note = None
    with warnings.catch_warnings(record=True) as caught:  # shown as one line each, below
        warnings.simplefilter("always")
        try:
            if save is not None:
                _check_save(save)
            X, source = _load_inputs(dataset, input_file, n, d, seed, data_dir)
            if ntk:
                if layers is not None:
                    raise ValueError(
                        "--ntk is the infinite-depth kernel: drop --depth or use 'inf'"
                    )
                M = deq_ntk(X, sigma_w2, parameterization=parameterization)
                what = f"DEQ NTK ({parameterization})"
            elif layers is not None and layers > (limit := converged_depth(sigma_w2, _K_TOL)):
                M = population_gram(X, sigma_w2, None, tol=_K_TOL)
                what = f"K^({layers}) = K = K^(∞) (Eq. 14), to {_K_TOL:g}"
                note = (
                    f"depth {layers} > {limit}: from l = {limit} on, |K^(l) - K| <= 2(l+1)σ_w^(2l) "
                    f"<= {_K_TOL:g} relative to the diagonal, so K = K^(∞) was computed instead "
                    "of the layers"
                )
            else:
                M = population_gram(X, sigma_w2, layers)
                what = "K = K^(∞) (Eq. 14)" if layers is None else f"K^({layers}) (Definition 1)"
            lam = least_eigenvalue(M)
        except (ValueError, TypeError, OSError) as err:  # a missing data set is an OSError
            about_file = input_file is not None and str(err).startswith("`X`")
            raise fail(
                f"`--input` {str(input_file)!r}: {err}" if about_file else str(err)
            ) from None
    for warning in caught:
        warn(str(warning.message))
    diag = M.diagonal()
    if save is not None:
        try:
            _save_matrix(save, M)
        except ValueError as err:
            raise fail(str(err)) from None
    if as_json:
        echo_json(
            {
                "data": source,
                "d": int(X.shape[0]),
                "n": int(X.shape[1]),
                "sigma_w2": sigma_w2,
                "kernel": what,
                "depth": layers,
                "note": note,
                "lambda_min": float(lam.value),
                "singular": bool(lam.singular),
                "reason": lam.reason or None,
                "lambda_max": float(lam.max_eigenvalue),
                "condition_number": float(lam.condition_number),
                "diagonal": {
                    "min": float(diag.min()),
                    "mean": float(diag.mean()),
                    "max": float(diag.max()),
                },
                "saved": None if save is None else str(save),
            }
        )
        return
    typer.echo(f"data: {source}, d = {X.shape[0]}, n = {X.shape[1]}, σ_w² = {sigma_w2:g}")
    typer.echo(f"kernel: {what}")
    if note:
        typer.echo(f"note: {note}")
    typer.echo(f"lambda_min (λ*): {lam.value:.10g}")
    if lam.singular:
        typer.echo(f"  {lam.reason}")
    typer.echo(f"lambda_max: {lam.max_eigenvalue:.10g}")
    typer.echo(f"condition number: {lam.condition_number:.6g}")
    typer.echo(
        f"diagonal: min {float(diag.min()):.10g}, mean {float(diag.mean()):.10g}, "
        f"max {float(diag.max()):.10g}"
    )
    if save is not None:
        typer.echo(f"saved: {save}")
