"""Lemmas 3.3.2–3.3.4 of the thesis on a monotone DEQ's equilibrium
(deqlab.papers.hieu2022.mondeq_lemmas): both sides against independent computations, and Lemma
3.3.2's counterexamples."""

import math

import pytest
import torch

from deqlab.models.mondeq import MonDEQ
from deqlab.papers.hieu2022.mondeq_lemmas import (
    lemma_3_3_2,
    lemma_3_3_3,
    lemma_3_3_4,
    lemma_3_3_4_output,
    lemma_columns,
)
from test_papers_hieu2022_mondeq import TIGHT, setup


def _perturbed(model, scale, seed):
    torch.manual_seed(seed)
    other = MonDEQ(3, 12, m=model.m, solver=TIGHT)
    with torch.no_grad():
        for p, q in zip(model.parameters(), other.parameters(), strict=True):
            q.copy_(p + scale * torch.randn_like(p))
    return other


@pytest.mark.parametrize("seed", range(3))
def test_lemmas_3_3_3_and_3_3_4_on_random_instances(seed):
    model, X, _, Z = setup(seed=seed, scale=2.0)
    assert lemma_3_3_3(Z, X, model.U, model.m)["holds"]
    other = _perturbed(model, 0.3, 100 + seed)
    with torch.no_grad():
        Z2 = other.equilibrium(X)
        row = lemma_3_3_4(
            X, Z=(Z2, Z), W=(other.weight(), model.weight()), U=(other.U, model.U), m=model.m
        )
    assert row["holds"] and row["lhs"] > 0


@pytest.mark.parametrize("seed", range(3))
def test_lemma_3_3_4_output_bounds_the_change_of_the_predictions(seed):
    model, X, _, Z = setup(seed=seed, scale=2.0)
    other = _perturbed(model, 0.3, 100 + seed)
    with torch.no_grad():
        Z2 = other.equilibrium(X)
        W, U, u = (other.weight(), model.weight()), (other.U, model.U), (other.u, model.u)
        row = lemma_3_3_4_output(X, Z=(Z2, Z), W=W, U=U, u=u, m=model.m)
        assert row["lhs"] == pytest.approx(float((other(X) - model(X)).norm()), rel=1e-8)
    norm = lambda M: float(torch.linalg.matrix_norm(M, 2))  # noqa: E731
    rhs = float(X.norm()) * (
        norm(U[0] - U[1]) * float(u[0].norm()) / model.m
        + norm(W[0] - W[1]) * norm(U[1]) * float(u[0].norm()) / model.m**2
        + norm(U[1]) * float((u[0] - u[1]).norm()) / model.m
    )
    assert row["rhs"] == pytest.approx(rhs) and row["holds"]
    same = lemma_3_3_4_output(X, Z=(Z, Z), W=(W[1], W[1]), U=(U[1], U[1]), u=(u[1], u[1]), m=1)
    assert same["lhs"] == 0 and same["rhs"] == 0 and same["holds"]


def test_lemma_columns_at_a_step_against_the_start():
    model, X, _, Z = setup(seed=5, scale=2.0)
    other = _perturbed(model, 0.2, 7)
    initial = {k: p.detach() for k, p in model.named_parameters()}
    current = {k: p.detach() for k, p in other.named_parameters()}
    with torch.no_grad():
        Z2, W = other.equilibrium(X), (other.weight(), model.weight())
    columns = lemma_columns(X, m=model.m, current=current, initial=initial, W=W, Z=(Z2, Z))
    U, u = (current["U"], initial["U"]), (current["u"], initial["u"])
    rows = {
        "lemma3_3_2": lemma_3_3_2(W[0], current["u"], (Z2 > 0).double(), model.m),
        "lemma3_3_3": lemma_3_3_3(Z2, X, current["U"], model.m),
        "lemma3_3_4": lemma_3_3_4(X, Z=(Z2, Z), W=W, U=U, m=model.m),
        "lemma3_3_4_output": lemma_3_3_4_output(X, Z=(Z2, Z), W=W, U=U, u=u, m=model.m),
    }
    assert columns == {
        f"{key}_{side}": row[side] for key, row in rows.items() for side in ("lhs", "rhs")
    }


def test_lemma_3_3_2_holds_for_identity_mask_and_fails_for_some_masks():
    model, *_ = setup(m=0.3, scale=2.0, seed=3)
    W, u = model.weight().detach(), model.u.detach()
    full = lemma_3_3_2(W, u, torch.ones(12, 1), model.m)
    assert full["holds"]
    v = torch.linalg.solve(torch.eye(12) - W.T, u)  # independent: (I − Wᵀ)⁻¹u
    assert full["lhs"] == pytest.approx(float(v.norm()))
    # Counterexample to C.0.4: A = 0, B − Bᵀ = [[0, b], [−b, 0]], D = diag(1, 0), u = e₁ give
    # v = (I − WᵀD)⁻¹u = (1, b)/m, so ‖v‖ = √(1 + b²)/m > ‖u‖/m.
    m, b = 0.5, 1.0
    W = (1 - m) * torch.eye(2) + torch.tensor([[0.0, b], [-b, 0.0]])
    row = lemma_3_3_2(W, torch.tensor([1.0, 0.0]), torch.tensor([[1.0], [0.0]]), m)
    assert row["lhs"] == pytest.approx(math.sqrt(1 + b**2) / m) and row["rhs"] == 1 / m
    assert not row["holds"]


def test_lemma_3_3_2_holds_in_the_form_its_uses_need_for_every_mask():
    """Every use of Lemma 3.3.2 (Lemmas 3.2.3, 3.3.7; Proposition 4) has (uᵀ ⊗ I)Q⁻¹ followed
    by D: per sample ‖D(I − WᵀD)⁻¹u‖ ≤ ‖u‖/m, which monotonicity gives for every 0/1 mask
    (g = D(I − WᵀD)⁻¹u has gᵀ(I − Wᵀ)g = gᵀu). Random W = (1 − m)I − AᵀA + B − Bᵀ and masks,
    and the counterexample to the printed form, where it is attained: ‖Dv‖ = 2 = ‖u‖/m."""
    g = torch.Generator().manual_seed(0)
    worst = 0.0
    for _ in range(500):
        n = int(torch.randint(2, 7, (1,), generator=g))
        m = float(10 ** (torch.rand(1, generator=g) * 2 - 1.5))
        A, B = (torch.randn(n, n, generator=g, dtype=torch.float64) * 2 for _ in range(2))
        W = (1 - m) * torch.eye(n, dtype=torch.float64) - A.T @ A + B - B.T
        D = torch.diag((torch.rand(n, generator=g) < 0.5).double())
        u = torch.randn(n, generator=g, dtype=torch.float64)
        v = torch.linalg.solve(torch.eye(n, dtype=torch.float64) - W.T @ D, u)
        worst = max(worst, float((D @ v).norm() / (u.norm() / m)))
    assert 0.5 < worst <= 1 + 1e-9
    m, B = 0.5, torch.tensor([[0.0, 5.0], [0.0, 0.0]], dtype=torch.float64)
    W = (1 - m) * torch.eye(2, dtype=torch.float64) + B - B.T
    D = torch.diag(torch.tensor([1.0, 0.0], dtype=torch.float64))
    v = torch.linalg.solve(
        torch.eye(2, dtype=torch.float64) - W.T @ D, torch.tensor([1.0, 0.0]).double()
    )
    assert float(v.norm()) == pytest.approx(math.sqrt(104))  # the printed form: 10.2 > 2
    assert float((D @ v).norm()) == pytest.approx(2.0)  # with the trailing D: exactly ‖u‖/m


def test_lemma_3_3_2_fails_at_a_genuine_equilibrium():
    """A = 0, B = [[0, 5], [0, 0]], m = 0.5: at the equilibrium of c = (1, 0), z* = (2, 0)
    (D = diag(1, 0)), and ‖(I − WᵀD)⁻¹e₁‖ = √26/0.5 = 10.2 against ‖u‖/m = 2."""
    from deqlab.models.mondeq import monotone_fixed_point

    m, A, B = 0.5, torch.zeros(2, 2, dtype=torch.float64), torch.tensor([[0.0, 5.0], [0.0, 0.0]])
    W = (1 - m) * torch.eye(2, dtype=torch.float64) - A.T @ A + B - B.T
    c = torch.tensor([[1.0], [0.0]], dtype=torch.float64)
    z = monotone_fixed_point(W, c, m=m, solver=TIGHT)
    assert torch.allclose(z, torch.tensor([[2.0], [0.0]], dtype=torch.float64), atol=1e-10)
    assert torch.allclose(torch.relu(W @ z + c), z, atol=1e-10)  # a genuine fixed point
    row = lemma_3_3_2(W, torch.tensor([1.0, 0.0], dtype=torch.float64), (z > 0).double(), m)
    assert row["lhs"] == pytest.approx(math.sqrt(26) / m) and row["rhs"] == pytest.approx(2.0)
