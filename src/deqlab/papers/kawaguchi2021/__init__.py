"""Kawaguchi (ICLR 2021), the deep equilibrium linear model: its record, theory and claims.

- :mod:`.theory` (and :mod:`.theory_large`, the same at sizes past dense algebra): D_t and
  λ_T (Theorem 1), the losses and their optima, κ, the bounds, the trust region (Theorem 2);
- :mod:`.hypotheses` and :mod:`.corollaries`: Corollaries 1–2 and Theorem 1 as statements.
"""

from deqlab.statements import Paper

KAWAGUCHI = Paper(
    "kawaguchi2021",
    "Kawaguchi 2021",
    "Kawaguchi, On the theory of implicit deep learning: global convergence with implicit "
    "layers (ICLR 2021)",
)
