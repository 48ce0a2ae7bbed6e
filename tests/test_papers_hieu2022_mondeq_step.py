"""One GD step of a monotone DEQ against Lemmas 3.3.6–3.3.10 and Proposition 3 (thesis)."""

import math

import pytest
import torch

from deqlab.models.mondeq import MonDEQ
from deqlab.papers.hieu2022.mondeq import MonDEQConstants, c11
from deqlab.papers.hieu2022.mondeq_step import (
    c12,
    lemma_3_3_6,
    lemma_3_3_7,
    lemma_3_3_8,
    lemma_3_3_9,
    lemma_3_3_10,
    proposition_3,
)
from deqlab.solvers.splitting import PeacemanRachford
from deqlab.train.mondeq_gd import MonDEQGD

TIGHT = PeacemanRachford(tol=1e-12, max_iter=5000)


def _constants():
    """λ̄_A = 2, λ̄_B = 1, λ̄_U = 3, λ̄_u = 0.5; m = 0.5, λ₀ = 2, ‖X‖_F = 1."""
    norms = dict.fromkeys("ABUu", 0.0)
    bars = {"A": 2.0, "B": 1.0, "U": 3.0, "u": 0.5}
    return MonDEQConstants(0.5, 2.0, 1.0, 0.5, norms, dict(bars), bars)


def test_the_constants_and_the_bounds_of_lemmas_3_3_7_to_3_3_10_read_as_printed():
    c = _constants()
    assert c11(c) == pytest.approx(0.25 + 4 * 1.5**2 + 4 * 3.0**2 + 9)  # λ̄_UuA = 3
    assert c12(c) == pytest.approx(9 / 4)
    eta, loss = 0.01, 2.0  # ‖r‖ = 2
    rows = {
        r["name"]: r["rhs"]
        for r in lemma_3_3_7(c, eta=eta, loss=loss, steps=dict.fromkeys("UuABW", 0.0))
    }
    scale = eta * 2
    assert rows["Lemma 3.3.7 (U)"] == pytest.approx(scale * 0.5 / 0.5)
    assert rows["Lemma 3.3.7 (u)"] == pytest.approx(scale * 3 / 0.5)
    assert rows["Lemma 3.3.7 (A)"] == pytest.approx(scale * 2 * 3 / 0.25)
    assert rows["Lemma 3.3.7 (B)"] == pytest.approx(scale * 2 * 1.5 / 0.25)
    assert rows["Lemma 3.3.7 (W)"] == pytest.approx(
        scale * 4 * 1.5 * (4 + eta * 4 * 4 / 16 + 1) / 0.25
    )
    i1 = lemma_3_3_8(c, eta=eta, loss=loss, i1=1.0)
    assert i1["rhs"] == pytest.approx(loss * (eta * c11(c) + eta**2 * 4 * c12(c)) ** 2)
    i2 = lemma_3_3_9(c, eta=eta, loss=loss, i2=0.0)
    assert i2["rhs"] == pytest.approx(2 * loss * (eta * (c11(c) - 9) + eta**2 * 4 * c12(c)))
    i3 = lemma_3_3_10(c, eta=eta, loss=loss, i3=-1.0)
    assert i3["rhs"] == pytest.approx(-eta * 4 * loss / 2) and i3["holds"]


@pytest.mark.parametrize("seed", range(3))
def test_lemma_3_3_6_bounds_the_change_of_w_and_is_attained_by_an_antisymmetric_step(seed):
    g = torch.Generator().manual_seed(seed)
    A, dA, dB = (torch.randn(6, 6, generator=g, dtype=torch.float64) for _ in range(3))

    def W(A, B):
        return 0.9 * torch.eye(6, dtype=A.dtype) - A.T @ A + B - B.T

    B = torch.randn(6, 6, generator=g, dtype=torch.float64)
    row = lemma_3_3_6(A, dA, dB, W(A + dA, B + dB) - W(A, B))
    assert row["holds"] and row["lhs"] < row["rhs"]
    skew = dB - dB.T  # Δ_A = 0, Δ_B antisymmetric: ‖Δ_B − Δ_Bᵀ‖₂ = 2‖Δ_B‖₂
    tight = lemma_3_3_6(A, torch.zeros_like(A), skew, W(A, B + skew) - W(A, B))
    assert tight["lhs"] == pytest.approx(tight["rhs"], rel=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_proposition_3_bounds_the_lipschitz_constant_of_the_forward_backward_operator(seed):
    torch.manual_seed(seed)
    model = MonDEQ(3, 8, m=0.3, sigma_A=0.8, sigma_B=0.8, dtype=torch.float64)
    with torch.no_grad():
        W = model.weight()
    for alpha in (0.05, 0.3, 1.0):
        row = proposition_3(W, alpha=alpha, m=0.3)
        assert row["holds"], row
    I = torch.eye(8, dtype=torch.float64)
    row = proposition_3(0.7 * I, alpha=0.5, m=0.3)  # I − W = 0.3·I: equality
    assert row["lhs"] == pytest.approx(row["rhs"], rel=1e-12)


def test_the_three_terms_add_up_to_the_change_of_the_loss_along_a_gd_run():
    torch.manual_seed(0)
    model = MonDEQ(3, 10, m=0.5, solver=TIGHT, sigma_A=0.6, sigma_B=0.6, dtype=torch.float64)
    X, y = torch.randn(3, 5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    trainer = MonDEQGD(model, X, y, lr=0.05)
    yhats, params = [], []
    for _ in range(3):
        with torch.no_grad():
            yhats.append(model(X).clone())
            params.append({k: p.detach().clone() for k, p in model.named_parameters()})
        trainer.step()
    trainer.evaluate()
    records = trainer.records
    for k in range(3):
        a, b = records[k], records[k + 1]
        total = a["lemma3_3_8_lhs"] + a["lemma3_3_9_lhs"] + a["lemma3_3_10_lhs"]
        assert total == pytest.approx(b["loss"] - a["loss"], rel=1e-9, abs=1e-12)
        assert a["lemma3_3_10_rhs"] == pytest.approx(
            -0.05 * trainer.constants.lambda0**2 * a["loss"] / 2
        )
    with torch.no_grad():  # I₁ from the predictions, independently of the trainer
        assert records[0]["lemma3_3_8_lhs"] == pytest.approx(
            0.5 * float(((yhats[1] - yhats[0]) ** 2).sum()), rel=1e-9
        )
        step_u = float((params[1]["u"] - params[0]["u"]).norm())
    assert records[0]["lemma3_3_7_u_lhs"] == pytest.approx(step_u, rel=1e-12)
    assert "lemma3_3_8_lhs" not in records[3]  # θ(3) has no step after it
    assert all(math.isfinite(records[k]["lemma3_3_6_rhs"]) for k in range(3))


def test_the_step_lemmas_can_be_left_out():
    torch.manual_seed(0)
    model = MonDEQ(3, 10, m=0.5, solver=TIGHT, dtype=torch.float64)
    trainer = MonDEQGD(
        model,
        torch.randn(3, 5, dtype=torch.float64),
        torch.randn(5, dtype=torch.float64),
        lr=0.05,
        step_lemmas=False,
    )
    trainer.step()
    trainer.evaluate()
    assert not any(key.startswith("lemma") for key in trainer.records[0])
    with pytest.raises(TypeError, match="`step_lemmas` must be a bool; got str 'no'"):
        MonDEQGD(model, trainer.X, trainer.y, lr=0.05, step_lemmas="no")
