"""What ``deqlab verify`` prints: what was read, one line per theorem, the stand-ins (ours),
the key numbers, the statements table, the verdict sentence and the model's legend line."""

from __future__ import annotations

import typer

from deqlab._format import number
from deqlab.verification.answers import bracket_text
from deqlab.verification.precision import lines as precision_lines
from deqlab.verification.subsample import line as subsample_line


def print_result(result) -> None:
    """The data and layout read, the legend, one line per theorem, the stand-ins (ours),
    the key numbers, the statements table and the verdict sentence."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from deqlab.cli.statements_table import print_statements
    from deqlab.verification.api import LEGENDS

    console = Console(width=160)
    for line in header_lines(result):
        typer.echo(line)
    table = Table("quantity", "value", title="Numbers (all of them: --json)")
    for label, value in _headline(result):
        table.add_row(escape(label), escape(value))
    console.print(table)
    print_statements([s.as_dict() for s in result.statements], console)
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
        *([] if (past := subsample_line(result.numbers)) is None else [past]),
        "answers (one line per theorem):",
        *(f"  {a.line()}" for a in result.answers),
    ]
    lines += precision_lines(result.numbers)
    training = result.training
    if training is not None:
        lines.append(
            f"training: {training['steps']} GD steps at η = {training['eta']:.3g}, "
            f"{training['eta_source']}"
        )
    standins = result.stand_ins.lines()
    if standins:
        lines += [
            "stand-ins (ours, where the theorems cannot apply):",
            *(f"  {line}" for line in standins),
        ]
    return lines


def _headline(result) -> list[tuple[str, str]]:
    k, t = result.numbers, result.training
    rows = {"relu-deq": _relu_rows, "mondeq": _mondeq_rows, "delm": _delm_rows}[result.model](k)
    if t is not None:
        rows += [
            ("training: steps, η", f"{t['steps']}, {number(t['eta'], 4)}"),
            *([("training: stopped at", t["message"])] if t.get("message") else []),
            (
                "training: loss Φ(0) → Φ(T)",
                f"{number(t['loss0'], 4)} → {number(t['loss_final'], 4)}"
                if "loss0" in t
                else number(t["loss_final"], 4),
            ),
        ]
        if "rate_measured" in t:
            rows.append(
                (
                    "rate per step: predicted 1 − ηλ_0/2, measured (Φ(T)/Φ(0))^(1/T)",
                    f"{number(t['rate_predicted'], 8)}, {number(t['rate_measured'], 8)}",
                )
            )
        if "time_to_epsilon" in t:
            times, reached = t["time_to_epsilon"], t["time_to_epsilon"]["measured"]
            rows.append(
                (
                    f"time to ε = {number(t['epsilon'], 4)}: predicted T_ε, measured (first τη "
                    "with L − L* ≤ ε)",
                    f"{number(times['predicted'], 4)}, "
                    f"{'not reached' if reached is None else number(reached, 4)}",
                )
            )
            steps, first = t["steps_to_epsilon"], t["steps_to_epsilon"]["measured"]
            rows.append(
                (
                    f"steps to ε at η = {number(t['eta'], 4)}: predicted T_ε/η, measured",
                    f"{number(steps['predicted'], 4)}, {'not reached' if first is None else first}",
                )
            )
    return rows


def _relu_rows(k: dict) -> list[tuple[str, str]]:
    rows = [
        ("λ* = λ_min(K) (Eq. 14)", _certified(k, "lambda_star", "λ*")),
        (
            "cond(K) = λ_max/λ_min",
            number(k["condition_number_K"], 4)
            if k["condition_number_K"] is not None
            else "not measured (a subsample)",
        ),
        ("λ_min(DEQ NTK)", _certified(k, "ntk_lambda_min", "λ_min")),
        ("‖W(0)‖₂ (Lemma 1 bound)", f"{number(k['W_norm'], 4)} ({number(k['lemma1_bound'], 4)})"),
        (
            f"λ_0 at m = {k['width']} (Theorem 2: mλ*/2)",
            f"{number(k['lambda0'], 4)} ({number(k['lambda0_theorem2'], 4)})",
        ),
    ]
    if "condition1" in k:
        c = k["condition1"]
        rows += [
            (f"Condition 1, Eq. ({e[2:]}): lhs/rhs", number(c[e]["margin"], 4))
            for e in ("eq7", "eq8", "eq9")
        ]
        w = k["required_width"]
        least = " (at least: from the subsample S)" if "subsample" in k else ""
        rows += [
            (
                "width needed: Condition 1 at one δ (Theorem 1), λ_0 = mλ*/2, ‖U(0)‖₂ ∝ √m" + least,
                _width(w["condition1"]),
            ),
            (
                "… each equation alone, same scaling: Eqs. (7), (8), (9)" + least,
                ", ".join(_width(w[e]) for e in ("eq7", "eq8", "eq9")),
            ),
            ("Eq. (10): η <", number(k["eq10_bound"], 4)),
            ("rate 1 − ηλ_0/2 at η = Eq. (10) bound", number(k["rate_at_bound"], 10)),
        ]
    scale = k["theorem2_width"]["scale"]
    rows.append(
        (
            "Theorem 2's width scale n²/λ*² log(n/(λ*t)), t = 0.01 (× a constant the paper "
            "does not give; not a width needed)" + (" (at least)" if "subsample" in k else ""),
            _width(scale),
        )
    )
    return rows


def _certified(k: dict, name: str, symbol: str) -> str:
    """The value with its certified bracket where one was computed."""
    bounds = k.get(f"{name}_bounds")
    if bounds is None:
        return number(k[name], 4)
    return f"{number(k[name], 4)} ({bracket_text(symbol, bounds, k[name])})"


def _mondeq_rows(k: dict) -> list[tuple[str, str]]:
    rows = [("λ_0 = σ_min(Z(0))", _certified(k, "lambda0", "λ_0"))]
    for name, c in k["conditions"].items():
        fit = k["required_width"].get(name)
        rows.append(
            (
                f"{name}: lhs/rhs (width from the fit)",
                f"{number(c['margin'], 4)} ({_width(fit['width']) if fit else '—'})",
            )
        )
    rows += [
        ("Theorem 3.3.5: η_max", number(k["eta_max"], 4)),
        ("rate 1 − η_max λ_0²/4", number(k["rate_at_eta_max"], 10)),
    ]
    return rows


def _delm_rows(k: dict) -> list[tuple[str, str]]:
    times, corollary = k["time_to_epsilon"], k["corollary"]
    return [
        ("λ_T ≥ 1/(m(1+γ)²) (Eq. 33)", number(k["lambda_T_lower_bound"], 4)),
        ("λ_min(D_0)", _certified(k, "lambda_min_D0", "λ_min(D_0)")),
        ("σ_min(Φ)", number(k["sigma_min_phi"], 4)),
        (f"{corollary}: κ ({k['loss']} loss)", number(k["kappa"], 4) + _vacuous(k)),
        (
            f"{corollary} rate 2κλ_T: guaranteed, at init",
            f"{number(k['rate_guaranteed'], 4)}, {number(k['rate_at_init'], 4)}",
        ),
        (
            f"time to ε = {number(k['epsilon'], 4)} ({k['time_equation']}): guaranteed, at init",
            f"{number(times['guaranteed'], 4)}, {number(times['at_init'], 4)}",
        ),
    ]


def _vacuous(k: dict) -> str:
    """κ = 0: Eq. (7)'s bound promises no decrease (rank(Φ) below the corollary's, or τ = 0
    with R = ∞)."""
    return " (the bound of Eq. (7) is vacuous: L_T − L* ≤ L₀ − L*)" if k["bound_vacuous"] else ""


def _width(m: object) -> str:
    if not isinstance(m, float | int):
        return "—"
    if m == float("inf"):
        return "none (∞)"
    return f"{m:.3g}"
