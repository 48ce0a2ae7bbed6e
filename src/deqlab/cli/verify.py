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

from deqlab.cli.app import JSON_HELP, app, echo_json, fail
from deqlab.cli.progress import progress_bar
from deqlab.data.registry import DATASETS

MODEL_METAVAR = "relu-deq|mondeq|delm"
INPUT_HELP = (
    "Your data: .npz (arrays X (n, d) and y), .pt ({'X', 'y'} or (X, y)), .npy (an (n, d+1) "
    "array, labels last) or .csv (labels: the column named label, y or target, else the last)."
)


@app.command(
    "verify",
    help=(
        "Check the hypotheses and predictions of the three papers on your data and model: "
        "λ*, λ_0, Condition 1 with its margins and the width it needs, Eq. (10) and the rate "
        "(Ling et al. 2023; --model relu-deq), Conditions 1–2 and Theorem 3.3.5 (the thesis; "
        "--model mondeq), λ_T and Corollaries 1–2 (Kawaguchi 2021; --model delm, --loss). "
        "--train runs "
        "GD with the theorem's step size and puts predicted beside measured."
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
        None, "--eta", help="GD step size (default: the theorem's; see the numbers)."
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
    from deqlab.runs.devices import check_device
    from deqlab.verify import load_dataset, load_file, verify
    from deqlab.verify.checks import check_memory, check_model

    try:
        if (dataset is None) == (input_file is None):
            raise ValueError("give exactly one of --dataset NAME or --input FILE")
        _check_exclusive(dataset, n=n, d=d, classes=classes, label_column=label_column)
        widths = _widths(width)
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
        if dataset is not None:
            X, y, name = load_dataset(
                dataset, n=n, d=d, classes=_classes(classes), seed=seed, data_dir=data_dir
            )
            labels, subject = "the data set's labels", "`--n`"
        else:
            X, y, labels = load_file(input_file, label_column=label_column)
            name, subject = str(input_file), f"`--input` {str(input_file)!r}"
        shape = np.shape(X)
        widest = check if len(widths) == 1 else replace(check, width=max(widths))
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
    if as_json:
        echo_json({**result.as_dict(), "page": None if page is None else str(page)})
        return
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
    with --out a figure of the margins and λ_0/(mλ*/2) against m."""
    from deqlab.verify.sweep import sweep

    if check.model != "relu-deq" or common["train"]:
        raise ValueError("a width sweep (--width M,M,...) is for --model relu-deq without --train")
    with progress_bar() as progress:
        found = sweep(
            X,
            y,
            check,
            widths,
            progress=progress,
            **{k: v for k, v in common.items() if k not in ("train", "eta")},
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


def print_result(result) -> None:
    """The data and layout read, the legend, one line per theorem, the stand-ins (ours),
    the key numbers, the statements table and the verdict sentence."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from deqlab.cli.experiments import print_statements
    from deqlab.verify.api import LEGENDS

    console = Console(width=160)
    for line in header_lines(result):
        typer.echo(line)
    table = Table("quantity", "value", title="Numbers (all of them: --json)")
    for label, value in _headline(result):
        table.add_row(escape(label), escape(value))
    console.print(table)
    print_statements([s.as_dict() for s in result.statements])
    typer.echo(f"verdicts: {result.counts.sentence()}")
    typer.echo(LEGENDS[result.model])


def header_lines(result) -> list[str]:
    """What verify read and its one-line answers, as printed (docs/verify.md quotes them)."""
    data = result.data
    samples = "N" if result.model == "mondeq" else "n"
    lines = [
        f"{data['name']}: {samples} = {data['n']}, d = {data['d']}{data['preprocessing']} · "
        f"model {result.model} ({result.paper})",
        f"{data['layout'].replace('(n, d)', f'({samples}, d)')}; labels: {data['labels']}",
        "answers (one line per theorem):",
        *(f"  {a.line()}" for a in result.answers),
    ]
    standins = result.stand_ins.lines()
    if standins:
        lines += [
            "stand-ins (ours, where the theorems cannot apply):",
            *(f"  {line}" for line in standins),
        ]
    return lines


def _g(x: object, digits: int = 4) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _headline(result) -> list[tuple[str, str]]:
    k, t = result.numbers, result.training
    rows = {"relu-deq": _relu_rows, "mondeq": _mondeq_rows, "delm": _delm_rows}[result.model](k)
    if t is not None:
        rows += [
            ("training: steps, η", f"{t['steps']}, {_g(t['eta'])}"),
            (
                "training: loss Φ(0) → Φ(T)",
                f"{_g(t['loss0'])} → {_g(t['loss_final'])}"
                if "loss0" in t
                else _g(t["loss_final"]),
            ),
        ]
        if "rate_measured" in t:
            rows.append(
                (
                    "rate per step: predicted 1 − ηλ_0/2, measured (Φ(T)/Φ(0))^(1/T)",
                    f"{_g(t['rate_predicted'], 8)}, {_g(t['rate_measured'], 8)}",
                )
            )
        if "time_to_epsilon" in t:
            times, reached = t["time_to_epsilon"], t["time_to_epsilon"]["measured"]
            rows.append(
                (
                    f"time to ε = {_g(t['epsilon'])}: predicted T_ε, measured (first τη "
                    "with L − L* ≤ ε)",
                    f"{_g(times['predicted'])}, "
                    f"{'not reached' if reached is None else _g(reached)}",
                )
            )
            steps, first = t["steps_to_epsilon"], t["steps_to_epsilon"]["measured"]
            rows.append(
                (
                    f"steps to ε at η = {_g(t['eta'])}: predicted T_ε/η, measured",
                    f"{_g(steps['predicted'])}, {'not reached' if first is None else first}",
                )
            )
    return rows


def _relu_rows(k: dict) -> list[tuple[str, str]]:
    rows = [
        ("λ* = λ_min(K) (Eq. 14)", _g(k["lambda_star"])),
        ("cond(K) = λ_max/λ_min", _g(k["condition_number_K"])),
        ("λ_min(DEQ NTK)", _g(k["ntk_lambda_min"])),
        ("‖W(0)‖₂ (Lemma 1 bound)", f"{_g(k['W_norm'])} ({_g(k['lemma1_bound'])})"),
        (
            f"λ_0 at m = {k['width']} (Theorem 2: mλ*/2)",
            f"{_g(k['lambda0'])} ({_g(k['lambda0_theorem2'])})",
        ),
    ]
    if "condition1" in k:
        c = k["condition1"]
        rows += [
            (f"Condition 1, Eq. ({e[2:]}): lhs/rhs", _g(c[e]["margin"]))
            for e in ("eq7", "eq8", "eq9")
        ]
        w = k["required_width"]
        rows += [
            (
                "width needed: Condition 1 at one δ (Theorem 1), λ_0 = mλ*/2, ‖U(0)‖₂ ∝ √m",
                _width(w["condition1"]),
            ),
            (
                "… each equation alone, same scaling: Eqs. (7), (8), (9)",
                ", ".join(_width(w[e]) for e in ("eq7", "eq8", "eq9")),
            ),
            ("Eq. (10): η <", _g(k["eq10_bound"])),
            ("rate 1 − ηλ_0/2 at η = Eq. (10) bound", _g(k["rate_at_bound"], 10)),
        ]
    scale = k["theorem2_width"]["scale"]
    rows.append(
        (
            "Theorem 2's width scale n²/λ*² log(n/(λ*t)), t = 0.01 (× a constant the paper "
            "does not give; not a width needed)",
            _width(scale),
        )
    )
    return rows


def _mondeq_rows(k: dict) -> list[tuple[str, str]]:
    rows = [("λ_0 = σ_min(Z(0))", _g(k["lambda0"]))]
    for name, c in k["conditions"].items():
        fit = k["required_width"].get(name)
        rows.append(
            (
                f"{name}: lhs/rhs (width from the fit)",
                f"{_g(c['margin'])} ({_width(fit['width']) if fit else '—'})",
            )
        )
    rows += [
        ("Theorem 3.3.5: η_max", _g(k["eta_max"])),
        ("rate 1 − η_max λ_0²/4", _g(k["rate_at_eta_max"], 10)),
    ]
    return rows


def _delm_rows(k: dict) -> list[tuple[str, str]]:
    times, corollary = k["time_to_epsilon"], k["corollary"]
    return [
        ("λ_T ≥ 1/(m(1+γ)²) (Eq. 33)", _g(k["lambda_T_lower_bound"])),
        ("λ_min(D_0)", _g(k["lambda_min_D0"])),
        ("σ_min(Φ)", _g(k["sigma_min_phi"])),
        (f"{corollary}: κ ({k['loss']} loss)", _g(k["kappa"])),
        (
            f"{corollary} rate 2κλ_T: guaranteed, at init",
            f"{_g(k['rate_guaranteed'])}, {_g(k['rate_at_init'])}",
        ),
        (
            f"time to ε = {_g(k['epsilon'])} ({k['time_equation']}): guaranteed, at init",
            f"{_g(times['guaranteed'])}, {_g(times['at_init'])}",
        ),
    ]


def _width(m: object) -> str:
    if not isinstance(m, float | int):
        return "—"
    if m == float("inf"):
        return "none (∞)"
    return f"{m:.3g}"
