"""``deqlab kernel``: the population Gram matrix K (or K^(l), or the DEQ NTK) of a data set."""

from __future__ import annotations

import warnings
from pathlib import Path

import typer

from deqlab.cli.app import (
    JSON_HELP,
    app,
    check_output_file,
    echo_json,
    fail,
    failed_allocation,
    warn,
)
from deqlab.data.registry import DATASETS

#: Accuracy of K = K^(∞) (absolute, on the normalised entries): population_gram's tol.
_K_TOL = 1e-14


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
    device: str,
):
    """(X (d, n) float64, description) from a registered data set or a .npy file; an n
    whose matrices cannot fit is refused before the data are drawn or the file is read."""
    import torch

    from deqlab.data import get_dataset

    if (dataset is None) == (input_file is None):
        raise ValueError("give exactly one of --dataset NAME or --input X.npy")
    if input_file is not None:
        X = _read_array(input_file)
        _check_memory(f"`--input` {str(input_file)!r}", X.shape[1], device)
        n_read, d_read = X.shape[1], X.shape[0]
        return X, f"{input_file}, read as (n, d) = ({n_read}, {d_read}): one sample per row"
    if n is not None:
        _check_memory("`--n`", n, device)
    data = get_dataset(dataset, n=n, d=d, seed=seed, data_dir=data_dir)
    if n is None:
        _check_memory(f"`--dataset` {dataset}", data.X.shape[1], device)
    return data.X.to(torch.float64), f"{data.name} (seed {seed})"


#: The library's argument names as this command's options, for its one-line errors.
_OPTIONS = {"n": "--n", "d": "--d", "seed": "--seed", "sigma_w2": "--sigma-w2"}


def _as_options(message: str) -> str:
    """``message`` with the library's argument names (`n`) written as the options (`--n`)."""
    for name, option in _OPTIONS.items():
        message = message.replace(f"`{name}`", f"`{option}`")
    return message


def _check_memory(subject: str, n: int, device: str) -> None:
    """Refuse an n whose matrix and its λ_min work array (2 n×n float64) cannot fit."""
    from deqlab._memory import check_square

    what = "the kernel matrix and the work array of its least eigenvalue"
    check_square(subject, n, what, buffers=2, per_point=8 * 64, device=device)


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
        None,
        "--input",
        help="A .npy file holding X of shape (n, d), one sample per row (as verify --input).",
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
    device: str = typer.Option(
        "cpu",
        "--device",
        metavar="cpu|cuda|cuda:N",
        help="Where the matrix is computed: cpu, cuda (the current GPU) or cuda:N.",
    ),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Print λ*, the condition number and the diagonal of K (Ling et al. 2023, Eq. (14))."""
    from deqlab.cli.progress import progress_bar
    from deqlab.devices import check_device
    from deqlab.theory.spectra import least_eigenvalue_large

    layers = _parse_depth(depth)
    if dataset is not None and dataset not in DATASETS:
        choices = ", ".join(repr(name) for name in DATASETS)
        raise fail(f"`--dataset` must be one of {choices}; got {dataset!r}")
    with warnings.catch_warnings(record=True) as caught, progress_bar() as progress:
        warnings.simplefilter("always")  # each shown as one line, below
        try:
            device = check_device(device)
            if save is not None:
                check_output_file("--save", save, "K.npy")
            X, source = _load_inputs(dataset, input_file, n, d, seed, data_dir, device)
            X = X.to(device)
            M, what, note = _matrix(X, sigma_w2, layers, ntk, parameterization, progress)
            lam = least_eigenvalue_large(M, progress=progress)
        except (ValueError, TypeError, OSError) as err:  # a missing data set is an OSError
            about_file = input_file is not None and str(err).startswith("`X`")
            message = _as_options(str(err))
            raise fail(
                f"`--input` {str(input_file)!r}: {message}" if about_file else message
            ) from None
        except (MemoryError, RuntimeError) as err:
            raise failed_allocation(err, "a smaller --n fits") from None
    for warning in caught:
        warn(str(warning.message))
    if save is not None:
        try:
            _save_matrix(save, M)
        except ValueError as err:
            raise fail(str(err)) from None
    diag = M.diagonal()
    diagonal = {"min": float(diag.min()), "mean": float(diag.mean()), "max": float(diag.max())}
    if as_json:
        echo_json(
            {
                "data": source,
                "d": int(X.shape[0]),
                "n": int(X.shape[1]),
                "sigma_w2": sigma_w2,
                "device": device,
                "kernel": what,
                "depth": layers,
                "note": note,
                "lambda_min": float(lam.value),
                "lambda_min_bounds": [lam.bracket.lower, lam.bracket.upper],
                "lambda_min_proofs": [lam.bracket.lower_proof, lam.bracket.upper_proof],
                "singular": bool(lam.singular),
                "reason": lam.reason or None,
                "lambda_max": float(lam.max_eigenvalue),
                "condition_number": float(lam.condition_number),
                "diagonal": diagonal,
                "saved": None if save is None else str(save),
            }
        )
        return
    typer.echo(f"data: {source}, d = {X.shape[0]}, n = {X.shape[1]}, σ_w² = {sigma_w2:g}")
    typer.echo(f"kernel: {what}" + ("" if device == "cpu" else f", on {device}"))
    _echo_spectrum(note, lam, diagonal)
    if save is not None:
        typer.echo(f"saved: {save}")


def _matrix(X, sigma_w2: float, layers: int | None, ntk: bool, parameterization: str, progress):
    """(M, what it is, a note or None): the DEQ NTK, K^(layers), or K itself where
    ``layers`` is past the depth at which K^(l) is within :data:`_K_TOL` of K."""
    from deqlab.theory.kernels import converged_depth, population_gram
    from deqlab.theory.ntk import deq_ntk

    if ntk:
        if layers is not None:
            raise ValueError("--ntk is the infinite-depth kernel: drop --depth or use 'inf'")
        M = deq_ntk(X, sigma_w2, parameterization=parameterization, progress=progress)
        return M, f"DEQ NTK ({parameterization})", None
    if layers is not None and layers > (limit := converged_depth(sigma_w2, _K_TOL)):
        M = population_gram(X, sigma_w2, None, tol=_K_TOL, progress=progress)
        note = (
            f"depth {layers} > {limit}: from l = {limit} on, |K^(l) - K| <= 2(l+1)σ_w^(2l) "
            f"<= {_K_TOL:g} relative to the diagonal, so K = K^(∞) was computed instead "
            "of the layers"
        )
        return M, f"K^({layers}) = K = K^(∞) (Eq. 14), to {_K_TOL:g}", note
    M = population_gram(X, sigma_w2, layers, progress=progress)
    what = "K = K^(∞) (Eq. 14)" if layers is None else f"K^({layers}) (Definition 1)"
    return M, what, None


def _echo_spectrum(note: str | None, lam, diagonal: dict[str, float]) -> None:
    """The text lines of the note, λ_min, λ_max, the condition number and the diagonal."""
    if note:
        typer.echo(f"note: {note}")
    typer.echo(f"lambda_min (λ*): {lam.value:.10g}")
    typer.echo(
        f"  certified: {lam.bracket.lower:.10g} ≤ λ_min ≤ {lam.bracket.upper:.10g} (below: "
        "a float64 Cholesky factorization of K − ℓI; above: a Rayleigh quotient; rounding "
        "bounded)"
    )
    if lam.singular:
        typer.echo(f"  {lam.reason}")
    typer.echo(f"lambda_max: {lam.max_eigenvalue:.10g}")
    typer.echo(f"condition number: {lam.condition_number:.6g}")
    typer.echo(
        f"diagonal: min {diagonal['min']:.10g}, mean {diagonal['mean']:.10g}, "
        f"max {diagonal['max']:.10g}"
    )
