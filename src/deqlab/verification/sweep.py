"""A width sweep of the ReLU DEQ (``deqlab verify --width 200,400,800``): K and λ* (with its
certified bracket) once,
then at each width a network drawn from Assumption 1, λ_0 against Theorem 2's mλ*/2 and the
margins of Condition 1's Eqs. (7)–(9) at its best δ; where each hypothesis starts to hold
in the sweep (if it does).

Past memory (``inputs.sample``, :mod:`deqlab.verification.subsample`) the sweep is answered
from the subsample S: λ* ∈ [0, its upper bound on S] (Cauchy interlacing), and at each width
— below n, or verify refuses — λ_0 = λ_min(Z(0)ᵀZ(0)) = 0 exactly (rank ≤ m < n), so every
margin of Condition 1 is 0 exactly, as the full computation would find: no hypothesis
holds at any width of the sweep, certified.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deqlab._format import number
from deqlab.verification import subsample
from deqlab.verification.answers import bracket_text
from deqlab.verification.checks import ReLUDEQCheck, check_width
from deqlab.verification.inputs import Inputs
from deqlab.verification.progress import Progress, silent
from deqlab.verification.relu_deq import KERNEL_BUFFERS, initialize, kernels

#: The columns of a sweep row whose value ≥ 1 means the hypothesis holds.
MARGINS = {
    "theorem2": "λ_0/(mλ*/2) (Theorem 2)",
    "eq7": "Eq. (7) lhs/rhs",
    "eq8": "Eq. (8) lhs/rhs",
    "eq9": "Eq. (9) lhs/rhs",
}


@dataclass(frozen=True, eq=False)
class Sweep:
    """The rows (one per width, in the order given) and the inputs they were measured on."""

    inputs: Inputs
    sigma_w2: float
    lambda_star: float
    rows: list[dict]
    lambda_star_bounds: list[float] | None = None

    def holds_from(self, key: str) -> int | None:
        """The first width of the sweep from which ``key``'s margin is ≥ 1 at every width."""
        ordered = sorted(self.rows, key=lambda r: r["width"])
        first = None
        for row in ordered:
            value = row[key]
            first = (first or row["width"]) if value is not None and value >= 1 else None
        return first

    def as_dict(self) -> dict:
        return {
            "data": self.inputs.summary(),
            "sigma_w2": self.sigma_w2,
            "lambda_star": self.lambda_star,
            "lambda_star_bounds": self.lambda_star_bounds,
            "rows": self.rows,
            "holds_from": {k: self.holds_from(k) for k in MARGINS},
            **self._past_memory(),
        }

    def _past_memory(self) -> dict:
        """``subsample`` and how each number is read (nothing where the data fit)."""
        sample = self.inputs.sample
        if sample is None:
            return {}
        return {
            "subsample": subsample.numbers(sample, KERNEL_BUFFERS)["subsample"],
            "one_sided": {
                "lambda_star": subsample.DIRECTIONS["lambda_star"],
                "lambda0": "exact: 0, rank(Z(0)ᵀZ(0)) ≤ m < n",
                "margins": "exact: 0, as λ_0 = 0",
                "theorem2": "0 where λ* > 0 (λ_0 = 0), which a subsample cannot decide",
            },
        }

    def lines(self) -> list[str]:
        """The table and where each hypothesis starts to hold, as printed."""
        data = self.inputs
        past = self._past_memory()
        out = [
            f"{data.name}: n = {data.n}, d = {data.d}{data.preprocessing}; {data.layout}; "
            f"labels: {data.labels}",
            *([] if not past else [_beyond_memory(past["subsample"])]),
            f"width sweep, K computed once: "
            f"{bracket_text('λ*', self.lambda_star_bounds, self.lambda_star)} (certified), "
            f"σ_w² = {self.sigma_w2:g}",
            f"{'m':>8} {'λ_0':>11} " + " ".join(f"{v:>24}" for v in MARGINS.values()),
        ]
        for r in self.rows:
            out.append(
                f"{r['width']:>8} {number(r['lambda0'], 4):>11} "
                + " ".join(f"{number(r[k], 4):>24}" for k in MARGINS)
            )
        for key, label in MARGINS.items():
            m = self.holds_from(key)
            out.append(
                f"{label}: ≥ 1 from m = {m} on"
                if m
                else f"{label}: below 1 at every width of the sweep"
            )
        return out

    def draw(self, out: Path) -> Path:
        """The margins and λ_0/(mλ*/2) against m (log axes), the line at 1, and a marker
        where each starts to hold; ``out/width_sweep.png`` (and .pdf)."""
        import matplotlib.pyplot as plt

        from deqlab.report.figures import add_reference_line, figure_style, save_figure

        rows = sorted(self.rows, key=lambda r: r["width"])
        widths = np.array([r["width"] for r in rows], dtype=float)
        with figure_style():
            fig, ax = plt.subplots(figsize=(6.4, 4.6))
            for key, label in MARGINS.items():
                values = np.array([np.nan if r[key] is None else r[key] for r in rows])
                (line,) = ax.loglog(widths, np.where(values > 0, values, np.nan), "o-", label=label)
                start = self.holds_from(key)
                if start:
                    ax.axvline(start, color=line.get_color(), ls=":", lw=1)
            add_reference_line(ax, 1.0, "1: the hypothesis holds above")
            ax.set(
                xlabel="width m",
                ylabel="margin",
                title=f"Width sweep: {self.inputs.name}, n = {self.inputs.n}, d = "
                f"{self.inputs.d}, σ_w² = {self.sigma_w2:g}",
            )
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=8)
            out.mkdir(parents=True, exist_ok=True)
            save_figure(fig, out, "width_sweep")
        return out / "width_sweep.png"


def _beyond_memory(sample: dict) -> str:
    """The line a sweep past memory opens with (after what was read)."""
    return (
        f"beyond memory: {sample['why']}; the sweep comes from the subsample S = "
        f"{sample['size']:,} of the {sample['n']:,} points (seed {sample['seed']}): λ* from "
        "above (Cauchy interlacing), and at every width m < n λ_0 = 0 exactly (rank), so "
        "every margin is 0 exactly"
    )


def sweep(
    inputs: Inputs,
    check: ReLUDEQCheck,
    widths: list[int],
    *,
    seed: int = 0,
    device: str = "cpu",
    progress: Progress = silent,
) -> Sweep:
    """The rows of the module docstring at each of ``widths`` on the data ``inputs``
    (:func:`deqlab.verification.inputs.prepare` read them, with the subsample S past memory;
    σ_w² from ``check``; K on ``device``)."""
    widths = [check_width(w) for w in widths]
    known = kernels(inputs, check.sigma_w2, progress, device=device)
    rows = []
    for i, width in enumerate(widths):
        progress(f"width {width} ({i + 1} of {len(widths)})", i, len(widths))
        init = initialize(inputs, width=width, sigma_w2=check.sigma_w2, seed=seed, known=known)
        cond = init.cond
        pred = init.predicted_lambda0
        rows.append(
            {
                "width": width,
                "lambda0": init.lambda0,
                "theorem2": None if cond is None or pred <= 0 else init.lambda0 / pred,
                **{
                    key: None if cond is None else getattr(cond, key).margin
                    for key in ("eq7", "eq8", "eq9")
                },
            }
        )
    bounds = known.K.bracket
    return Sweep(inputs, check.sigma_w2, known.K.value, rows, [bounds.lower, bounds.upper])
