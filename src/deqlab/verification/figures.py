"""The figures of a verify page, in the report style (:mod:`deqlab.report.figures`).

Each function draws one PNG + PDF into ``directory`` and returns ``(stem, caption)``; each
figure states its setting (data, n, d, model constants) in a subtitle, keeps its legend
off the reference lines (below the axes) and reads log axes as plain numbers.

- ReLU DEQ: Condition 1's margins against the width under Theorem 2's scaling, and, with
  training, the loss against Theorem 1 (iii), λ_τ/λ_0, ‖W(τ)‖₂ and Eq. (5)'s ratio;
- monotone DEQ: the margins of Conditions 1–2 at the fit widths with their power laws,
  and, with training, the loss against Eq. (3.20);
- DELM: the corollary's bounds over time with both λ_T (and, trained, the loss, T_ε and
  the measured time to ε).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from deqlab.papers.ling2023.theory import EQUATIONS, condition1_margin, width_margin

Figure = tuple[str, str]  # (file stem, caption)


def _setting(verification) -> str:
    data, s = verification.data, verification.settings
    if verification.model == "mondeq":  # the thesis' symbols: N samples, n width, m monotonicity
        return (
            f"{data['name']}, N = {data['n']}, d = {data['d']}, n = {s['width']}, "
            f"m = {s['monotonicity']:g}, R = {s['radius']:g}, seed {s['seed']}"
        )
    base = f"{data['name']}, n = {data['n']}, d = {data['d']}, m = {s['width']}"
    extra = (
        f"σ_w² = {s['sigma_w2']:g}" if verification.model == "relu-deq" else f"γ = {s['gamma']:g}"
    )
    return f"{base}, {extra}, seed {s['seed']}"


def draw(verification, directory: Path) -> list[Figure]:
    """Every figure of ``verification`` (module docstring)."""
    drawers = {
        "relu-deq": [_condition1_width, _relu_training],
        "mondeq": [_mondeq_widths, _mondeq_training],
        "delm": [_delm_bounds],
    }[verification.model]
    found = [drawer(verification, directory) for drawer in drawers]
    return [f for f in found if f is not None]


def _legend_below(ax, ncol: int = 3) -> None:
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=ncol, fontsize=8)


def _condition1_width(v, directory: Path) -> Figure | None:
    import matplotlib.pyplot as plt

    from deqlab.report.figures import add_reference_line, figure_style, save_figure
    from deqlab.verification.relu_deq import SCALING

    init = v.initial
    scaled = init.scaled_constants()
    if scaled is None:
        return None
    m0 = init.width
    needed = v.numbers["required_width"]["condition1"]
    top = needed * 10 if math.isfinite(needed) else m0 * 1e12
    widths = np.logspace(0, math.log10(max(top, 100 * m0)), 200)
    with figure_style():
        fig, ax = plt.subplots(figsize=(6.4, 4.6))
        for key in EQUATIONS:
            ax.loglog(
                widths,
                [width_margin(scaled, m0, m, key) for m in widths],
                label=f"Eq. ({key[2:]}), δ free",
            )
        ax.loglog(
            widths,
            [condition1_margin(scaled, m0, m) for m in widths],
            "k-",
            lw=2.2,
            label="Condition 1 (one δ for all three)",
        )
        add_reference_line(ax, 1.0, "lhs/rhs = 1")
        ax.axvline(m0, color="0.5", ls=":", label=f"given width m = {m0}")
        ax.set(
            xlabel="width m",
            ylabel="largest lhs/rhs over δ",
            title=f"Condition 1 against the width\n{_setting(v)}",
        )
        _legend_below(ax)
        save_figure(fig, directory, "condition1_width")
    return "condition1_width", (
        "The margins lhs/rhs of Condition 1's Eqs. (7)–(9) of Ling et al. (2023), each "
        f"maximized over δ, against the width m under {SCALING}; the black curve needs one δ "
        "for all three, and Condition 1 holds where it is above the dashed line at 1."
    )


def _relu_training(v, directory: Path) -> Figure | None:
    import matplotlib.pyplot as plt

    from deqlab.report.figures import add_reference_line, figure_style, save_figure

    if v.training is None:
        return None
    rec = v.training["records"]
    steps = np.array([r["step"] for r in rec], dtype=float)
    col = {
        k: np.array([np.nan if r[k] is None else r[k] for r in rec], dtype=float)
        for k in ("loss", "lambda_min", "grad_norm", "W_norm")
    }
    lam0, eta = col["lambda_min"][0], v.training["eta"]
    with figure_style():
        fig, axes = plt.subplots(2, 2, figsize=(10, 7.6))
        ax = axes[0, 0]
        ax.semilogy(steps, col["loss"], label="Φ(τ)")
        ax.semilogy(
            steps,
            col["loss"][0] * (1 - eta * lam0 / 2) ** steps,
            "--",
            label="(1 − ηλ_0/2)^τ Φ(0), Theorem 1 (iii)",
        )
        ax.set(xlabel="step τ", ylabel="loss", title="Loss and its bound")
        ax = axes[0, 1]
        ax.plot(steps, col["lambda_min"] / lam0, label="λ_τ/λ_0")
        add_reference_line(ax, 0.5, "1/2, Theorem 1 (ii)")
        ax.set(xlabel="step τ", ylabel="λ_τ/λ_0", title="Least eigenvalue of G(τ)")
        ax = axes[1, 0]
        ax.plot(steps, col["W_norm"], label="‖W(τ)‖₂")
        add_reference_line(ax, 1.0, "1, Theorem 1 (i)")
        ax.set(xlabel="step τ", ylabel="‖W(τ)‖₂", title="Well-posedness")
        ax = axes[1, 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = col["grad_norm"] ** 2 / (2 * col["lambda_min"] * col["loss"])
        ax.semilogy(steps, ratio, label="‖∇Φ‖²/(2λ_τΦ)")
        add_reference_line(ax, 1.0, "1, Eq. (5)")
        ax.set(xlabel="step τ", ylabel="ratio", title="PL inequality, Eq. (5)")
        for ax in axes.flat:
            _legend_below(ax, 2)
        fig.suptitle(f"Gradient descent, η = {eta:.3g}: {_setting(v)}")
        save_figure(fig, directory, "training")
    return "training", (
        "Full-batch GD on the ReLU DEQ: the loss against Theorem 1 (iii)'s bound, λ_τ/λ_0 "
        "against 1/2 (Theorem 1 (ii)), ‖W(τ)‖₂ against 1 (Theorem 1 (i)) and the ratio of "
        "Eq. (5)'s two sides against 1, at every step."
    )


def _mondeq_widths(v, directory: Path) -> Figure | None:
    import matplotlib.pyplot as plt

    from deqlab.report.figures import add_reference_line, figure_style, save_figure

    init = v.initial
    fits = {k: f for k, f in init.fits.items() if f is not None}
    if not fits:
        return None
    widths = np.array(init.fit_widths, dtype=float)
    reach = [
        w["width"] for w in v.numbers["required_width"].values() if w and math.isfinite(w["width"])
    ]
    grid = np.logspace(math.log10(widths[0]), math.log10(max([*reach, widths[-1]]) * 3), 100)
    with figure_style():
        fig, ax = plt.subplots(figsize=(6.4, 4.6))
        for name, fit in fits.items():
            (line,) = ax.loglog(grid, np.exp(fit.intercept) * grid**fit.slope, "--", lw=1)
            measured = np.exp(fit.intercept) * widths**fit.slope
            ax.loglog(
                widths,
                measured,
                "o",
                color=line.get_color(),
                label=f"{name} (slope {fit.slope:.2f})",
            )
        add_reference_line(ax, 1.0, "lhs/rhs = 1")
        ax.set(
            xlabel="width n",
            ylabel="lhs/rhs",
            title=f"Conditions 1–2 against the width\n{_setting(v)}",
        )
        _legend_below(ax, 2)
        save_figure(fig, directory, "conditions_width")
    return "conditions_width", (
        "The margins lhs/rhs of the thesis' Conditions 1 (3.8–3.9) and 2 (3.16–3.18) at the "
        "fit widths (points: the fitted values there) and the power laws fitted through them "
        "(dashed), extended to where each reaches 1."
    )


def _mondeq_training(v, directory: Path) -> Figure | None:
    import matplotlib.pyplot as plt

    from deqlab.report.figures import figure_style, save_figure

    if v.training is None:
        return None
    rec = v.training["records"]
    steps = [r["step"] for r in rec]
    with figure_style():
        fig, ax = plt.subplots(figsize=(6.4, 4.6))
        ax.semilogy(steps, [r["loss"] for r in rec], label="L(θ(k))")
        ax.semilogy(
            steps, [r["loss_bound"] for r in rec], "--", label="(1 − ηλ_0²/4)^k L(θ(0)), Eq. (3.20)"
        )
        ax.set(
            xlabel="step k", ylabel="loss", title=f"GD, η = {v.training['eta']:.3g}\n{_setting(v)}"
        )
        _legend_below(ax, 2)
        save_figure(fig, directory, "training")
    return "training", (
        "Full-batch GD on the monotone DEQ: the loss against Theorem 3.3.5's bound "
        "(Eq. 3.20) at every step."
    )


def _delm_bounds(v, directory: Path) -> Figure:
    import matplotlib.pyplot as plt

    from deqlab.report.figures import figure_style, save_figure

    k = v.numbers
    gap0, eps = k["loss0"] - k["loss_star"], k["epsilon"]
    horizon = k["time_to_epsilon"]["guaranteed"]
    horizon = horizon if math.isfinite(horizon) and horizon > 0 else 1.0
    start = horizon * 1e-4
    if v.training is not None:
        rec = v.training["records"][1:]  # t > 0: a log axis
        times = [r["time"] for r in rec]
        gaps = [max(r["loss"] - k["loss_star"], 1e-300) for r in rec]
        start, horizon = min(start, times[0]), max(horizon, times[-1])
    t = np.logspace(math.log10(start), math.log10(horizon), 300)
    with figure_style():
        fig, ax = plt.subplots(figsize=(6.4, 4.6))
        for key, label in (
            ("rate_guaranteed", "λ_T = 1/(m(1+γ)²), guaranteed"),
            ("rate_at_init", "λ_T = λ_min(D_0)"),
        ):
            ax.loglog(t, gap0 * np.exp(-k[key] * t), "--", label=f"bound with {label}")
        bottom = eps / 10
        if v.training is not None:
            ax.loglog(times, gaps, label="L(A_t, B_t) − L*, GD")
            bottom = min(bottom, min(gaps) / 10)
            _mark_time_to_epsilon(ax, v.training)
        ax.axhline(eps, color="0.5", ls=":", label=f"ε = {eps:.3g}")
        ax.set_ylim(bottom, gap0 * 3)
        ax.set(
            xlabel="flow time T (GD: step × η)",
            ylabel="L − L*",
            title=f"{k['corollary']} ({k['loss']} loss)\n{_setting(v)}",
        )
        _legend_below(ax, 2)
        name = k["corollary"].lower().replace(" ", "")
        save_figure(fig, directory, name)
    return name, (
        f"{k['corollary']} of Kawaguchi (2021), {k['loss']} loss: the optimality gap L − L* "
        "is at most (L₀ − L*)e^{−2κλ_T T}, drawn with the guaranteed λ_T and with "
        "λ_min(D_0), against the flow time (GD, when trained: step × η); the dotted line is "
        f"ε, which the guaranteed bound reaches at {k['time_equation']}'s time T_ε (when "
        "trained: the vertical line, and the dot where GD first reached ε)."
    )


def _mark_time_to_epsilon(ax, training: dict) -> None:
    """T_ε (Eqs. (9)–(12)) as a vertical line; the first τη with L − L* ≤ ε as a dot."""
    times, eps = training["time_to_epsilon"], training["epsilon"]
    if math.isfinite(times["predicted"]) and times["predicted"] > 0:
        ax.axvline(
            times["predicted"],
            color="0.3",
            ls="-.",
            lw=1,
            label=f"T_ε = {times['predicted']:.3g} (predicted)",
        )
    if times["measured"]:  # None: not reached; 0: already within ε (no log-axis point)
        ax.plot(
            [times["measured"]],
            [eps],
            "o",
            color="C3",
            label=f"ε reached at T = {times['measured']:.3g}",
        )
