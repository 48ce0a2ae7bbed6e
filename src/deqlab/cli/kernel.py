"""``deqlab kernel``: the population Gram matrix K (or K^(l), or the DEQ NTK) of a data set."""

from __future__ import annotations

from pathlib import Path

import typer

from deqlab.cli.app import EXIT_FAILED, JSON_HELP, app, echo_json, fail
from deqlab.data.registry import DATASETS


def _parse_depth(text: str) -> int | None:
    """``--depth``: a non-negative integer, or ``inf`` (None) for the limit K."""
    if text.strip().lower() in ("inf", "infinity", "∞"):
        return None
    try:
        depth = int(text)
    except ValueError:
        depth = -1
    if depth < 0:
        raise fail(f"`--depth` must be a non-negative integer or 'inf'; got {text!r}")
    return depth


def _load_inputs(
    dataset: str | None,
    input_file: Path | None,
    n: int | None,
    d: int | None,
    seed: int,
    data_dir: Path | None,
):
    """(X (d, n) float64, description) from a registered data set or a .npy file."""
    import numpy as np
    import torch

    if (dataset is None) == (input_file is None):
        raise ValueError("give exactly one of --dataset NAME or --input X.npy")
    if input_file is not None:
        X = torch.from_numpy(np.load(input_file, allow_pickle=False)).to(torch.float64)
        return X, f"{input_file} (columns are points)"
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
        "inf", "--depth", metavar="L|inf", help="Layers l of K^(l), or 'inf' for K."
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
    import numpy as np

    from deqlab._atomic import atomic_path
    from deqlab.data import DatasetNotFoundError
    from deqlab.theory.kernels import least_eigenvalue, population_gram
    from deqlab.theory.ntk import deq_ntk

    layers = _parse_depth(depth)
    try:
        X, source = _load_inputs(dataset, input_file, n, d, seed, data_dir)
        if ntk:
            if layers is not None:
                raise ValueError("--ntk is the infinite-depth kernel: drop --depth or use 'inf'")
            M = deq_ntk(X, sigma_w2, parameterization=parameterization)
            what = f"DEQ NTK ({parameterization})"
        else:
            M = population_gram(X, sigma_w2, layers)
            what = "K = K^(∞) (Eq. 14)" if layers is None else f"K^({layers}) (Definition 1)"
        lam = least_eigenvalue(M)
    except DatasetNotFoundError as err:  # the command is right; the data is not here
        from deqlab.data.locate import fetch_command

        first = str(err).split(". Looked in:")[0]
        raise fail(
            f"{first}; fetch it with: {fetch_command(dataset, data_dir)}", EXIT_FAILED
        ) from None
    except (ValueError, TypeError, OSError) as err:
        raise fail(str(err)) from None
    diag = M.diagonal()
    if save is not None:
        with atomic_path(save) as tmp, open(tmp, "wb") as handle:
            np.save(handle, M.cpu().numpy())
    if as_json:
        echo_json(
            {
                "data": source,
                "d": int(X.shape[0]),
                "n": int(X.shape[1]),
                "sigma_w2": sigma_w2,
                "kernel": what,
                "depth": layers,
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
