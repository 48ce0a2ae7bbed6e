"""Q of Eq. (11), the population Gram matrices K^(l), K (Definition 1, Lemma 3, Eq. (14)),
λ*, and the DEQ NTK — against quadrature, Monte Carlo, closed forms and autograd."""

import math

import mpmath
import pytest
import torch
from scipy import integrate

from deqlab._memory import MemoryRefusal
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.papers.ling2023.theory import lemma2_gradients
from deqlab.solvers import SolverError
from deqlab.theory import kernels
from deqlab.theory.kernels import (
    AssumptionWarning,
    arccos_q,
    arccos_q_derivative,
    assemble_gram_blocks,
    converged_depth,
    least_eigenvalue,
    population_gram,
)
from deqlab.theory.ntk import deq_ntk, empirical_ntk, pl_gram


def sphere(d, n, seed=0):
    X = torch.randn(d, n, generator=torch.Generator().manual_seed(seed))
    return X / X.norm(dim=0) * math.sqrt(d)


def off_sphere(d, n, seed=0):
    """Columns with norms between 0.5√d and 2√d, and two correlated columns."""
    X = sphere(d, n, seed)
    X[:, 1] = 0.8 * X[:, 0] + 0.6 * X[:, 1]
    return X * torch.linspace(0.5, 2.0, n)


def rel_fro(A, B):
    return float((A - B).norm() / B.norm())


# --- Q -------------------------------------------------------------------------------


def test_q_special_values_are_exact():
    q = arccos_q(torch.tensor([1.0, -1.0, 0.0]))
    assert q[0].item() == 1.0 and q[1].item() == 0.0
    assert q[2].item() == pytest.approx(1 / math.pi, abs=1e-16)


def test_q_is_monotone_with_slope_in_unit_interval():
    x = torch.linspace(-1, 1, 4001)
    q, slope = arccos_q(x), arccos_q_derivative(x)
    assert bool((q.diff() >= 0).all())
    assert bool((slope >= 0).all()) and bool((slope <= 1).all())
    h = 1e-6
    inner = x[1:-1]
    fd = (arccos_q(inner + h) - arccos_q(inner - h)) / (2 * h)
    torch.testing.assert_close(fd, arccos_q_derivative(inner), atol=1e-7, rtol=0)


def _relu_product_expectation(c11, c12, c22):
    """E[φ(u)φ(v)] for (u, v) ~ N(0, [[c11, c12], [c12, c22]]) by 1-D quadrature.

    u = √c11 z1, v = μ(z1) + s z2 with μ = c12 z1/√c11, s² = c22 - c12²/c11, and the inner
    expectation E[φ(μ + s z2)] = μ Φ(μ/s) + s φ(μ/s) in closed form.
    """
    a, s = c12 / math.sqrt(c11), math.sqrt(max(c22 - c12 * c12 / c11, 0.0))

    def cdf(t):
        return 0.5 * math.erfc(-t / math.sqrt(2))

    def pdf(t):
        return math.exp(-0.5 * t * t) / math.sqrt(2 * math.pi)

    def integrand(z):
        mu = a * z
        inner = max(mu, 0.0) if s == 0 else mu * cdf(mu / s) + s * pdf(mu / s)
        return math.sqrt(c11) * z * inner * pdf(z)

    return integrate.quad(integrand, 0, math.inf, epsabs=1e-13, epsrel=1e-12)[0]


@pytest.mark.parametrize("x", [-0.999, -0.5, 0.0, 0.3, 0.9, 0.99999])
def test_q_matches_twice_relu_expectation_by_quadrature(x):
    assert arccos_q(torch.tensor(x)).item() == pytest.approx(
        2 * _relu_product_expectation(1.0, x, 1.0), abs=1e-11
    )


@pytest.mark.parametrize("delta", [1e-4, 1e-8, 1e-12])
def test_q_is_accurate_near_plus_and_minus_one(delta):
    mpmath.mp.dps = 40
    for x in (1 - delta, -1 + delta):
        xm = mpmath.mpf(x)
        exact = (mpmath.sqrt(1 - xm**2) + (mpmath.pi - mpmath.acos(xm)) * xm) / mpmath.pi
        assert arccos_q(torch.tensor(x)).item() == pytest.approx(float(exact), abs=2e-16)


def test_q_clamps_rounding_and_rejects_real_excursions():
    assert arccos_q(torch.tensor(1 + 2e-16)).item() == 1.0
    assert arccos_q(torch.tensor(-1 - 2e-16)).item() == 0.0
    with pytest.raises(ValueError, match=r"`x` must lie in \[-1, 1\].*1 \+ 0.01"):
        arccos_q(torch.tensor([0.5, 1.01]))


# --- K^(l), K --------------------------------------------------------------------------


def definition1_reference(X, sigma_w2, depth):
    """Definition 1 literally: per pair, the general 2×2 covariance and quadrature."""
    d, n = X.shape
    inner = (X.T @ X / d).tolist()
    K = [[0.0] * n for _ in range(n)]
    for _ in range(depth):
        cov = [[sigma_w2 * K[i][j] + inner[i][j] for j in range(n)] for i in range(n)]
        for i in range(n):
            for j in range(i, n):
                K[i][j] = K[j][i] = 2 * _relu_product_expectation(cov[i][i], cov[i][j], cov[j][j])
    return torch.tensor(K)


def test_population_gram_matches_definition1_off_the_sphere():
    X = off_sphere(7, 4)
    for depth in (1, 3):
        torch.testing.assert_close(
            population_gram(X, 0.1, depth),
            definition1_reference(X, 0.1, depth),
            atol=1e-10,
            rtol=1e-10,
        )


def untied_monte_carlo_gram(X, sigma_w2, depth, m, seed):
    """(1/m) Z^(l)ᵀZ^(l) of l weight-untied layers z^(l) = φ(W_l z^(l-1) + U x).

    Each W_l ~ N(0, 2σ_w²/m) is fresh and independent of Z^(l-1), so the rows of W_l Z^(l-1)
    are i.i.d. N(0, (2σ_w²/m) Z^(l-1)ᵀZ^(l-1)): they are drawn from exactly that law (m×n
    numbers instead of an m×m matrix per layer).
    """
    gen = torch.Generator().manual_seed(seed)
    d, n = X.shape
    B = (torch.randn(m, d, generator=gen) * math.sqrt(2 / d)) @ X  # (m, n) = U X
    Z = torch.zeros(m, n)
    for _ in range(depth):
        evals, evecs = torch.linalg.eigh(Z.T @ Z)
        root = evecs * evals.clamp_min(0).sqrt()  # root rootᵀ = ZᵀZ
        WZ = torch.randn(m, n, generator=gen) @ root.T * math.sqrt(2 * sigma_w2 / m)
        Z = torch.relu(WZ + B)
    return Z.T @ Z / m


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_population_gram_matches_monte_carlo_of_untied_layers(depth):
    """One width-20 000 network has a per-entry standard error of ≈ √5/√m ≈ 1.6% (the
    diagonal: Var φ(h)² = 5 (E φ(h)²)²), so eight independent ones are averaged (≈ 0.6%)."""
    X = off_sphere(10, 6)
    K = population_gram(X, 0.1, depth)
    draws = [untied_monte_carlo_gram(X, 0.1, depth, 20_000, seed=10 * depth + s) for s in range(8)]
    assert rel_fro(torch.stack(draws).mean(0), K) < 0.02


def test_infinite_depth_newton_agrees_with_the_layer_recursion():
    X = off_sphere(12, 9)
    torch.testing.assert_close(
        population_gram(X, 0.1), population_gram(X, 0.1, depth=400), atol=2e-15, rtol=0
    )


def _layers_one_by_one(X, sigma_w2, depth):
    """K^(depth) by Eq. (13) applied ``depth`` times, without any shortcut."""
    from deqlab.theory.kernels import assemble_gram, q_and_slope

    def entries(cos):
        k, rho_prev = torch.zeros_like(cos), 0.0
        for _ in range(depth):
            rho = sigma_w2 * rho_prev + 1.0
            u = k.mul_(sigma_w2 * rho_prev / rho).add_(cos, alpha=1.0 / rho).clamp_(-1.0, 1.0)
            k, rho_prev = q_and_slope(u, slope=False)[0], rho
        return k

    return assemble_gram(X, entries, (1 - sigma_w2**depth) / (1 - sigma_w2))


@pytest.mark.parametrize("sigma_w2", [0.08, 0.5])
def test_any_depth_is_exact_and_takes_bounded_time(sigma_w2):
    """Once the layer map repeats its iterates bitwise, deeper K^(l) are known exactly:
    depth 10⁹ returns at once, equal to the layers applied one by one."""
    X = off_sphere(7, 6)
    deep = population_gram(X, sigma_w2, 10**9)
    torch.testing.assert_close(deep, _layers_one_by_one(X, sigma_w2, 400), atol=0, rtol=0)
    torch.testing.assert_close(
        population_gram(X, sigma_w2, 7), _layers_one_by_one(X, sigma_w2, 7), atol=0, rtol=0
    )


@pytest.mark.parametrize("sigma_w2", [0.08, 0.3, 0.7])
def test_converged_depth_bounds_the_distance_to_the_limit(sigma_w2):
    X = off_sphere(8, 7)
    K = population_gram(X, sigma_w2)
    root = K.diagonal().sqrt()
    limit = converged_depth(sigma_w2)
    assert 2 * (limit + 1) * sigma_w2**limit <= 1e-14 < 2 * limit * sigma_w2 ** (limit - 1)
    for depth in (1, limit // 2, limit):
        gap = float(
            ((population_gram(X, sigma_w2, depth) - K) / (root[:, None] * root)).abs().max()
        )
        assert gap <= 2 * (depth + 1) * sigma_w2**depth + 2e-14
    assert converged_depth(0.08) == 15


def test_diagonal_follows_lemma3_closed_form():
    sigma_w2 = 0.08
    X = off_sphere(9, 5)
    nu = (X * X).sum(0) / 9
    for depth in (0, 1, 3):
        rho = (1 - sigma_w2**depth) / (1 - sigma_w2)
        torch.testing.assert_close(population_gram(X, sigma_w2, depth).diagonal(), rho * nu)
    K = population_gram(sphere(9, 5), sigma_w2)
    torch.testing.assert_close(K.diagonal(), torch.full((5,), 1 / (1 - sigma_w2)))


def test_orthogonal_inputs_have_the_closed_form_least_eigenvalue():
    """Assumption 2(i): c = 0 off the diagonal, so K = ρ((1 - k0) I + k0 11ᵀ), k0 = Q(σ² k0)."""
    sigma_w2, n, d = 0.1, 6, 8
    X = math.sqrt(d) * torch.eye(d)[:, :n]
    k0 = 0.0
    for _ in range(200):
        k0 = arccos_q(torch.tensor(sigma_w2 * k0)).item()
    K = population_gram(X, sigma_w2)
    rho = 1 / (1 - sigma_w2)
    torch.testing.assert_close(K, rho * ((1 - k0) * torch.eye(n) + k0))
    lam = least_eigenvalue(K)
    assert not lam.singular and lam.value == pytest.approx(rho * (1 - k0), rel=1e-12)
    assert lam.condition_number == pytest.approx((1 + (n - 1) * k0) / (1 - k0), rel=1e-12)


def test_population_gram_is_psd_and_symmetric_across_blocks(monkeypatch):
    X = off_sphere(5, 40, seed=3)
    full = population_gram(X, 0.1)
    monkeypatch.setattr("deqlab.theory.kernels.BLOCK_ENTRIES", 7 * 40)  # 7-row blocks
    torch.testing.assert_close(population_gram(X, 0.1), full, atol=1e-14, rtol=0)
    assert torch.equal(full, full.T)
    assert least_eigenvalue(full).value > 0


def test_assemble_gram_blocks_tells_each_block_where_it_lies(monkeypatch):
    """Entries that depend on the indices, E_ij = (i + 1)(j + 1) c_ij, against the formula
    formed in one piece, with 3-row blocks (so the last block is partial)."""
    from deqlab.theory.kernels import assemble_gram_blocks

    X = off_sphere(4, 11, seed=5)
    monkeypatch.setattr("deqlab.theory.kernels.BLOCK_ENTRIES", 3 * 11)
    seen = []

    def entries(cos, rows):
        seen.append((rows.start, rows.stop, tuple(cos.shape)))
        i = torch.arange(rows.start, rows.stop, dtype=cos.dtype)[:, None] + 1
        j = torch.arange(rows.start, 11, dtype=cos.dtype)[None, :] + 1
        return cos * i * j

    got = assemble_gram_blocks(X, entries, 0.5)
    norms = X.norm(dim=0)
    index = torch.arange(1, 12, dtype=torch.float64)
    expected = 0.5 * (X.T @ X) / 4 * torch.outer(index, index)  # √(ν_iν_j) c_ij = x_iᵀx_j/d
    torch.testing.assert_close(got, expected, atol=1e-13, rtol=1e-13)
    assert seen == [(0, 3, (3, 11)), (3, 6, (3, 8)), (6, 9, (3, 5)), (9, 11, (2, 2))]
    assert norms.min() < 0.9 * math.sqrt(4)  # off the sphere: the scale √ν_i matters


# --- λ* --------------------------------------------------------------------------------


@pytest.mark.parametrize("factor", [1.0, 2.5])
def test_duplicate_or_parallel_inputs_give_zero_least_eigenvalue(factor):
    X = sphere(6, 5)
    X = torch.cat([X, factor * X[:, 2:3]], dim=1)
    lam = least_eigenvalue(population_gram(X, 0.08))
    assert lam.singular and lam.value == 0.0 and math.isinf(lam.condition_number)
    assert abs(lam.computed) <= lam.tolerance and "duplicate or parallel" in lam.reason


def test_least_eigenvalue_tolerance_follows_the_dtype_of_k():
    X = sphere(6, 5)
    K = population_gram(torch.cat([X, X[:, :1]], dim=1), 0.08)
    lam64, lam32 = least_eigenvalue(K), least_eigenvalue(K.float())
    assert lam32.singular and lam32.tolerance > 1e6 * lam64.tolerance


def test_least_eigenvalue_rejects_non_psd_and_asymmetric_matrices():
    with pytest.raises(ValueError, match="`K` must be positive semi-definite; got least eig"):
        least_eigenvalue(torch.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="`K` must be symmetric"):
        least_eigenvalue(torch.tensor([[1.0, 0.5], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="non-empty square matrix; got shape \\(2, 3\\)"):
        least_eigenvalue(torch.ones(2, 3))


# --- validation --------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [population_gram, deq_ntk])
def test_bad_sigma_w2_and_inputs_raise_clear_errors(fn):
    X = sphere(4, 3)
    for bad in (0.0, -0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match=r"`sigma_w2` must be in \(0, 1\)"):
            fn(X, bad)
    with pytest.warns(AssumptionWarning, match="violates Assumption 1"):
        fn(X, 0.2)
    with pytest.raises(ValueError, match="`X` must be finite; got 1 NaN/Inf"):
        fn(X.index_put((torch.tensor(0), torch.tensor(1)), torch.tensor(math.nan)), 0.08)
    with pytest.raises(ValueError, match="`X` must be a 2-D tensor; got 1-D"):
        fn(X[:, 0], 0.08)
    with pytest.raises(ValueError, match=r"n >= 1 columns \(points\); got \(4, 0\)"):
        fn(X[:, :0], 0.08)
    with pytest.raises(ValueError, match=r"1 all-zero column\(s\) \(points 1\)"):
        fn(X * torch.tensor([1.0, 0.0, 1.0]), 0.08)
    with pytest.raises(TypeError, match="`X` must be a floating-point tensor"):
        fn(X.long(), 0.08)


def test_bad_depth_raises():
    with pytest.raises(ValueError, match="`depth` must be >= 0; got -1"):
        population_gram(sphere(3, 2), 0.08, -1)
    with pytest.raises(TypeError, match="`depth` must be an int"):
        population_gram(sphere(3, 2), 0.08, 2.0)


# --- NTK ---------------------------------------------------------------------------------


def test_empirical_ntk_matches_autograd_jacobian_of_the_unrolled_model():
    d, n, m, sigma_w2 = 5, 3, 30, 0.08
    X = off_sphere(d, n)
    model = ReLUDEQ.init(d, m, sigma_w2=sigma_w2, seed=1)
    params = {k: p.detach().clone() for k, p in model.named_parameters()}

    def predict(W, U, a):
        Z = torch.zeros(m, n)
        for _ in range(200):  # ‖W‖₂ < 1: 200 layers reach the equilibrium to rounding
            Z = torch.relu(W @ Z + U @ X)
        return a @ Z

    jac = torch.func.jacrev(predict, argnums=(0, 1, 2))(params["W"], params["U"], params["a"])
    blocks = [J.reshape(n, -1) @ J.reshape(n, -1).T for J in jac]  # Θ_W, Θ_U, Θ_a
    standard = empirical_ntk(model, X, tol=1e-14)
    torch.testing.assert_close(standard, sum(blocks) / m, rtol=1e-9, atol=1e-12)
    weights = (2 * sigma_w2 / m, 2 / d, 1 / m)
    ntk = empirical_ntk(model, X, parameterization="ntk", sigma_w2=sigma_w2, tol=1e-14)
    torch.testing.assert_close(
        ntk, sum(w * B for w, B in zip(weights, blocks, strict=True)), rtol=1e-9, atol=1e-12
    )


def test_empirical_ntk_converges_to_deq_ntk_as_width_grows():
    """Mean relative Frobenius error over 3 seeds (one draw fluctuates by ~m^(-1/2))."""
    d, n, sigma_w2, widths = 20, 6, 0.08, (128, 512, 2048)
    X = off_sphere(d, n)
    for parameterization in ("standard", "ntk"):
        limit = deq_ntk(X, sigma_w2, parameterization=parameterization)
        errors = [
            sum(
                rel_fro(
                    empirical_ntk(
                        ReLUDEQ.init(d, m, sigma_w2=sigma_w2, seed=seed),
                        X,
                        parameterization=parameterization,
                        sigma_w2=sigma_w2,
                    ),
                    limit,
                )
                for seed in range(3)
            )
            / 3
            for m in widths
        ]
        assert errors[0] > errors[1] > errors[2] and errors[2] < 0.1, (parameterization, errors)


def test_deq_ntk_diagonal_and_psd():
    sigma_w2 = 0.1
    rho, p = 1 / (1 - sigma_w2), 1 / (2 * (1 - sigma_w2))  # P_ii = Q'(1)/(2(1 - σ²))
    X = sphere(8, 10)
    standard = deq_ntk(X, sigma_w2)
    torch.testing.assert_close(standard.diagonal(), torch.full((10,), rho * (1 + p)))
    ntk = deq_ntk(X, sigma_w2, parameterization="ntk")
    torch.testing.assert_close(ntk.diagonal(), torch.full((10,), rho * (1 + 2 * p)))
    assert least_eigenvalue(standard).value > 0 and least_eigenvalue(ntk).value > 0


def test_empirical_ntk_validates_its_arguments():
    model = ReLUDEQ.init(3, 8, seed=0)
    with pytest.raises(TypeError, match="`model` must be a deqlab ReLUDEQ; got dict"):
        empirical_ntk({}, sphere(3, 2))
    with pytest.raises(ValueError, match="`sigma_w2` is required for parameterization='ntk'"):
        empirical_ntk(model, sphere(3, 2), parameterization="ntk")
    with pytest.raises(ValueError, match="`parameterization` must be one of 'standard', 'ntk'"):
        deq_ntk(sphere(3, 2), 0.08, parameterization="mup")


def test_pl_gram_is_the_kronecker_form_of_section_2_3():
    """H = G + R(G ⊗ I_m)Rᵀ + R(XᵀX ⊗ I_m)Rᵀ with R = (I_n ⊗ aᵀ)J⁻¹D from the dense
    J = I_mn − D(I_n ⊗ W) (Lemma 2), and rᵀHr = ‖∇_θΦ‖² for the dense gradients of Eq. (3)."""
    d, n, m = 4, 3, 12
    X, y = off_sphere(d, n), torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    model = ReLUDEQ.init(d, m, sigma_w2=0.08, seed=2)
    W, U, a = (p.detach() for p in (model.W, model.U, model.a))
    Z = torch.zeros(m, n, dtype=torch.float64)
    for _ in range(300):  # ‖W‖₂ < 1: the equilibrium to rounding
        Z = torch.relu(W @ Z + U @ X)
    D = torch.diag(((W @ Z + U @ X) > 0).T.reshape(-1).double())  # vec stacks columns
    J = torch.eye(m * n, dtype=torch.float64) - D @ torch.kron(torch.eye(n, dtype=W.dtype), W)
    R = torch.kron(torch.eye(n, dtype=torch.float64), a[None, :]) @ torch.linalg.solve(J, D)
    gram = Z.T @ Z
    eye_m = torch.eye(m, dtype=torch.float64)
    reference = gram + R @ torch.kron(gram, eye_m) @ R.T + R @ torch.kron(X.T @ X, eye_m) @ R.T
    H = pl_gram(model, X, tol=1e-14)
    torch.testing.assert_close(H, reference, rtol=1e-10, atol=1e-12)
    grad_W, grad_U, grad_a = lemma2_gradients(model, X, y, Z)
    r = a @ Z - y
    grad_sq = grad_W.square().sum() + grad_U.square().sum() + grad_a.square().sum()
    torch.testing.assert_close(r @ H @ r, grad_sq, rtol=1e-10, atol=0)
    lam_h, lam_z = torch.linalg.eigvalsh(H)[0], torch.linalg.eigvalsh(gram)[0]
    assert lam_h >= lam_z > 0 and grad_sq >= 2 * lam_h * 0.5 * (r @ r)  # Eqs. (4)–(5)


def test_pl_gram_raises_when_the_equilibrium_does_not_exist():
    model = ReLUDEQ.init(3, 8, seed=0)
    with torch.no_grad():
        model.W.copy_(2.0 * torch.eye(8))  # relu(2z + b) diverges for b > 0
    with pytest.raises(SolverError, match="forward"):
        pl_gram(model, sphere(3, 2), max_iter=50)


# --- CLI ---------------------------------------------------------------------------------


def test_cli_kernel_prints_spectrum_and_saves_the_matrix(tmp_path):
    import numpy as np
    from typer.testing import CliRunner

    from deqlab.cli.app import app
    from deqlab.data import get_dataset

    out = tmp_path / "K.npy"
    args = ["kernel", "--dataset", "sphere", "--n", "20", "--d", "8", "--save", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    K = population_gram(get_dataset("sphere", n=20, d=8).X, 0.08)
    torch.testing.assert_close(torch.from_numpy(np.load(out)), K, atol=0, rtol=0)
    lam = least_eigenvalue(K)
    assert f"lambda_min (λ*): {lam.value:.10g}" in result.output
    assert f"condition number: {lam.condition_number:.6g}" in result.output
    assert "diagonal: min 1.086956522, mean 1.086956522, max 1.086956522" in result.output


def test_cli_kernel_reads_npy_inputs_reports_singularity_and_ntk(tmp_path):
    import numpy as np
    from typer.testing import CliRunner

    from deqlab.cli.app import app

    X = sphere(5, 4)
    path = tmp_path / "X.npy"
    np.save(path, torch.cat([X, X[:, :1]], dim=1).T.numpy())  # (n, d), a duplicate point
    runner = CliRunner()
    result = runner.invoke(app, ["kernel", "--input", str(path), "--depth", "2"])
    assert result.exit_code == 0, result.output
    assert "K^(2) (Definition 1)" in result.output and "lambda_min (λ*): 0\n" in result.output
    assert "duplicate or parallel inputs" in result.output
    np.save(path, X.T.numpy())  # (n, d): one sample per row
    result = runner.invoke(app, ["kernel", "--input", str(path), "--ntk"])
    assert result.exit_code == 0 and "DEQ NTK (standard)" in result.output
    lam = least_eigenvalue(deq_ntk(X, 0.08))
    assert f"lambda_min (λ*): {lam.value:.10g}" in result.output


def test_cli_kernel_rejects_bad_arguments(tmp_path):
    from typer.testing import CliRunner

    from deqlab.cli.app import app

    runner = CliRunner()
    result = runner.invoke(app, ["kernel"])
    assert (
        result.exit_code == 2 and "give exactly one of --dataset NAME or --input" in result.output
    )
    result = runner.invoke(app, ["kernel", "--dataset", "sphere", "--depth", "-2"])
    assert result.exit_code == 2 and "non-negative integer or 'inf'" in result.output
    result = runner.invoke(app, ["kernel", "--dataset", "sphere", "--n", "5", "--sigma-w2", "1"])
    assert result.exit_code == 2 and "`--sigma-w2` must be in (0, 1)" in result.output


def test_cli_kernel_at_a_huge_depth_computes_the_limit_and_says_so():
    from typer.testing import CliRunner

    from deqlab.cli.app import app

    args = ["kernel", "--dataset", "sphere", "--n", "12", "--d", "6"]
    deep = CliRunner().invoke(app, [*args, "--depth", "1000000000"])
    limit = CliRunner().invoke(app, args)
    assert deep.exit_code == 0 == limit.exit_code, deep.output
    assert "kernel: K^(1000000000) = K = K^(∞) (Eq. 14), to 1e-14" in deep.output
    assert "note: depth 1000000000 > 15: from l = 15 on, |K^(l) - K| <= 2(l+1)σ_w^(2l)" in (
        deep.output
    )
    assert deep.output.splitlines()[3:] == limit.output.splitlines()[2:]  # the same numbers


def test_a_gram_matrix_that_cannot_fit_is_refused_before_allocating():
    X = torch.randn(2, 10**6, dtype=torch.float64)  # 16 MB of inputs, 8 TB of K
    with pytest.raises(MemoryRefusal, match=r"^`X`: n = 1000000 needs 8 TB for the population"):
        population_gram(X, 0.08)


def test_progress_counts_the_upper_triangle_and_ends_at_its_size(monkeypatch):
    monkeypatch.setattr(kernels, "BLOCK_ENTRIES", 40)  # blocks of 40 // 13 = 3 rows
    calls = []
    population_gram(torch.randn(4, 13, dtype=torch.float64), progress=lambda *a: calls.append(a))
    done = [c[1] for c in calls]
    assert done == sorted(done) and done[0] == 0 and calls[-1][1:] == (91, 91)  # 13·14/2
    assert {c[0] for c in calls} == {"population Gram matrix K (Eq. 14)"} and len(calls) == 6


def test_a_kernel_written_over_the_matrix_it_reads_equals_a_fresh_one(monkeypatch):
    monkeypatch.setattr(kernels, "BLOCK_ENTRIES", 50)  # many blocks: the aliasing matters
    X = torch.randn(5, 23, dtype=torch.float64)
    K = population_gram(X, 0.08)
    scale = X.norm(dim=0) / math.sqrt(5)

    def entries(cos, rows):  # reads K's upper triangle from row rows.start on
        k = K[rows, rows.start :] / (scale[rows, None] * scale[None, rows.start :])
        return k.mul_(cos).add_(k.square())

    fresh = assemble_gram_blocks(X, entries, 2.0)
    in_place = assemble_gram_blocks(X, entries, 2.0, out=K)
    assert in_place is K and torch.equal(in_place, fresh)
    with pytest.raises(ValueError, match=r"`out` must be a \(23, 23\) float64 tensor"):
        assemble_gram_blocks(X, entries, 2.0, out=torch.empty(23, 23, dtype=torch.float32))


def test_the_least_eigenvalue_checks_symmetry_by_blocks(monkeypatch):
    monkeypatch.setattr(kernels, "BLOCK_ENTRIES", 30)
    K = torch.eye(12, dtype=torch.float64)
    K[9, 2] = 1e-3
    with pytest.raises(ValueError, match=r"`K` must be symmetric; got max \|K - Kᵀ\| = 0.001"):
        least_eigenvalue(K)


@pytest.mark.parametrize("parameterization", ["standard", "ntk"])
def test_the_deq_ntk_written_over_k_equals_the_solved_one(monkeypatch, parameterization):
    monkeypatch.setattr(kernels, "BLOCK_ENTRIES", 64)
    X = torch.randn(6, 31, dtype=torch.float64)
    expected = deq_ntk(X, 0.08, parameterization=parameterization)  # its own Eq. (14) solve
    K = population_gram(X, 0.08)
    got = deq_ntk(X, 0.08, parameterization=parameterization, gram=K, out=K)
    assert got is K
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-13)
