"""Ling et al. (AISTATS 2023), the over-parameterized ReLU DEQ: its record, theory and claims.

- :mod:`.theory`: Condition 1 (Eqs. 7–9), Eq. (10), Theorem 1's and Lemma 2's quantities;
- :mod:`.init_theorems`: Lemma 1 and Theorems 2–5 at initialization;
- :mod:`.claims`: the paper's statements as functions of measurements.
"""

from deqlab.statements import Paper

LING = Paper(
    "ling2023",
    "Ling et al. 2023",
    "Ling, Xie, Wang, Zhang & Lin, Global convergence of over-parameterized deep "
    "equilibrium models (AISTATS 2023)",
)
