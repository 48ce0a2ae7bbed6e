"""Forward solvers against closed forms, acceleration counts, failure modes and bad input."""

import math
import pickle

import pytest
import torch

from deqlab.solvers import (
    Anderson,
    Broyden,
    ForwardBackward,
    MonotoneOperator,
    PeacemanRachford,
    Picard,
    SolverError,
    Status,
    default_tol,
    get_solver,
    residual_norms,
    solver_names,
)

EXACT = {"tol": 1e-13, "stop": "abs", "max_iter": 2000}
SOLVERS = [Picard, Anderson, Broyden]


def symmetric_contraction(d: int, rate: float, seed: int = 0) -> torch.Tensor:
    """Symmetric M with eigenvalues evenly spread in [-rate, rate], so ‖M‖₂ = rate."""
    gen = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen))
    return Q @ torch.diag(torch.linspace(-rate, rate, d)) @ Q.T


def rotation_blocks(angles: list[float]) -> torch.Tensor:
    """Block-diagonal orthogonal matrix of 2-D rotations: every |eigenvalue| is 1."""
    blocks = [
        torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]) for a in angles
    ]
    return torch.block_diag(*blocks)


@pytest.mark.parametrize("solver_cls", SOLVERS)
def test_affine_contraction_reaches_closed_form(solver_cls):
    M, b = symmetric_contraction(8, 0.6), torch.randn(8)
    z_exact = torch.linalg.solve(torch.eye(8) - M, b)
    solution = solver_cls(**EXACT)(lambda z: M @ z + b, torch.zeros(8))
    assert solution.converged and solution.status is Status.CONVERGED
    torch.testing.assert_close(solution.z, z_exact, atol=1e-10, rtol=0)
    assert len(solution.residuals) == solution.n_steps
    assert solution.residual <= 1e-13


@pytest.mark.parametrize("solver_cls", SOLVERS)
def test_per_sample_solves_each_sample_of_any_shape(solver_cls):
    # batch of 5 independent problems, each a (2, 3) tensor: z_i = M vec(z_i) + b_i
    M, B = symmetric_contraction(6, 0.7), torch.randn(5, 2, 3)

    def f(z):  # (5, 2, 3) -> (5, 2, 3)
        return (z.reshape(5, 6) @ M.T).reshape(5, 2, 3) + B

    solution = solver_cls(per_sample=True, **EXACT)(f, torch.zeros(5, 2, 3))
    z_exact = torch.linalg.solve(torch.eye(6) - M, B.reshape(5, 6).T).T.reshape(5, 2, 3)
    torch.testing.assert_close(solution.z, z_exact, atol=1e-10, rtol=0)
    per_sample = residual_norms(solution.z.reshape(5, 6), f(solution.z).reshape(5, 6), "abs")
    assert per_sample.max().item() <= 1e-13
    assert solution.residual == pytest.approx(per_sample.max().item(), rel=1e-6, abs=1e-16)


def test_relative_stopping_rule_uses_norm_of_f():
    M, b = symmetric_contraction(5, 0.5), 1e6 * torch.randn(5)
    solution = Picard(tol=1e-10, stop="rel")(lambda z: M @ z + b, torch.zeros(5))
    fz = M @ solution.z + b
    assert (fz - solution.z).norm() / fz.norm() <= 1e-10
    assert (fz - solution.z).norm() > 1e-10  # the absolute residual is far larger


def test_acceleration_is_real_on_rate_095_contraction():
    M, b = symmetric_contraction(20, 0.95), torch.randn(20)
    steps = {
        cls.__name__: cls(tol=1e-12, stop="abs", max_iter=2000)(
            lambda z: M @ z + b, torch.zeros(20)
        ).n_steps
        for cls in SOLVERS
    }
    # measured: Picard 557, Anderson 152, Broyden 54
    assert steps["Picard"] > 400
    assert 3 * steps["Anderson"] <= steps["Picard"]
    assert 3 * steps["Broyden"] <= steps["Picard"]


def test_rotation_map_picard_fails_anderson_converges():
    R, b = rotation_blocks([1.0, 2.5]), torch.randn(4)  # ‖R‖₂ = ρ(R) = 1: not contractive
    z_exact = torch.linalg.solve(torch.eye(4) - R, b)
    picard = Picard(tol=1e-10, max_iter=300, throw=False)(lambda z: R @ z + b, torch.zeros(4))
    assert picard.status is Status.MAX_STEPS and picard.residual > 1e-2
    anderson = Anderson(tol=1e-12, stop="abs", max_iter=300)(lambda z: R @ z + b, torch.zeros(4))
    assert anderson.converged and anderson.n_steps < 30
    torch.testing.assert_close(anderson.z, z_exact, atol=1e-10, rtol=0)


@pytest.mark.parametrize("solver_cls", SOLVERS)
def test_returns_best_iterate_and_its_residual(solver_cls):
    R, b = 1.02 * rotation_blocks([0.3, 2.0]), torch.randn(4)  # mildly expanding rotation

    def f(z):
        return R @ torch.tanh(z) + b

    solution = solver_cls(tol=1e-14, max_iter=15, throw=False, stop="abs")(f, torch.zeros(4))
    assert solution.residual == pytest.approx(min(solution.residuals), rel=1e-12)
    recomputed = (f(solution.z) - solution.z).norm().item()
    assert recomputed == pytest.approx(solution.residual, rel=1e-9)


@pytest.mark.parametrize("dim", [1, 2])
def test_anderson_singular_least_squares_falls_back(dim):
    # N = dim < history: the Gram matrix G Gᵀ is singular; tikhonov=0 removes the cushion
    solution = Anderson(tikhonov=0.0, history=5, **EXACT)(torch.cos, torch.zeros(dim))
    torch.testing.assert_close(
        solution.z, torch.full((dim,), 0.7390851332151607), atol=1e-12, rtol=0
    )


def reference_anderson(f, x, depth: int, steps: int) -> list[torch.Tensor]:
    """Textbook Anderson (Walker & Ni 2011): difference form, lstsq, `depth` differences."""
    xs, fs = [x], [f(x)]
    for _ in range(steps):
        X, F = torch.stack(xs[-(depth + 1) :], 1), torch.stack(fs[-(depth + 1) :], 1)  # (N, k)
        G = F - X
        if X.shape[1] == 1:
            x = F[:, 0]
        else:
            gamma = torch.linalg.lstsq(G.diff(dim=1), G[:, -1:]).solution[:, 0]
            x = F[:, -1] - F.diff(dim=1) @ gamma
        xs.append(x)
        fs.append(f(x))
    return xs


def test_anderson_iterates_match_textbook_reference():
    M, b = symmetric_contraction(12, 0.9), torch.randn(12)
    f = lambda z: M @ z + b  # noqa: E731
    step = Anderson(history=4, tikhonov=0.0).stepper()
    z = torch.zeros(1, 12)
    for expected in reference_anderson(f, torch.zeros(12), depth=3, steps=10):
        torch.testing.assert_close(z[0], expected, atol=1e-9, rtol=0)
        z = step(z, f(z[0])[None])


def test_broyden_iterates_match_dense_good_broyden():
    # dense reference: B ≈ J_g⁻¹ from -I, B⁺ = B + (Δz - BΔg)(ΔzᵀB) / (ΔzᵀBΔg), z⁺ = z - B g
    W, x = symmetric_contraction(6, 0.8), torch.randn(6)
    f = lambda z: torch.tanh(W @ z + x)  # noqa: E731
    step = Broyden(memory=20).stepper()
    z, z_ref, B = torch.zeros(1, 6), torch.zeros(6), -torch.eye(6)
    g_prev = z_prev = None
    for _ in range(8):
        g = f(z_ref) - z_ref
        if g_prev is not None:
            dz, dg = z_ref - z_prev, g - g_prev
            B = B + torch.outer(dz - B @ dg, dz @ B) / (dz @ B @ dg)
        z_prev, g_prev = z_ref, g
        z_ref = z_ref - B @ g
        z = step(z, f(z[0])[None])
        torch.testing.assert_close(z[0], z_ref, atol=1e-10, rtol=0)


def test_anderson_step_falls_back_to_plain_step_on_singular_system():
    step = Anderson(tikhonov=0.0, damping=0.5).stepper()
    g = torch.tensor([[1.0, -2.0, 0.5]])  # the same residual twice: G Gᵀ = [[a, a], [a, a]]
    z1, z2 = torch.zeros(1, 3), torch.ones(1, 3)
    step(z1, z1 + g)
    torch.testing.assert_close(step(z2, z2 + g), z2 + 0.5 * g)  # not NaN from 0/0 weights


def test_anderson_stagnation_is_safe():
    # f(z) = z + 0 at a fixed point after the first step: G = 0, 0/0 weights must not leak
    solution = Anderson(history=3, **EXACT)(lambda z: torch.ones_like(z), torch.zeros(3))
    assert solution.converged and torch.equal(solution.z, torch.ones(3))


def test_float32_anderson():
    M, b = symmetric_contraction(10, 0.9).float(), torch.randn(10).float()
    solution = Anderson(tol=1e-5)(lambda z: M @ z + b, torch.zeros(10, dtype=torch.float32))
    assert solution.converged and solution.z.dtype == torch.float32


# ---- default tolerance per dtype -----------------------------------------------------

LOW_PRECISION = [torch.float32, torch.float16, torch.bfloat16]


def test_default_tol_values():
    # max(8 eps, 1e-8): float64 keeps its historical 1e-8
    assert default_tol(torch.float64) == 1e-8
    assert default_tol(torch.float32) == pytest.approx(9.5367e-7, rel=1e-4)  # 8 · 2⁻²³
    assert default_tol(torch.float16) == pytest.approx(7.8125e-3)  # 8 · 2⁻¹⁰
    assert default_tol(torch.bfloat16) == pytest.approx(6.25e-2)  # 8 · 2⁻⁷


@pytest.mark.parametrize("dtype", [torch.float64, *LOW_PRECISION], ids=str)
@pytest.mark.parametrize("solver_cls", SOLVERS)
def test_default_tol_stops_at_the_dtype_tolerance(solver_cls, dtype):
    # z = tanh(W z + x) on a batch of 6 samples of width 16; reference solved in float64
    W, x = symmetric_contraction(16, 0.8), torch.randn(6, 16)
    z_ref = Anderson(**EXACT)(lambda z: torch.tanh(z @ W.T + x), torch.zeros(6, 16)).z
    W_, x_ = W.to(dtype), x.to(dtype)
    solution = solver_cls()(lambda z: torch.tanh(z @ W_.T + x_), torch.zeros_like(x_))
    tol = default_tol(dtype)
    assert solution.converged and solution.z.dtype == dtype
    assert solution.residual <= tol < min(solution.residuals[:-1])  # stopped by this tol
    error = (solution.z.double() - z_ref).norm() / z_ref.norm()
    assert error <= 10 * tol / (1 - 0.8)  # ‖z - z*‖ <= r‖f(z)‖/(1 - ρ), plus rounding


@pytest.mark.parametrize("solver_cls", SOLVERS)
def test_float64_tolerance_is_out_of_reach_in_float32(solver_cls):
    # why the default depends on the dtype: 1e-8 is below float32's rounding floor
    W, x = symmetric_contraction(16, 0.8).float(), torch.randn(6, 16).float()
    solution = solver_cls(tol=1e-8, max_iter=300, throw=False)(
        lambda z: torch.tanh(z @ W.T + x), torch.zeros_like(x)
    )
    assert solution.status is Status.MAX_STEPS
    assert default_tol(torch.float32) < 1e-6 and solution.residual < default_tol(torch.float32)


@pytest.mark.parametrize("solver_cls", SOLVERS)
def test_explicit_tol_wins_and_errors_report_the_resolved_tol(solver_cls):
    M, b = symmetric_contraction(8, 0.6), torch.randn(8)
    solution = solver_cls(tol=1e-3)(lambda z: M @ z + b, torch.zeros(8))
    assert solution.residual <= 1e-3 < solution.residuals[0] and solution.residual > 1e-8
    with pytest.raises(SolverError, match=r"\(tol 9\.5e-07\)"):  # float32 default, resolved
        solver_cls(max_iter=2)(lambda z: 0.9 * z + 1.0, torch.zeros(3, dtype=torch.float32))
    assert solver_cls().tol is None and solver_cls(tol=1e-3).tol == 1e-3  # frozen, unresolved


@pytest.mark.parametrize("solver_cls", [ForwardBackward, PeacemanRachford])
def test_splitting_solvers_share_the_default_tol_rule(solver_cls):
    # z = relu(W z + c), W = (1 − m) I − AᵀA (Eq. 3.3): monotone with m = 0.5
    A = 0.6 * torch.randn(12, 12) / 12**0.5
    W, c = 0.5 * torch.eye(12) - A.T @ A, torch.randn(12, 5)
    z_ref = solver_cls(tol=1e-13, max_iter=5000).solve(MonotoneOperator(W, 0.5), c).z
    for dtype in (torch.float64, torch.float32):
        op = MonotoneOperator(W.to(dtype), 0.5)
        solution = solver_cls().solve(op, c.to(dtype))
        tol = default_tol(dtype)
        assert solution.converged and solution.residual <= tol < min(solution.residuals[:-1])
        torch.testing.assert_close(solution.z.double(), z_ref, atol=100 * tol, rtol=0)
    with pytest.raises(SolverError, match=r"\(tol 9\.5e-07\)"):
        solver_cls(max_iter=1).solve(MonotoneOperator(W.float(), 0.5), c.float())


# ---- failure modes ----------------------------------------------------------------


def test_divergence_raises_with_solver_steps_residual_and_hint():
    with pytest.raises(
        SolverError,
        match=r"Picard diverged after \d+ steps: final rel residual .* Hint: .*contractive",
    ):
        Picard()(lambda z: 2.0 * z + 1.0, torch.zeros(3))


def test_non_finite_iterates_are_divergence():
    with pytest.raises(SolverError, match=r"Anderson diverged") as info:
        Anderson(damping=0.5)(lambda z: torch.exp(50.0 * (z + 1.0)), torch.zeros(2))
    assert info.value.solution.status is Status.DIVERGED
    assert math.isfinite(info.value.solution.residual)


def test_max_steps_error_carries_solution_and_context():
    R = rotation_blocks([1.0])
    with pytest.raises(SolverError, match=r"Picard max_steps after 20 steps") as info:
        Picard(max_iter=20)(lambda z: R @ z + 1.0, torch.zeros(2))
    err = info.value
    assert err.solution.n_steps == 20 and not err.solution.converged
    with pytest.raises(SolverError, match=r"Hint: ‖W‖₂ = 1.3 >= 1; raise max_iter"):
        raise err.with_context("‖W‖₂ = 1.3 >= 1")
    copy = pickle.loads(pickle.dumps(err))  # crosses process boundaries (Ray executors)
    assert str(copy) == str(err) and torch.equal(copy.solution.z, err.solution.z)
    assert repr(err.solution).startswith("Solution(status=max_steps, n_steps=20, residual=")


def test_f_output_shape_mismatch():
    with pytest.raises(
        ValueError, match=r"`f\(z0\)` must have the shape of `z0` \(3,\); got \(2,\)"
    ):
        Picard()(lambda z: z[:2], torch.zeros(3))


def test_non_finite_z0_and_f_output():
    with pytest.raises(ValueError, match=r"`z0` must be finite"):
        Anderson()(torch.tanh, torch.tensor([0.0, float("nan")]))
    with pytest.raises(ValueError, match=r"`f\(z0\)` must be finite; got 1 NaN/Inf"):
        Broyden()(lambda z: z / z, torch.tensor([0.0, 1.0]))


def test_bad_types():
    with pytest.raises(TypeError, match=r"`f` must be callable"):
        Picard()(3, torch.zeros(2))
    with pytest.raises(TypeError, match=r"`z0` must be a floating-point tensor"):
        Picard()(torch.tanh, torch.zeros(2, dtype=torch.long))
    with pytest.raises(TypeError, match=r"`f\(z0\)` must be a torch.Tensor; got list"):
        Picard()(lambda z: [0.0], torch.zeros(1))
    with pytest.raises(ValueError, match=r"batch dim 0 when per_sample=True"):
        Picard(per_sample=True)(torch.tanh, torch.tensor(0.0))


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"tol": 0.0}, ValueError, r"`tol` must be in \(0, inf\); got 0"),
        ({"tol": -1e-3}, ValueError, r"`tol` must be in \(0"),
        ({"tol": "1e-3"}, TypeError, r"`tol` must be a real number"),
        ({"max_iter": 0}, ValueError, r"`max_iter` must be >= 1; got 0"),
        ({"max_iter": 2.5}, TypeError, r"`max_iter` must be an int"),
        ({"stop": "max"}, ValueError, r"`stop` must be one of 'abs', 'rel'; got 'max'"),
        ({"per_sample": 1}, TypeError, r"`per_sample` must be a bool"),
        ({"divergence_factor": 1.0}, ValueError, r"`divergence_factor` must be in \(1"),
    ],
)
@pytest.mark.parametrize("solver_cls", SOLVERS)
def test_hyper_parameter_validation(solver_cls, options, error, match):
    with pytest.raises(error, match=match):
        solver_cls(**options)


@pytest.mark.parametrize(
    ("solver_cls", "options", "match"),
    [
        (Picard, {"damping": 0.0}, r"`damping` must be in \(0, 1\]"),
        (Anderson, {"damping": 1.5}, r"`damping` must be in \(0, 1\]"),
        (Anderson, {"history": 0}, r"`history` must be >= 1"),
        (Anderson, {"tikhonov": -1.0}, r"`tikhonov` must be in \[0"),
        (Broyden, {"memory": 0}, r"`memory` must be >= 1"),
    ],
)
def test_solver_specific_validation(solver_cls, options, match):
    with pytest.raises(ValueError, match=match):
        solver_cls(**options)


def test_registry():
    assert solver_names() == ["anderson", "broyden", "picard"]
    solver = get_solver("Anderson", tol=1e-9, history=3)
    assert solver == Anderson(tol=1e-9, history=3)
    with pytest.raises(
        ValueError, match=r"unknown solver 'newton'; valid names: 'anderson', 'broyden', 'picard'"
    ):
        get_solver("newton")
    with pytest.raises(
        TypeError, match=r"unknown option\(s\) 'history' for solver 'picard'; valid options: tol"
    ):
        get_solver("picard", history=3)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'tl'"):
        Picard(tl=1e-3)


def test_per_sample_steps_and_residuals_against_the_closed_form():
    # row i: z ↦ r_i z + 1 from 0 by Picard: z_k = (1 − r^k)/(1 − r), f(z_k) − z_k = r^k, so the
    # relative residual of iterate k is r^k (1 − r) / (1 − r^{k+1}); row i needs the first
    # k with it <= tol, i.e. k + 1 evaluations
    rates, tol = torch.tensor([0.1, 0.5, 0.8, 0.95]), 1e-6
    solution = Picard(tol=tol, max_iter=1000, per_sample=True)(
        lambda z: rates[:, None] * z + 1.0, torch.zeros(4, 3)
    )
    for i, r in enumerate(rates.tolist()):
        k = next(k for k in range(1000) if r**k * (1 - r) / (1 - r ** (k + 1)) <= tol)
        assert int(solution.sample_steps[i]) == k + 1
        want = r**k * (1 - r) / (1 - r ** (k + 1))  # the row's residual when it stopped improving
        assert float(solution.sample_residuals[i]) <= tol
        assert float(solution.sample_residuals[i]) <= want * (1 + 1e-9)
    assert solution.n_steps == int(solution.sample_steps.max())
    assert solution.evaluations == solution.n_steps  # no row compaction for a plain map
