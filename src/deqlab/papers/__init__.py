"""The papers deqlab reproduces: one :class:`~deqlab.statements.Paper` record each.

A paper is named here and nowhere else: its key (also the folder of its experiments,
``deqlab/experiments/<key>/``), its short citation (in every statement's source) and its
full citation (in reports, ``deqlab list`` and ``deqlab verify``). Adding a paper is one
record here, listed in :data:`REPRODUCED`, plus its folder (docs/architecture.md).
"""

from __future__ import annotations

from deqlab.statements import DEQLAB, Paper

LING = Paper(
    "ling2023",
    "Ling et al. 2023",
    "Ling, Xie, Wang, Zhang & Lin, Global convergence of over-parameterized deep "
    "equilibrium models (AISTATS 2023)",
)
KAWAGUCHI = Paper(
    "kawaguchi2021",
    "Kawaguchi 2021",
    "Kawaguchi, On the theory of implicit deep learning: global convergence with implicit "
    "layers (ICLR 2021)",
)
HIEU = Paper(
    "hieu2022",
    "Hieu 2022 (thesis)",
    "Nguyen Ngoc Hieu, An analysis of applying neural tangent kernels for deep equilibrium "
    "models (thesis, VNU University of Engineering and Technology, 2022)",
)

#: The papers whose experiments live in ``deqlab/experiments/<key>/``, in the order
#: ``deqlab list`` shows them (the experiment registry imports each folder).
REPRODUCED: tuple[Paper, ...] = (LING, KAWAGUCHI, HIEU)

__all__ = ["DEQLAB", "HIEU", "KAWAGUCHI", "LING", "REPRODUCED", "Paper"]
