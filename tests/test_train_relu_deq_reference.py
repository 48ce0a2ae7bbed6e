"""The plain reference step (deqlab/train/relu_deq/reference.py), the oracle of the fast
path: one step is gradient descent with the Lemma 2 gradients."""

import pytest

from deqlab.papers.ling2023.theory import lemma2_gradients
from deqlab.train.relu_deq import reference_step
from helpers import relu_problem

LR = 2e-3


def test_the_reference_step_is_gradient_descent_with_lemma2_gradients():
    """One plain step from θ is θ − η ∇Φ(θ), ∇Φ by the Kronecker closed form of Lemma 2."""
    model, X, y = relu_problem(m=48, d=10, n=12, seed=0)
    W, U, a = (p.detach().clone() for p in (model.W, model.U, model.a))
    step = reference_step(W, U, a, X, y, LR, tol=1e-13)
    Z = model.equilibrium(X, tol=1e-13).Z
    for new, old, g in zip((step.W, step.U, step.a), (W, U, a), lemma2_gradients(model, X, y, Z),
                           strict=True):  # fmt: skip
        assert float(((old - new) / LR - g).norm() / g.norm()) < 1e-8
    assert step.loss == pytest.approx(0.5 * float((a @ Z - y).square().sum()), rel=1e-12)
