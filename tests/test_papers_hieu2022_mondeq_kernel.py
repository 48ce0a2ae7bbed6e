"""Proposition 4's kernel K = Σ_p J_p J_pᵀ (thesis, Eq. 3.7) in closed form, against the
Jacobian of an unrolled forward-backward splitting by autograd, in float64."""

import pytest
import torch

from deqlab.models.mondeq import MonDEQ, monotone_fixed_point
from deqlab.papers.hieu2022.mondeq_kernel import BLOCKS, output_sensitivities, prediction_kernel
from deqlab.solvers.splitting import PeacemanRachford


def instance(n=7, N=4, d=3, m=0.5, seed=0, scale=0.6):
    g = torch.Generator().manual_seed(seed)

    def normal(*shape, std):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * std

    params = {
        "A": normal(n, n, std=scale / n**0.5),
        "B": normal(n, n, std=scale / n**0.5),
        "U": normal(n, d, std=1 / d**0.5),
        "u": normal(n, std=1 / n**0.5),
    }
    return params, normal(d, N, std=1.0), m


def unrolled_prediction(A, B, U, u, X, m, iters=800):
    """ŷ = Zᵀu with Z from `iters` forward-backward steps (Eq. 3.5, α = m/L²), from zero:
    differentiable by autograd, with no implicit function theorem involved."""
    n = A.shape[0]
    eye = torch.eye(n, dtype=A.dtype)
    W = (1 - m) * eye - A.T @ A + B - B.T
    alpha = m / torch.linalg.matrix_norm(eye - W, 2).detach() ** 2
    Z = torch.zeros(n, X.shape[1], dtype=A.dtype)
    for _ in range(iters):
        Z = torch.relu(Z - alpha * ((eye - W) @ Z - U @ X))
    return Z.T @ u, Z


@pytest.mark.parametrize("seed", range(3))
def test_kernel_blocks_equal_the_gram_of_the_unrolled_jacobian(seed):
    params, X, m = instance(seed=seed)
    names = list(params)
    jacobians = torch.autograd.functional.jacobian(
        lambda *p: unrolled_prediction(*p, X, m)[0], tuple(params[k] for k in names)
    )
    _, Z = unrolled_prediction(*params.values(), X, m)
    assert 0 < float((Z > 0).double().mean()) < 1  # some ReLUs active, some not
    K = prediction_kernel(**params, Z=Z, X=X, m=m)
    for name, J in zip(names, jacobians, strict=True):
        J = J.reshape(X.shape[1], -1)  # (N, dim p)
        assert torch.allclose(K[name], J @ J.T, atol=1e-10, rtol=1e-10), name
    assert torch.allclose(K["K"], sum(K[b] for b in BLOCKS))
    assert torch.equal(K["u"], Z.T @ Z)


def test_kernel_is_psd_and_dominates_the_gram_of_z():
    """K ⪰ ZᵀZ: Eq. (3.14), λ_min(K) ≥ σ_min(Z)², the step of Theorem 3.3.1's proof."""
    params, X, m = instance(n=10, N=5, seed=4)
    _, Z = unrolled_prediction(*params.values(), X, m)
    K = prediction_kernel(**params, Z=Z, X=X, m=m)
    for name in ("A", "B", "U"):
        assert float(torch.linalg.eigvalsh(K[name])[0]) > -1e-12, name
    assert float(torch.linalg.eigvalsh(K["K"])[0]) >= float(torch.linalg.eigvalsh(Z.T @ Z)[0])


def test_sensitivities_vanish_on_inactive_units_and_solve_the_adjoint():
    params, X, m = instance(seed=1)
    _, Z = unrolled_prediction(*params.values(), X, m)
    A, B = params["A"], params["B"]
    W = (1 - m) * torch.eye(7, dtype=A.dtype) - A.T @ A + B - B.T
    G = output_sensitivities(W, params["U"], params["u"], Z, X)
    mask = (W @ Z + params["U"] @ X > 0).double()
    assert torch.equal(mask, (Z > 0).double())  # an unrolled equilibrium: exact zeros
    assert torch.all(G[mask == 0] == 0)
    # g_j = D_j(u + Wᵀ g_j): the adjoint equation of ŷ_j = uᵀz_j
    assert torch.allclose(G, mask * (params["u"][:, None] + W.T @ G), atol=1e-12)


def test_sensitivities_agree_with_the_backward_on_an_equilibrium_with_round_off_positives():
    """The active set is W Z + U X > 0, as in the model's backward: positives of 1e-17 where
    the equilibrium should be 0 (a solve to rounding) change neither G nor the kernel, while
    reading the active set from Z > 0 would."""
    model = MonDEQ(3, 7, m=0.5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    X = torch.randn(3, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    W, C = model.weight().detach(), (model.U @ X).detach().requires_grad_(True)
    Z = monotone_fixed_point(W, C, m=model.m, solver=PeacemanRachford(tol=1e-13))
    jacobian = torch.autograd.functional.jacobian(
        lambda c: (
            monotone_fixed_point(W, c, m=model.m, solver=PeacemanRachford(tol=1e-13)).T
            @ model.u.detach()
        ),
        C,
    )  # (N, n, N): ∂ŷ_j/∂C
    backward = torch.stack([jacobian[j, :, j] for j in range(4)], dim=1)  # (n, N)
    Z = Z.detach()
    assert 0 < int((Z == 0).sum()) < Z.numel()  # some units inactive
    rounded = Z + 1e-17 * (Z == 0)  # round-off positives where the equilibrium is 0
    params = {k: p.detach() for k, p in model.named_parameters()}
    G = output_sensitivities(W, params["U"], params["u"], rounded, X)
    assert torch.allclose(G, backward, atol=1e-10, rtol=1e-10)
    kernel, exact = (prediction_kernel(**params, Z=z, X=X, m=model.m) for z in (rounded, Z))
    for name in BLOCKS:
        assert torch.allclose(kernel[name], exact[name], atol=1e-12, rtol=1e-12), name
    # the reading this replaces: Z > 0 counts the round-off positives as active
    mask = (rounded > 0).double()
    eye = torch.eye(7, dtype=W.dtype)
    v = torch.linalg.solve(eye - W.T.unsqueeze(0) * mask.T.unsqueeze(1), params["u"].expand(4, 7))
    assert not torch.allclose((v * mask.T).T, backward, atol=1e-3)


def test_bad_input():
    params, X, m = instance()
    _, Z = unrolled_prediction(*params.values(), X, m)
    with pytest.raises(ValueError, match=r"`Z` must have shape \(7, 'any'\)"):
        prediction_kernel(**params, Z=Z.T, X=X, m=m)
    with pytest.raises(ValueError, match=r"`U` must have shape \(7, 5\)"):
        prediction_kernel(**params, Z=Z, X=torch.randn(5, 4), m=m)  # d = 5, U has 3 columns
    with pytest.raises(ValueError, match=r"`X` must have shape \('any', 4\)"):
        prediction_kernel(**params, Z=Z, X=X[:, :3], m=m)
    with pytest.raises(TypeError, match=r"missing \['B'\], unknown \[\]"):
        prediction_kernel(**{k: v for k, v in params.items() if k != "B"}, Z=Z, X=X, m=m)
