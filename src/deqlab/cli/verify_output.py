"""What ``deqlab verify`` prints: what was read, one line per theorem, the stand-ins (ours),
the key numbers, the statements table, the verdict sentence and the model's legend line."""

from __future__ import annotations

import typer


def print_result(result) -> None:
    """The data and layout read, the legend, one line per theorem, the stand-ins (ours),
    the key numbers, the statements table and the verdict sentence."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from deqlab.cli.experiments import print_statements
    from deqlab.verification.api import LEGENDS

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
