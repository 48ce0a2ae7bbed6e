"""The thesis' observations on loss landscapes (Hieu 2022, Section 3.1 / Figure 3.1 = 4.5 and
Section 4.2.1 / Figure 4.4), as functions of filter-normalised 2-D loss surfaces
(:class:`deqlab.landscape.LossSurface`, centred at the trained θ*).

- Figure 4.4: the area of the small-loss neighbourhood {L ≤ L(θ*) + δ} grows strictly with
  the number of repetitions of the weight-tied networks, and the DEQ's is strictly larger
  than every weight-tied network's;
- Figure 3.1: the MDEQ's surface has one local minimum, and it is flat (its small-loss set
  covers a share of the grid; the share is ours: the thesis reads a plot).

Each observation is NOT MEASURED, with the reason (``why``, from the adapter: the models
are not trained, a surface is saturated or a truncated solver's), where the surfaces
cannot tell.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch.nn import functional as F

from deqlab.landscape import LossSurface
from deqlab.papers.hieu2022 import HIEU
from deqlab.statements import (
    DEQLAB,
    Kind,
    Run,
    Source,
    Statement,
    claim,
    min_step_gap,
    not_measured,
    number,
    ours,
    worst,
)

_WORDS = (
    "From the plots, we can see that the small-loss neighborhood around the minimizer is "
    "expanded as we increase the number of repetitions of the f function."
)
EXPANDS = HIEU.source("Section 4.2.1, Figure 4.4", _WORDS)
DEQ_LARGEST = HIEU.source(
    "Section 4.2.1, Figure 4.4", f"{_WORDS} This suggests the superior of training DEQ models."
)
_MDEQ_WORDS = (
    "As in Fig 3.1 which is the visualization of loss landscape of MDEQ model, we observe "
    "that the loss landscape has only one minima and this minima is flat."
)
ONE_MINIMUM = HIEU.source("Section 3.1, Figure 3.1 (= Figure 4.5)", _MDEQ_WORDS)
FLAT = HIEU.source("Section 3.1, Figure 3.1 (= Figure 4.5)", _MDEQ_WORDS)


def level(surface: LossSurface, delta: float) -> float:
    """``L(θ*) + delta``, θ* the grid centre."""
    return float(surface.losses[len(surface.alphas) // 2, len(surface.betas) // 2]) + delta


def flat_areas(surfaces: Mapping[str, LossSurface], delta: float) -> dict[str, float]:
    """Area of ``{L ≤ L(θ*) + delta}`` per model."""
    return {m: s.flat_area(level(s, delta)) for m, s in surfaces.items()}


def saturated(surfaces: Mapping[str, LossSurface], delta: float) -> str:
    """Why the areas cannot be compared: the models whose set ``{L ≤ L(θ*) + delta}`` is
    the whole grid or only its centre point (``""`` when none is)."""
    found = []
    for model, s in surfaces.items():
        inside = int((s.losses <= level(s, delta)).sum())
        if inside == s.losses.numel():
            found.append(f"{model}: the whole grid (grid too small or flat_delta too loose)")
        elif inside <= 1:
            found.append(f"{model}: only the centre (grid too coarse or flat_delta too tight)")
    return "; ".join(f"saturated at {f}" for f in found)


def local_minima(surface: LossSurface) -> torch.Tensor:
    """Mask of the grid points known to be local minima: finite and no higher than any of
    their (up to 8) neighbours, all finite (beside a non-finite point, which may be lower, a
    point is not known to be one; a non-finite point is not known either)."""
    losses = torch.where(torch.isfinite(surface.losses), surface.losses, torch.nan)
    padded = F.pad(losses[None, None], (1, 1, 1, 1), value=float("inf"))[0, 0]
    rows, columns = losses.shape
    mask = torch.ones_like(losses, dtype=torch.bool)
    for di in (0, 1, 2):
        for dj in (0, 1, 2):
            if (di, dj) != (1, 1):
                mask &= losses <= padded[di : di + rows, dj : dj + columns]  # False beside NaN
    return mask


def flat_fraction(surface: LossSurface, delta: float) -> float:
    """The largest fraction of grid points with ``Φ ≤ Φ(0, 0) + delta`` whatever the
    non-finite points are (they count as inside; 1 when the centre is not finite): exact on
    a finite surface."""
    bound = level(surface, delta)
    if not math.isfinite(bound):
        return 1.0
    losses = surface.losses
    return float(((losses <= bound) | ~torch.isfinite(losses)).double().mean())


def _complete(surface: LossSurface) -> bool:
    return bool(torch.isfinite(surface.losses).all())


def _unknown(surface: LossSurface) -> str:
    """``""`` on a finite surface, else how many grid points are not finite."""
    if _complete(surface):
        return ""
    return f" ({int((~torch.isfinite(surface.losses)).sum())} grid points not finite)"


def _unobserved(source: Source, name: str, expected: str, why: str) -> Statement:
    """The observation of the thesis at ``source``, NOT MEASURED because ``why``."""
    return not_measured(name, Kind.OBSERVATION, source, expected=expected, why=why)


@claim
def neighbourhood_grows(
    areas: Mapping[str, float], tied: Sequence[str], why: str, *, setting: str
) -> Statement:
    """Figure 4.4: the small-loss area grows strictly over the weight-tied nets ``tied``
    (in order of repetitions; decided by :func:`min_step_gap`)."""
    name = "the small-loss neighbourhood grows with the number of repetitions"
    expected = f"strictly increasing over {', '.join(tied)}"
    if why:
        return _unobserved(EXPANDS, name, expected, why)
    return HIEU.observation(
        EXPANDS.location,
        quote=EXPANDS.quote,
        name=name,
        value=min_step_gap([areas.get(m) for m in tied]),
        relation=">",
        threshold=0.0,
        measured=", ".join(f"{m}: {number(a)}" for m, a in areas.items()),
        expected=expected,
        detail=setting,
    )


@claim
def deq_largest(
    areas: Mapping[str, float], tied: Sequence[str], why: str, *, setting: str
) -> Statement:
    """Figure 4.4: the DEQ's small-loss area is larger than every weight-tied net's: the
    smallest difference (:func:`worst`) must be > 0."""
    name = "the DEQ's small-loss neighbourhood is larger than every weight-tied net's"
    expected = f"deq > {', '.join(tied)}"
    if why:
        return _unobserved(DEQ_LARGEST, name, expected, why)
    deq = areas.get("deq")
    gaps = [None if deq is None or areas.get(m) is None else deq - areas[m] for m in tied]
    return HIEU.observation(
        DEQ_LARGEST.location,
        quote=DEQ_LARGEST.quote,
        name=name,
        value=worst(gaps, ">", 0.0),
        relation=">",
        threshold=0.0,
        measured=", ".join(f"{m}: {number(a)}" for m, a in areas.items()),
        expected=expected,
        detail=setting,
    )


@claim
def one_minimum(surface: LossSurface | None, why: str, *, setting: str) -> Statement:
    """Figure 3.1: at most one local minimum on the grid."""
    name, expected = (
        "the loss landscape has only one minimum",
        "at most 1 local minimum on the grid",
    )
    if surface is None or why:
        return _unobserved(ONE_MINIMUM, name, expected, why or "no surface rows")
    minima = int(local_minima(surface).sum())
    complete = _complete(surface)  # else: the minima known, a violation if they exceed 1
    return HIEU.observation(
        ONE_MINIMUM.location,
        quote=ONE_MINIMUM.quote,
        name=name,
        value=minima if complete else worst([minima, None], "<=", 1),
        relation="<=",
        threshold=1,
        measured=f"{minima} local minima{' known' if not complete else ''}{_unknown(surface)}",
        expected=expected,
        detail=setting,
    )


@claim
def flat_minimum(
    surface: LossSurface | None, why: str, *, delta: float, share: float, setting: str
) -> Statement:
    """Figure 3.1: the minimum is flat: {Φ ≤ Φ(θ*) + ``delta``} covers ≥ ``share`` of the
    grid (ours: the thesis reads a plot)."""
    name = "the minimum is flat"
    expected = f"{{Φ ≤ Φ(θ*) + {delta:g}}} covers ≥ {share:g} of the grid (ours)"
    if surface is None or why:
        return _unobserved(FLAT, name, expected, why or "no surface rows")
    fraction = flat_fraction(surface, delta)
    complete = _complete(surface)  # else: the largest share, a violation if below ``share``
    return HIEU.observation(
        FLAT.location,
        quote=FLAT.quote,
        name=name,
        value=fraction if complete else worst([fraction, None], ">=", share),
        relation=">=",
        threshold=share,
        measured=f"{'at most ' if not complete else ''}{fraction:.3g} of the grid"
        f"{_unknown(surface)}",
        expected=expected,
        detail=setting,
    )


@claim
def equilibrium_solved(trace: Run, *, epoch: int, tol: float, solver: str) -> Statement:
    """Ours: the equilibrium at θ* is solved on the evaluation images after the last epoch
    ``epoch``: its relative residual (``trace``: the series ``residual`` by epoch, 0 at
    initialization) ≤ ``tol``; above it the surface is a truncated solver's."""
    name = "the equilibrium at θ* is solved on the evaluation images"
    expected = f"relative residual ≤ tol = {tol:g} (max over images)"
    if not trace.steps:
        return DEQLAB.not_measured(
            Kind.OURS, "", name=name, expected=expected, why="no residual row"
        )
    value = trace.at("residual", epoch)
    return ours(
        name,
        value=value,
        relation="<=",
        threshold=tol,
        measured=f"{value:.3g} after epoch {epoch} ({trace['residual'][0]:.3g} at init)",
        expected=expected,
        detail=f"{solver} (Bai et al. stop Broyden after F_THRES = 18–30 steps without a "
        "tolerance); above tol the surface is the truncated solver's, not the equilibrium's",
    )
