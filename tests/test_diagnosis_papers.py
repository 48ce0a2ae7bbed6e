"""deqlab.diagnose on the papers' models against each paper's own theory toolkit, float64,
to 1e-10: Ling et al.'s λ_0 and H (Eq. (4)), the thesis's kernel K of Proposition 4 (Eq. 3.7),
Kawaguchi's D_t (Eq. (8)) and λ_T. The reading names the parameters the NTK is over."""

import pytest
import torch

from deqlab import DELM, MonDEQ, Picard
from deqlab.diagnosis import diagnose, paper_models
from deqlab.papers.hieu2022.mondeq_kernel import prediction_kernel
from deqlab.papers.kawaguchi2021.theory import dynamics_matrix, lambda_min_dynamics
from deqlab.solvers.splitting import PeacemanRachford
from deqlab.theory.ntk import pl_gram
from deqlab.theory.spectra import gram_lambda_min
from helpers import relu_problem

TIGHT = Picard(tol=1e-15, max_iter=5000)


def eigenvalues(matrix: torch.Tensor) -> torch.Tensor:
    return torch.linalg.eigvalsh(0.5 * (matrix + matrix.T))


def assert_spectrum(found, reference: torch.Tensor) -> None:
    got = torch.tensor(found.ntk.eigenvalues, dtype=torch.float64)
    torch.testing.assert_close(got, eigenvalues(reference), rtol=0, atol=1e-10)


def ling(m: int = 40, n: int = 12):
    model, X, y = relu_problem(m=m, d=5, n=n, seed=0)
    return model, X, y, paper_models.relu_deq(model, X)


def test_ling_lambda0_is_the_ntk_of_the_read_out():
    """Ling et al. 2023, Section 2.1: λ_0 = λ_min(G(0)), G = ZᵀZ, the NTK of a alone."""
    model, X, y, p = ling()
    found = diagnose(p.deq, p.X, y, head=p.head, params=["head.a"], solver=TIGHT)
    lambda0 = gram_lambda_min(model.equilibrium(X, tol=1e-14).Z)
    assert found.ntk.lambda_min == pytest.approx(lambda0, rel=1e-10, abs=1e-10)
    assert found.adjoint_converged is None
    assert "the NTK over head.a (P = 40) has λ_min" in found.reading()


def test_ling_pl_gram_is_the_ntk_of_all_parameters():
    """Training (W, U, a): Θ = H1 + H2 + H3 of Eq. (4), every eigenvalue to 1e-10; this is
    what diagnose reads by default, and it says so (the issue: 5.25 λ_0 read as if λ_0)."""
    model, X, y, p = ling()
    found = diagnose(p.deq, p.X, y, head=p.head, solver=TIGHT)
    assert_spectrum(found, pl_gram(model, X, tol=1e-14))
    assert found.ntk.n_params == 40 * 40 + 40 * 5 + 40 and found.adjoint_converged is True
    assert found.trained == p.params
    assert "the NTK over cell.W, cell.U, head.a (P = 1840)" in found.reading()
    lambda0 = gram_lambda_min(model.equilibrium(X, tol=1e-14).Z)
    assert found.ntk.lambda_min > 2 * lambda0  # over all parameters it is not λ_0


def test_an_approximate_adjoint_would_be_caught():
    """Dropping (I − J_fᵀ)⁻¹ (one adjoint step, u = g) moves λ_min(H) far beyond 1e-10."""
    model, X, y, p = ling()
    approx = diagnose(p.deq, p.X, y, head=p.head, solver=Picard(max_iter=1, throw=False))
    H = pl_gram(model, X, tol=1e-14)
    assert abs(approx.ntk.lambda_min - float(eigenvalues(H)[0])) > 1e-4
    assert approx.adjoint_converged is False
    assert "the NTK is approximate" in approx.reading()


def mondeq_case(params: list[str] | None = None):
    """A seeded monotone DEQ (width 8, 5 samples), diagnose over ``params`` (None: the
    paper's), and the thesis's kernel K at an equilibrium solved by its splitting to 1e-15."""
    gen = torch.Generator().manual_seed(1)
    model = MonDEQ(3, 8, m=1.0, sigma_A=0.5, sigma_B=0.5, generator=gen, dtype=torch.float64)
    X = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    p = paper_models.mondeq(model, X)
    found = diagnose(p.deq, p.X, head=p.head, params=params or p.params, solver=TIGHT)
    model.solver = PeacemanRachford(tol=1e-15, max_iter=20000)
    theta = {k: getattr(model, k).detach() for k in ("A", "B", "U", "u")}
    K = prediction_kernel(Z=model.equilibrium(X).detach(), X=X, m=model.m, **theta)["K"]
    return found, K


def test_monotone_deq_ntk_is_the_kernel_of_proposition_4():
    found, K = mondeq_case()
    assert_spectrum(found, K)
    assert "the NTK over cell.A, cell.B, cell.U, head.u (P = 160)" in found.reading()


def test_monotone_deq_kernel_would_catch_a_missing_block():
    """Must-not: leaving B out of the parameters moves the spectrum far beyond 1e-10."""
    found, K = mondeq_case(["cell.A", "cell.U", "head.u"])
    gap = torch.tensor(found.ntk.eigenvalues, dtype=torch.float64) - eigenvalues(K)
    assert float(gap.abs().max()) > 1e-3


def delm(m: int = 6, m_y: int = 2):
    gen = torch.Generator().manual_seed(0)
    return DELM(m, m_y, gamma=0.8, generator=gen, dtype=torch.float64)


def test_delm_ntk_on_identity_features_is_the_dynamics_matrix():
    """Kawaguchi 2021, Eq. (8): over (A, B) on φ(X) = I_m, Θ = D_t entry by entry; λ_T of
    Theorem 1 is inf_t λ_min(D_t), here at t = 0."""
    model = delm()
    p = paper_models.delm(model, torch.eye(6, dtype=torch.float64))
    found = diagnose(p.deq, p.X, head=p.head, params=p.params, solver=TIGHT)
    A, B = model.A.detach(), model.B.detach()
    assert_spectrum(found, dynamics_matrix(A, B, model.gamma))
    assert found.ntk.lambda_min == pytest.approx(
        float(lambda_min_dynamics(A, B, model.gamma)), abs=1e-10
    )
    assert "the NTK over cell.A, head.B (P = 48)" in found.reading()


def test_delm_ntk_on_other_features_is_the_dynamics_matrix_seen_through_them():
    """Θ = (Φᵀ ⊗ I) D_t (Φ ⊗ I) on features Φ (m, n): the prediction moves by Φᵀ-weighted
    moves of the linear predictor (the proof of Theorem 1, Appendix A.1.5)."""
    model = delm()
    Phi = torch.randn(6, 4, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    p = paper_models.delm(model, Phi)
    found = diagnose(p.deq, p.X, head=p.head, params=p.params, solver=TIGHT)
    K = torch.kron(Phi.T.contiguous(), torch.eye(2, dtype=torch.float64))  # (n m_y, m m_y)
    D = dynamics_matrix(model.A.detach(), model.B.detach(), model.gamma)
    assert_spectrum(found, K @ D @ K.T)
