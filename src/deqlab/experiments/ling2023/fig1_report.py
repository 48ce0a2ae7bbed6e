"""The statements and figures of Figure 1 / Theorem 1 of Ling et al. (2023), read from the
tidy table of :mod:`.fig1` (:func:`statements`, :func:`plot`).

Per data set, over the widths m of the sweep, in this order:

- the paper's observations of Figure 1 (Section 5): the convergence speed grows with m
  (speed = −slope of the least-squares line through (τ, ln Φ(τ)), τ <= T, the last step
  every width reached), the final training loss Φ(T) falls with m, and ‖W(τ)‖₂ < 1
  throughout training — each needs a step τ >= 1 and is NOT MEASURED without one;
- ours: GD ran every configured step at every width (a stop, e.g. ‖W‖₂ >= 1, is shown);
- the hypotheses of Theorem 1 (Condition 1's Eqs. (7)–(9) and Eq. (10)), ours: Eq. (9)
  holds at no width unless ‖a(0)‖₂ < 1/(2√n) (docs/findings.md#ling-eq9), and Theorem 1's
  statements guarded by the hypotheses (:mod:`deqlab.papers.ling2023.claims`);
- the PL inequalities of Section 2.3 (Eqs. (4)–(5)), which hold at every width, guarded
  only by Lemma 2's hypothesis (identities once it holds: a consistency check of two
  computations, not evidence for Theorem 1).

Figures, one panel per data set, one line per width: ``loss`` (Φ(τ), log scale, with the
Theorem 1 (iii) bound (1 − ηλ_0/2)^τ Φ(0) dashed where Condition 1 holds), ``w_norm``
(1 − ‖W(τ)‖₂ where Lanczos measured it, on a log axis: the widths' norms differ by a few
thousandths) and ``lambda_ratio`` (λ_τ/λ_0 with the line at 1/2, Theorem 1 (ii)). Each
panel's title gives the data set, n, d and η, the figure's title σ_w²; the legend sits
outside the panels, so no reference line is covered.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row, linear_fit
from deqlab.papers import LING
from deqlab.papers.ling2023.claims import (
    condition1_hypotheses,
    eq9_unreachable,
    learning_rate_hypothesis,
    pl_statements,
    theorem1_statements,
    widths,
)
from deqlab.papers.ling2023.theory import (
    Condition1,
    PLMargins,
    Theorem1Margins,
    pl_margins,
    theorem1_margins,
)
from deqlab.statements import Statement, is_measured, min_step_gap, numbers, ours, worst

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from deqlab.experiments.ling2023.fig1 import Fig1Config


@dataclass(frozen=True)
class WidthRun:
    """The rows of one (data set, width) task, as columns."""

    dataset: str
    m: int
    eta: float
    n: int
    d: int
    steps: list[int]  # steps with a finite loss
    loss: list[float]
    lambda_min: list[tuple[int, float]]  # (step, λ_τ) where measured
    W_norm: list[tuple[int, float]]  # (step, ‖W(τ)‖₂) where measured (Lanczos)
    status: str  # of the last record: "ok" or why the run stopped
    condition1: Condition1 | None = None
    records: list[Row] = field(default_factory=list)

    @property
    def lambda_0(self) -> float:
        first = self.lambda_min[0] if self.lambda_min else (None, math.nan)
        return first[1] if first[0] == 0 else math.nan

    @property
    def ok_steps(self) -> int:
        """Steps evaluated without a stop."""
        return sum(r["status"] == "ok" for r in self.records)

    def margins(self) -> Theorem1Margins | None:
        """Theorem 1's quantities over τ >= 1; ``None`` if step 0 lacks Φ(0) or λ_0."""
        try:
            return theorem1_margins(self.records, self.eta)
        except ValueError:
            return None

    def pl(self) -> PLMargins:
        """The PL inequalities of Section 2.3 over τ >= 1 (Eqs. (4)–(5))."""
        return pl_margins(self.records)

    def theorem1_bound(self) -> list[float]:
        """(1 − ηλ_0/2)^τ Φ(0) at each step of :attr:`steps` (Theorem 1 (iii))."""
        rate = 1.0 - self.eta * self.lambda_0 / 2.0
        return [rate**t * self.loss[0] for t in self.steps]

    def stop(self) -> str:
        """Where and why the run stopped ("" if it did not)."""
        if self.status == "ok":
            return ""
        last = self.records[-1]
        why = f": ‖W‖₂ = {last['W_norm']:.4g} ≥ 1" if self.status == "W_norm_ge_1" else ""
        return f"m = {self.m} stopped at step {last['step']} ({self.status}{why})"


def _finite(values: Iterable[tuple[int, object]]) -> list[tuple[int, float]]:
    return [(s, float(v)) for s, v in values if is_measured(v)]


def _condition1(row: Row) -> Condition1 | None:
    initial = {k[6:]: v for k, v in row.items() if str(k).startswith("cond1_")}
    try:
        return Condition1.from_dict(initial)
    except (KeyError, TypeError, ValueError):
        return None


def by_dataset(rows: list[Row]) -> dict[str, list[WidthRun]]:
    """Group the tidy rows by data set (in order of appearance), then width (increasing)."""
    groups: dict[tuple[str, int], list[Row]] = {}
    for row in rows:
        groups.setdefault((str(row["dataset"]), int(row["m"])), []).append(row)
    out: dict[str, list[WidthRun]] = {}
    for (name, m), mine in groups.items():
        mine = sorted(mine, key=lambda r: int(r["step"]))
        measured = _finite((int(r["step"]), r["loss"]) for r in mine)
        first = mine[0]
        out.setdefault(name, []).append(
            WidthRun(
                dataset=name,
                m=m,
                eta=float(first["eta"]),
                n=int(first["n"]),
                d=int(first["d"]),
                steps=[s for s, _ in measured],
                loss=[v for _, v in measured],
                lambda_min=_finite((int(r["step"]), r["lambda_min"]) for r in mine),
                W_norm=_finite((int(r["step"]), r["W_norm"]) for r in mine),
                status=str(mine[-1]["status"]),
                condition1=_condition1(first),
                records=mine,
            )
        )
    return {name: sorted(runs, key=lambda r: r.m) for name, runs in out.items()}


def statements(config: Fig1Config, rows: list[Row]) -> list[Statement]:
    """The statements of every data set of ``config`` (:func:`dataset_statements`)."""
    runs = by_dataset(rows)
    return [
        s
        for name in config.datasets
        for s in dataset_statements(name, runs.get(name, []), config.steps, config.widths)
    ]


def dataset_statements(
    name: str, runs: Sequence[WidthRun], steps: int, configured: Sequence[int]
) -> list[Statement]:
    """The statements of the module docstring for the width runs of data set ``name``
    (``configured``: the widths of the config, ``steps``: the GD steps of each)."""
    prefix = f"{name}: "
    ms = [r.m for r in runs]
    conds = [r.condition1 for r in runs]
    etas = [r.eta for r in runs]
    hypotheses = [
        *condition1_hypotheses(prefix, ms, conds),
        learning_rate_hypothesis(prefix, ms, conds, etas),
    ]
    margins = [r.margins() for r in runs]
    n = runs[0].n if runs else 0
    unreachable = [eq9_unreachable(prefix, ms, conds, n)] if runs else []
    return [
        *observations(prefix, runs),
        completed(prefix, runs, steps, configured),
        *hypotheses,
        *unreachable,
        *theorem1_statements(prefix, ms, conds, etas, margins, hypotheses),
        *pl_statements(prefix, ms, [r.pl() for r in runs]),
    ]


def observations(prefix: str, runs: Sequence[WidthRun]) -> list[Statement]:
    """Figure 1 (Section 5): faster and lower with m, ‖W(τ)‖₂ < 1 throughout training."""
    budget = min((r.steps[-1] for r in runs if r.steps), default=0)
    if len(runs) < 2 or budget < 1 or any(not r.steps for r in runs):
        rates: list[float | None] = [None] * len(runs)
        final: list[float | None] = [None] * len(runs)
    else:
        rates = [_rate(r, budget) for r in runs]
        final = [r.loss[r.steps.index(budget)] if budget in r.steps else None for r in runs]
    gap = min_step_gap(rates) if all(is_measured(v) for v in rates) else None
    drop = min_step_gap([-v for v in final]) if all(is_measured(v) for v in final) else None
    w_max = [max((v for s, v in r.W_norm if s >= 1), default=None) for r in runs]
    stops = "; ".join(r.stop() for r in runs if r.stop())
    where = f" ({widths([r.m for r in runs])})"
    section = "Section 5, Figure 1"
    return [
        LING.observation(
            section,
            name=f"{prefix}convergence is faster for larger m",
            quote="the convergence speed becomes faster as m increases",
            value=gap,
            relation=">",
            threshold=0.0,
            measured=f"speed −d ln Φ/dτ = {numbers(rates)}{where}",
            expected=f"increases with m (least-squares slope of ln Φ(τ), τ ≤ {budget})",
            detail="needs two widths and a step τ ≥ 1 reached by every width",
        ),
        LING.observation(
            section,
            name=f"{prefix}the final training loss is smaller for larger m",
            quote="and the final training loss becomes smaller",
            value=drop,
            relation=">",
            threshold=0.0,
            measured=f"Φ({budget}) = {numbers(final)}{where}",
            expected=f"decreases with m at step {budget}, the last step every width reached",
            detail="needs two widths and a step τ ≥ 1 reached by every width",
        ),
        LING.observation(
            section,
            name=f"{prefix}‖W(τ)‖₂ < 1 throughout training",
            quote="The second experiment verifies that ‖W(τ)‖₂ is smaller than 1 "
            "throughout the training",
            value=worst(w_max, "<", 1.0),
            relation="<",
            threshold=1.0,
            measured=f"max over τ ≥ 1 of ‖W(τ)‖₂ = {numbers(w_max)}{where}"
            + (f"; {stops}" if stops else ""),
            expected="< 1 at every step τ ≥ 1 (Lanczos every spectral_every steps and wherever "
            "the trainer's Weyl bound reaches 1)",
        ),
    ]


def _rate(run: WidthRun, budget: int) -> float | None:
    pairs = [
        (t, math.log(v)) for t, v in zip(run.steps, run.loss, strict=True) if t <= budget and v > 0
    ]
    if len(pairs) < 2:
        return None
    return -linear_fit([t for t, _ in pairs], [v for _, v in pairs])[0]


def completed(prefix: str, runs: Sequence[WidthRun], steps: int, ms: Sequence[int]) -> Statement:
    """Ours: every width of ``ms`` evaluated all ``steps`` GD steps without a stop."""
    done = {r.m: r.ok_steps / steps for r in runs}
    fractions = [done.get(m, 0.0) for m in ms]
    stops = [r.stop() for r in runs if r.stop()]
    stops += [f"no rows for m = {m}" for m in ms if m not in done]
    return ours(
        f"{prefix}GD ran all {steps} steps at every width",
        value=min(fractions, default=0.0),
        relation=">=",
        threshold=1.0,
        measured="; ".join(stops) if stops else f"{widths(ms)}: all ran {steps} steps",
        expected="no stop (‖W‖₂ ≥ 1, a failed solve, a non-finite loss) at any width",
        detail=f"steps run / steps: {numbers(fractions)}",
    )


# --- figures -------------------------------------------------------------------------------

Panel = Callable[["Axes", WidthRun, str], None]


def _loss(ax: Axes, run: WidthRun, color: str) -> None:
    ax.semilogy(run.steps, run.loss, color=color, label=f"m = {run.m}")
    if run.condition1 is not None and run.condition1.holds and run.lambda_0 > 0:
        ax.semilogy(
            run.steps,
            run.theorem1_bound(),
            color=color,
            linestyle="--",
            linewidth=1.0,
            label=f"Thm 1 (iii) bound, m = {run.m}",
        )


def _w_gap(ax: Axes, run: WidthRun, color: str) -> None:
    steps = [s for s, v in run.W_norm if v < 1]
    gaps = [1.0 - v for _, v in run.W_norm if v < 1]
    ax.semilogy(steps, gaps, "o-", markersize=2.5, color=color, label=f"m = {run.m}")


def _lambda_ratio(ax: Axes, run: WidthRun, color: str) -> None:
    if run.lambda_0 > 0:
        steps, values = zip(*run.lambda_min, strict=True)
        ax.plot(steps, [v / run.lambda_0 for v in values], color=color, label=f"m = {run.m}")


def _setting(runs: list[WidthRun]) -> str:
    run = runs[0]
    return f"{run.dataset}: n = {run.n}, d = {run.d}, η = {run.eta:.3g}"


def _figure(
    datasets: dict[str, list[WidthRun]],
    panel: Panel,
    title: str,
    ylabel: str,
    reference: tuple[float, str] | None,
    directory: Path,
    name: str,
) -> list[Path]:
    import matplotlib.pyplot as plt  # imported here: spawned workers never plot

    from deqlab.report import add_reference_line, figure_style, save_figure, sequential_colors

    with figure_style():
        fig, axes = plt.subplots(
            1, len(datasets), figsize=(4.2 * len(datasets) + 1.6, 3.6), squeeze=False
        )
        for ax, runs in zip(axes[0], datasets.values(), strict=True):
            for run, color in zip(runs, sequential_colors(len(runs)), strict=True):
                panel(ax, run, color)
            if reference is not None:
                add_reference_line(ax, *reference)
            ax.set_title(_setting(runs), fontsize=9.5)
            ax.set_xlabel(r"GD step $\tau$")
            ax.set_ylabel(ylabel)
        handles, labels = axes[0, -1].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right center")
        fig.suptitle(title)
        return save_figure(fig, directory, name)


def plot(config: Fig1Config, rows: list[Row], directory: Path) -> list[Path]:
    """Write the three figures (module docstring); return their PNG and PDF paths."""
    datasets = by_dataset(rows)
    sigma_w2 = config.sigma_w2
    setting = rf"full-batch GD, $\sigma_w^2$ = {sigma_w2:g}"
    fits = [
        r.m
        for runs in datasets.values()
        for r in runs
        if r.condition1 is not None and r.condition1.holds
    ]
    note = "" if fits else "\n(Condition 1 holds for no width: no Theorem 1 (iii) bound drawn)"
    return [
        *_figure(
            datasets,
            _loss,
            f"Training loss, {setting}{note}",
            r"loss $\Phi(\tau)$",
            None,
            directory,
            "loss",
        ),
        *_figure(
            datasets,
            _w_gap,
            rf"Distance of $\|W(\tau)\|_2$ from 1, {setting}",
            r"$1 - \|W(\tau)\|_2$",
            None,
            directory,
            "w_norm",
        ),
        *_figure(
            datasets,
            _lambda_ratio,
            rf"Least Gram eigenvalue, {setting}",
            r"$\lambda_\tau/\lambda_0$",
            (0.5, "1/2 (Theorem 1 (ii))"),
            directory,
            "lambda_ratio",
        ),
    ]
