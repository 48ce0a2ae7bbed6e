"""Hieu (thesis, 2022), the monotone and convolutional DEQs: its record, theory and claims.

- :mod:`.mondeq` (with :mod:`.mondeq_kernel`, :mod:`.mondeq_lemmas`, :mod:`.mondeq_step`):
  the constants, Conditions 1–2, the bounds and the lemmas of Chapter 3;
- :mod:`.claims`, :mod:`.gd_proof`, :mod:`.flow` and :mod:`.conjecture`: its statements as
  functions of measurements (Theorem 3.3.5 and its proof; Theorem 3.3.1 on the gradient
  flow; Conjecture 1 under a stable step).
"""

from deqlab.statements import Paper

HIEU = Paper(
    "hieu2022",
    "Hieu 2022 (thesis)",
    "Nguyen Ngoc Hieu, An analysis of applying neural tangent kernels for deep equilibrium "
    "models (thesis, VNU University of Engineering and Technology, 2022)",
)
