"""``deqlab kernel``: the population Gram matrix K (or K^(l), or the DEQ NTK) of a data set.

Past memory (the matrix and the work array of its least eigenvalue do not fit) the answer
comes from a seeded subsample S of the points, as ``deqlab verify`` answers
(:mod:`deqlab.verification.subsample`): each entry depends on its pair of points only, so
the matrix of S is a principal submatrix and Cauchy's interlacing theorem makes a Rayleigh
quotient on S a certified upper bound of λ_min (below: 0, the matrix is PSD) and a certified
lower bound of λ_max; the condition number is then at least their ratio. The diagonal is
exact over every point: M_ii = ν_i·M(x̂)_11, ν_i = ‖x_i‖²/d, x̂ any point of norm √d (each
matrix is factor·√(ν_iν_j)·E(c_ij) with E(1) one number). ``--save`` needs the whole matrix
and is refused there.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

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
from deqlab.cli.kernel_inputs import BUFFERS, WHAT, load_inputs, save_matrix
from deqlab.data.registry import DATASETS

if TYPE_CHECKING:
    from deqlab.theory.kernels import LeastEigenvalue

#: Accuracy of K = K^(∞) (absolute, on the normalised entries): population_gram's tol.
_K_TOL = 1e-14
#: Why λ_min ≥ 0 for every matrix this command computes.
PSD = "λ_min ≥ 0: K^(l) and K are Gram matrices (Definition 1), the NTK a limit of JJᵀ"
#: How each number past memory is read (JSON ``one_sided``).
ONE_SIDED = {
    "lambda_min": "upper bound: a Rayleigh quotient on the subsample S, Cauchy interlacing",
    "lambda_max": "lower bound: a Rayleigh quotient on S less its rounding, Cauchy interlacing",
    "condition_number": "lower bound: λ_max's lower bound over λ_min's upper bound",
    "diagonal": "exact, over every point: M_ii = ν_i·M(x̂)_11",
}


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


#: The library's argument names as this command's options, for its one-line errors.
_OPTIONS = {"n": "--n", "d": "--d", "seed": "--seed", "sigma_w2": "--sigma-w2"}


def _as_options(message: str) -> str:
    """``message`` with the library's argument names (`n`) written as the options (`--n`)."""
    for name, option in _OPTIONS.items():
        message = message.replace(f"`{name}`", f"`{option}`")
    return message


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
    seed: int = typer.Option(
        0, "--seed", help="Seed of the data set draw (and of the subsample past memory)."
    ),
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
    """Print λ*, the condition number and the diagonal of K (Ling et al. 2023, Eq. (14)).
    Past memory, from a named subsample (certified one-sided bounds)."""
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
            X, source, size = load_inputs(dataset, input_file, n, d, seed, data_dir, save, device)
            X = X.to(device)

            def matrix(points):
                return _matrix(points, sigma_w2, layers, ntk, parameterization, progress)

            if size is None:
                M, what, note = matrix(X)
                found = _whole(M, least_eigenvalue_large(M, progress=progress))
            else:
                M = None
                found, what, note = _from_subsample(X, size, seed, matrix, device, progress)
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
            save_matrix(save, M)
        except ValueError as err:
            raise fail(str(err)) from None
    lam = found.least
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
                "singular": bool(lam.singular) if found.subsample is None else None,
                "reason": lam.reason or None,
                "lambda_max": found.top,
                "lambda_max_proof": found.top_proof or None,
                "condition_number": found.condition_number,
                "diagonal": found.diagonal,
                "saved": None if save is None else str(save),
                "subsample": found.subsample,
                "one_sided": None if found.subsample is None else ONE_SIDED,
            }
        )
        return
    typer.echo(f"data: {source}, d = {X.shape[0]}, n = {X.shape[1]}, σ_w² = {sigma_w2:g}")
    if found.subsample is not None:
        typer.echo(_beyond_memory(found.subsample))
    typer.echo(f"kernel: {what}" + ("" if device == "cpu" else f", on {device}"))
    _echo_spectrum(note, found)
    if save is not None:
        typer.echo(f"saved: {save}")


@dataclass(frozen=True)
class _Spectrum:
    """What kernel prints of the matrix: λ_min with its certified bracket, λ_max and the
    condition number (past memory: certified lower bounds, ``top_proof``), the diagonal over
    every point, and the subsample S answered from (None: the whole data)."""

    least: LeastEigenvalue
    top: float
    diagonal: dict[str, float]
    subsample: dict | None = None
    top_proof: str = ""

    @property
    def condition_number(self) -> float:
        """λ_max/λ_min; past memory λ_max's lower bound over λ_min's upper: a lower bound."""
        if self.subsample is None:
            return float(self.least.condition_number)
        return self.top / self.least.bracket.upper


def _whole(M, lam: LeastEigenvalue) -> _Spectrum:
    return _Spectrum(lam, float(lam.max_eigenvalue), _summary(M.diagonal()))


def _summary(diag) -> dict[str, float]:
    return {"min": float(diag.min()), "mean": float(diag.mean()), "max": float(diag.max())}


def _from_subsample(X, size: int, seed: int, matrix, device: str, progress):
    """(:class:`_Spectrum` of the whole matrix from the subsample S of ``size`` points drawn
    with ``seed``, what the matrix is, its note): module docstring."""
    from deqlab.verification import subsample

    sample = subsample.draw(X.shape[1], size, seed)
    M, what, note = matrix(X[:, sample.indices])
    least, (top, proof) = subsample.spectrum(M, PSD, progress)
    one, _, _ = matrix(X[:, :1])  # M(x_0) = ν_0·M(x̂)_11
    nu = X.norm(dim=0) ** 2 / X.shape[0]  # (n,)
    diag = nu * (float(one[0, 0]) / float(nu[0]))
    found = {**sample.as_dict(), "why": subsample.why(X.shape[1], BUFFERS, WHAT, device)}
    return _Spectrum(least, top, _summary(diag), found, proof), what, note


def _beyond_memory(sample: dict) -> str:
    return (
        f"beyond memory: {sample['why']}; the answers come from the subsample S = "
        f"{sample['size']:,} of the {sample['n']:,} points (seed {sample['seed']}) as "
        "certified one-sided bounds (Cauchy interlacing): λ_min from above, λ_max and the "
        "condition number from below; the diagonal over every point"
    )


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


def _echo_spectrum(note: str | None, found: _Spectrum) -> None:
    """The text lines of the note, λ_min, λ_max, the condition number and the diagonal."""
    lam, past = found.least, found.subsample is not None
    if note:
        typer.echo(f"note: {note}")
    typer.echo(f"lambda_min (λ*): {'at most ' if past else ''}{lam.value:.10g}")
    below, above = (
        (PSD, "a Rayleigh quotient on S, Cauchy interlacing")
        if past
        else ("a float64 Cholesky factorization of K − ℓI", "a Rayleigh quotient")
    )
    typer.echo(
        f"  certified: {lam.bracket.lower:.10g} ≤ λ_min ≤ {lam.bracket.upper:.10g} (below: "
        f"{below}; above: {above}; rounding bounded)"
    )
    if lam.singular:
        typer.echo(f"  {lam.reason}")
    at_least = "at least " if past else ""
    typer.echo(f"lambda_max: {at_least}{found.top:.10g}")
    typer.echo(f"condition number: {at_least}{found.condition_number:.6g}")
    typer.echo(
        f"diagonal: min {found.diagonal['min']:.10g}, mean {found.diagonal['mean']:.10g}, "
        f"max {found.diagonal['max']:.10g}"
    )
