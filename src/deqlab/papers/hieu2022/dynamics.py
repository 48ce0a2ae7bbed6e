"""The thesis' observations on the forward dynamics of a convolutional DEQ (Hieu 2022,
Section 4.1), as functions of the statistics measured on its solver trajectories.

- Section 4.1.1, Figs. 4.1–4.2: with the small initialisation the iterates z^[i] are
  steadier after the first step than with N(0, 1) — the median over inputs of the mean
  relative residual (Eq. 4.2) over the solver steps i ≥ 1;
- Section 4.1.2, Fig. 4.3: the dynamics become more complex during training — more solver
  steps at the last snapshot than before training (NOT MEASURED when the solver already
  used all ``max_iter`` evaluations before training);
- Section 4.1.2, Fig. 4.3: after the first epoch the classes move to different regions —
  the between/within-class spread of the final PCA points grows from epoch 0;
- ours: the small initialisation needs fewer solver steps than N(0, 1), and its median
  final relative residual meets ``tol``.

The last two observations are about trained models: NOT MEASURED with ``not_trained``
(:func:`deqlab.papers.hieu2022.claims.untrained`) when the model did not learn; each
statement is NOT MEASURED with ``why`` when its trajectories were not recorded.
"""

from __future__ import annotations

from deqlab.papers.hieu2022 import HIEU
from deqlab.statements import DEQLAB, Kind, Source, Statement, claim, not_measured, number, ours

STEADY = HIEU.source(
    "Section 4.1.1, Figs. 4.1–4.2",
    "the sequence of z^[i] is more chaos in the normal initialization setting while in small "
    "initialization, z^[i] stay quite steady after the first step",
)
COMPLEX = HIEU.source(
    "Section 4.1.2, Fig. 4.3",
    "the dynamic of DEQ becomes more complex during training, which can be interpreted as the "
    "model becoming deeper and more complex",
)
CLASSES = HIEU.source(
    "Section 4.1.2, Fig. 4.3",
    "After the first epoch, one can see from Fig. 4.3 that the hidden states of DEQ "
    "corresponding to different classes are moved to a different region of the space",
)
LONGER = "training makes the forward dynamics longer (more solver steps)"
APART = "after the first epoch the classes move apart in the PCA plane"


def initialisation_names(small: float, large: float) -> tuple[str, str, str]:
    """The names of the three statements on the two initialisations."""
    return (
        f"z^[i] steadier after the first step with N(0, {small:g}) than N(0, {large:g})",
        f"N(0, {small:g}) init needs fewer solver steps than N(0, {large:g})",
        f"N(0, {small:g}) init: the median final relative residual meets tol",
    )


def _unobserved(source: Source, name: str, expected: str, why: str) -> Statement:
    """The observation of the thesis at ``source``, NOT MEASURED because ``why``."""
    return not_measured(name, Kind.OBSERVATION, source, expected=expected, why=why)


@claim
def steadier(
    chaos_small: float, chaos_large: float, *, small: float, large: float, why: str = ""
) -> Statement:
    """Figs. 4.1–4.2: the median mean residual over the steps i ≥ 1 with N(0, ``small``)
    over that with N(0, ``large``) is < 1 (NOT MEASURED because ``why``, if given)."""
    name = initialisation_names(small, large)[0]
    if why:
        return _unobserved(STEADY, name, "ratio < 1", why)
    ratio = chaos_small / chaos_large if chaos_large > 0 else None
    return HIEU.observation(
        STEADY.location,
        quote=STEADY.quote,
        name=name,
        value=ratio,
        relation="<",
        threshold=1.0,
        measured=f"median mean residual over steps i ≥ 1: {number(chaos_small, 3)} with "
        f"N(0, {small:g}), {number(chaos_large, 3)} with N(0, {large:g})",
        expected="ratio small/large < 1",
    )


@claim
def fewer_steps(
    steps_small: int,
    steps_large: int,
    *,
    small: float,
    large: float,
    max_iter: int,
    why: str = "",
) -> Statement:
    """Ours: the small initialisation needs fewer evaluations of f than N(0, ``large``)."""
    name = initialisation_names(small, large)[1]
    if why:
        return DEQLAB.not_measured(Kind.OURS, "", name=name, expected="fewer steps", why=why)
    return ours(
        name,
        value=steps_small,
        relation="<",
        threshold=steps_large,
        measured=f"{steps_small} vs {steps_large} evaluations of f",
        expected=f"fewer with N(0, {small:g}) (max_iter = {max_iter})",
    )


@claim
def final_residual(
    median: float, *, small: float, large: float, tol: float, why: str = ""
) -> Statement:
    """Ours: with the small initialisation the median final relative residual ≤ ``tol``."""
    name = initialisation_names(small, large)[2]
    if why:
        return DEQLAB.not_measured(Kind.OURS, "", name=name, expected=f"≤ {tol:g}", why=why)
    return ours(
        name,
        value=median,
        relation="<=",
        threshold=tol,
        measured=f"median final residual {number(median, 3)}",
        expected=f"≤ tol = {tol:g}",
    )


@claim
def longer(
    before: int, after: int, *, last: int, max_iter: int, not_trained: str = "", why: str = ""
) -> Statement:
    """Fig. 4.3: more evaluations of f at epoch ``last`` than before training."""
    expected = f"more evaluations of f after epoch {last} than before training"
    if why:
        return _unobserved(COMPLEX, LONGER, "more", why)
    if not_trained:
        return _unobserved(COMPLEX, LONGER, expected, not_trained)
    if before >= max_iter:
        why = f"the solver already used all max_iter = {max_iter} evaluations at epoch 0"
        return _unobserved(COMPLEX, LONGER, expected, why)
    return HIEU.observation(
        COMPLEX.location,
        quote=COMPLEX.quote,
        name=LONGER,
        value=after,
        relation=">",
        threshold=before,
        measured=f"epoch 0: {before}, epoch {last}: {after} evaluations of f",
        expected=expected,
    )


@claim
def apart(
    before: float, after: float, *, first: int, not_trained: str = "", why: str = ""
) -> Statement:
    """Fig. 4.3: the between/within-class spread of the last iterates is larger at epoch
    ``first`` than at epoch 0."""
    expected = f"between/within-class spread of the last iterates larger at epoch {first}"
    if why:
        return _unobserved(CLASSES, APART, "larger", why)
    if not_trained:
        return _unobserved(CLASSES, APART, expected, not_trained)
    return HIEU.observation(
        CLASSES.location,
        quote=CLASSES.quote,
        name=APART,
        value=after,
        relation=">",
        threshold=before,
        measured=f"between/within spread: epoch 0: {number(before, 3)}, epoch {first}: "
        f"{number(after, 3)}",
        expected=expected,
    )
