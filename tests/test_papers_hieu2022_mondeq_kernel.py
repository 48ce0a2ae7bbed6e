"""Proposition 4's kernel K = Σ_p J_p J_pᵀ (thesis, Eq. 3.7) in closed form, against the
Jacobian of an unrolled forward-backward splitting by autograd, in float64."""

import pytest
import torch

from deqlab.papers.hieu2022.mondeq_kernel import BLOCKS, output_sensitivities, prediction_kernel


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
    G = output_sensitivities(W, params["u"], Z, X)
    mask = (Z > 0).double()
    assert torch.all(G[mask == 0] == 0)
    # g_j = D_j(u + Wᵀ g_j): the adjoint equation of ŷ_j = uᵀz_j
    assert torch.allclose(G, mask * (params["u"][:, None] + W.T @ G), atol=1e-12)


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
