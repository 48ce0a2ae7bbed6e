"""``deqlab verify``: the three papers' hypotheses and predictions on the user's data.

Every usage error — a bad option, unusable data (shape mismatch, NaN/Inf, empty, n = 1,
duplicate inputs, labels of the wrong length, an unreadable file, a registered image data
set that is not on this machine: the line names where it looked and the command that
fetches it, as every command does) — is one
``error:`` line on stderr and exit code 2. Progress goes to stderr, never into ``--json``.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import typer

from deqlab.cli.app import JSON_HELP, app, echo_json, fail, failed_allocation
from deqlab.cli.progress import progress_bar
from deqlab.data.registry import DATASETS

MODEL_METAVAR = "relu-deq|mondeq|delm"
SWEEP_ONLY = "a width sweep (--width M,M,...) is for --model relu-deq without --train"
INPUT_HELP = (
    "Your data: .npz (arrays X (n, d) and y), .pt ({'X', 'y'} or (X, y)), .npy (an (n, d+1) "
    "array, labels last) or .csv (labels: the column named label, y or target, or the one "
    "--label-column names; a CSV with neither is refused). X is (n, d), one sample per row."
)


@app.command(
    "verify",
    help=(
        "Check the hypotheses and predictions of the three papers on your data and model: "
        "λ*, λ_0, Condition 1 with its margins and the width it needs, Eq. (10) and the rate "
        "(Ling et al. 2023; --model relu-deq), Conditions 1–2 and Theorem 3.3.5 (the thesis; "
        "--model mondeq), λ_T and Corollaries 1–2 (Kawaguchi 2021; --model delm, --loss). "
        "First, one line per theorem: it applies at this width, at a larger one (which), at "
        "none (why), or cannot be decided; and stand-ins labelled ours (a step size from the "
        "measured curvature, the rate the PL ratio predicts). Every least eigenvalue comes "
        "with a certified bracket. --train runs GD (at --eta, else the theorem's step where "
        "its condition holds, else the stand-in) and puts predicted beside measured. Past "
        "memory, the ReLU DEQ (and a width sweep) is answered from a named subsample "
        "(certified one-sided bounds)."
    ),
    epilog=(
        "Examples:\n\n  deqlab verify --dataset sphere --n 40 --d 40 --width 400\n\n"
        "  deqlab verify --dataset sphere --n 40 --d 40 --width 400 --json\n\n"
        "  deqlab verify --input data.csv --normalize --train 200 --out report/\n\n"
        "  deqlab verify --dataset digits --n 100 --classes 0,1 --model delm --train 50\n\n"
        "  deqlab verify --dataset digits --n 100 --model delm --loss logistic --tau 0.01"
    ),
)
def verify_command(
    dataset: str | None = typer.Option(
        None, "--dataset", metavar="NAME", help=f"A data set: {', '.join(DATASETS)}."
    ),
    input_file: Path | None = typer.Option(None, "--input", metavar="FILE", help=INPUT_HELP),
    n: int | None = typer.Option(None, "--n", help="Number of samples (data set default)."),
    d: int | None = typer.Option(None, "--d", help="Input dimension ('sphere' only)."),
    classes: str | None = typer.Option(
        None, "--classes", metavar="0,1", help="Classes of an image data set (default 0,1)."
    ),
    label_column: str | None = typer.Option(
        None, "--label-column", metavar="NAME|INDEX", help="The label column of a .csv file."
    ),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="Data root for image sets."),
    normalize: bool = typer.Option(
        False,
        "--normalize",
        help="Scale every input (row) to norm √d: Assumption 2, what the theorems assume.",
    ),
    standardize: bool = typer.Option(
        False,
        "--standardize",
        help="Scale each feature to zero mean and unit variance "
        "first (ours: no theorem assumes it; with --normalize, standardised first).",
    ),
    model: str = typer.Option("relu-deq", "--model", metavar=MODEL_METAVAR, help="The model."),
    width: str | None = typer.Option(
        None,
        "--width",
        metavar="M[,M...]",
        help="Hidden width (default 1000; the DELM's is "
        "d); several, comma-separated, sweep the ReLU DEQ's width reusing K.",
    ),
    sigma_w2: float = typer.Option(0.08, "--sigma-w2", help="σ_w² of Assumption 1 (ReLU DEQ)."),
    gamma: float = typer.Option(0.8, "--gamma", help="γ of the DELM, in (0, 1)."),
    monotonicity: float = typer.Option(
        0.2, "--monotonicity", help="m of the monotone DEQ, W = (1 − m)I − AᵀA + B − Bᵀ."
    ),
    radius: float = typer.Option(1.0, "--radius", help="R of the monotone DEQ's balls."),
    epsilon: float | None = typer.Option(
        None, "--epsilon", help="ε of the DELM's time to ε (default 10⁻³ of L₀ − L*)."
    ),
    loss: str = typer.Option(
        "square",
        "--loss",
        metavar="square|logistic",
        help="The DELM's loss: square (Corollary 1) or logistic + τq² (Corollary 2; labels "
        "0/1, or two classes read as 0 and 1).",
    ),
    tau: float = typer.Option(0.01, "--tau", help="τ ≥ 0 of the logistic loss's τq² term."),
    logistic_radius: float = typer.Option(
        float("inf"),
        "--logistic-radius",
        metavar="R",
        help="R ∈ (0, inf] of Corollary 2 (‖B_t‖₁ < (1 − γ)R; default inf).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the network (and of a data set)."),
    train: int = typer.Option(0, "--train", metavar="STEPS", help="GD steps (0: none)."),
    eta: float | None = typer.Option(
        None,
        "--eta",
        help="GD step size (default: the theorem's where its condition holds, else the "
        "stand-in 1/λ_max(H(0)); the output says which).",
    ),
    target_loss: float | None = typer.Option(
        None, "--target-loss", help="The loss the stand-ins count steps to (default 10⁻³ Φ(0))."
    ),
    device: str = typer.Option(
        "cpu",
        "--device",
        metavar="cpu|cuda|cuda:N",
        help="Where the ReLU DEQ's K, NTK and their least eigenvalues are computed.",
    ),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
    out: Path | None = typer.Option(
        None, "--out", metavar="DIR", help="Write an HTML page with figures here."
    ),
) -> None:
    """Check the papers' hypotheses and predictions on your data and model."""
    from deqlab.devices import check_device
    from deqlab.verification import load_dataset, load_file, verify
    from deqlab.verification.checks import check_model
    from deqlab.verification.memory import check_memory

    try:
        if (dataset is None) == (input_file is None):
            raise ValueError("give exactly one of --dataset NAME or --input FILE")
        _check_exclusive(dataset, n=n, d=d, classes=classes, label_column=label_column)
        widths = _widths(width)
        if len(widths) > 1 and (model != "relu-deq" or train):
            raise ValueError(SWEEP_ONLY)
        settings = {
            "width": widths[0] if len(widths) == 1 else None,
            "sigma_w2": sigma_w2,
            "gamma": gamma,
            "monotonicity": monotonicity,
            "radius": radius,
            "epsilon": epsilon,
            "loss": loss,
            "tau": tau,
            "logistic_radius": logistic_radius,
        }
        check = check_model(model, settings)
        device = check_device(device)
        _check_out(out)
        widest = check if len(widths) == 1 else replace(check, width=max(widths))
        if dataset is not None and n is not None:  # refused before the data are drawn
            check_memory(widest, n, d or 0, train=train, subject="`--n`", device=device)
        if dataset is not None:
            X, y, name = load_dataset(
                dataset, n=n, d=d, classes=_classes(classes), seed=seed, data_dir=data_dir
            )
            labels, subject = "the data set's labels", "`--n`"
        else:
            X, y, labels = load_file(input_file, label_column=label_column)
            name, subject = str(input_file), f"`--input` {str(input_file)!r}"
        shape = np.shape(X)
        check_memory(
            widest,
            shape[0],
            shape[1] if len(shape) == 2 else 0,
            train=train,
            subject=subject,
            device=device,
        )
        common = {
            "seed": seed,
            "train": train,
            "eta": eta,
            "normalize": normalize,
            "standardize": standardize,
            "device": device,
            "name": name,
            "labels": labels,
        }
        if check.model == "delm" and widths[0] is not None and widths[0] != len(X[0]):
            raise ValueError(f"`width` of the DELM is d = {len(X[0])} (φ(x) = x); got {widths[0]}")
        if len(widths) > 1:
            return _sweep(X, y, check, widths, common, as_json, out)
        with progress_bar() as progress:
            result = verify(X, y, check, target_loss=target_loss, progress=progress, **common)
        page = None if out is None else result.write_html(out)
    except (ValueError, TypeError, OSError) as err:  # a missing data set is an OSError
        raise fail(str(err)) from None
    except (MemoryError, RuntimeError) as err:
        raise failed_allocation(err, "a smaller --n or --width fits") from None
    if as_json:
        echo_json({**result.as_dict(), "page": None if page is None else str(page)})
        return
    from deqlab.cli.verify_output import print_result

    print_result(result)
    if page is not None:
        typer.echo(f"page: {page}")


def _widths(text: str | None) -> list[int | None]:
    """``--width 500`` or ``--width 200,400,800`` as ints (``[None]``: the default)."""
    if text is None:
        return [None]
    try:
        widths = [int(w) for w in text.split(",")]
    except ValueError:
        raise ValueError(
            f"--width must be an integer or integers separated by commas; got {text!r}"
        ) from None
    if len(set(widths)) != len(widths):
        raise ValueError(f"--width lists a width twice: {text!r}")
    return widths


def _check_out(out: Path | None) -> None:
    """Refuse an --out that cannot be written before any computation."""
    if out is None:
        return
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a file, not a directory")
    parent = out if out.exists() else next((p for p in out.parents if p.exists()), Path("."))
    if not parent.is_dir():
        raise ValueError(f"--out {str(out)!r} cannot be created: {str(parent)!r} is a file")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(
            f"--out {str(out)!r} is not writable (no write permission on {str(parent)!r})"
        )


def _sweep(X, y, check, widths, common: dict, as_json: bool, out: Path | None) -> None:
    """``--width 200,400,800``: the ReLU DEQ at each width, K computed once; a table, and
    with --out a figure of the margins and λ_0/(mλ*/2) against m. Past memory, from the
    subsample S (:mod:`deqlab.verification.sweep`)."""
    from deqlab.verification.inputs import prepare
    from deqlab.verification.memory import draw_subsample
    from deqlab.verification.sweep import sweep

    if check.model != "relu-deq" or common["train"]:
        raise ValueError(SWEEP_ONLY)
    reading = ("name", "normalize", "standardize", "labels")
    shape, widest = np.shape(X), replace(check, width=max(widths))
    n, d = shape[0], shape[1] if len(shape) == 2 else 0
    sample = draw_subsample(widest, n, d, seed=common["seed"], device=common["device"])
    inputs = prepare(X, y, **{k: common[k] for k in reading}, sample=sample)
    with progress_bar() as progress:
        found = sweep(
            inputs, check, widths, seed=common["seed"], device=common["device"], progress=progress
        )
    figure = None if out is None else found.draw(out)
    if as_json:
        echo_json({**found.as_dict(), "figure": None if figure is None else str(figure)})
        return
    for line in found.lines():
        typer.echo(line)
    if figure is not None:
        typer.echo(f"figure: {figure}")


def _check_exclusive(dataset: str | None, **given: Any) -> None:
    """--n, --d, --classes go with --dataset; --label-column with --input."""
    for option, value in given.items():
        if value is None:
            continue
        wants_dataset = option != "label_column"
        if wants_dataset == (dataset is None):
            flag = "--" + option.replace("_", "-")
            raise ValueError(f"{flag} applies to {'--dataset' if wants_dataset else '--input'}")


def _classes(text: str | None) -> tuple[int, ...] | None:
    """``--classes 0,1`` as (0, 1)."""
    if text is None:
        return None
    try:
        return tuple(int(c) for c in text.split(","))
    except ValueError:
        raise ValueError(f"--classes must be integers separated by commas; got {text!r}") from None
