"""A DEQ layer's unconverged solves: best iterate per sample, records, counts, one warning,
a gradient marked not exact; strict mode raises; fixed_point keeps the solvers' throw."""

import inspect
import math
import runpy
import warnings

import pytest
import torch

from deqlab import (
    DEQ,
    Anderson,
    ConvergenceWarning,
    FixedPointStats,
    Implicit,
    Picard,
    SolverError,
    fixed_point,
)

TOL, STEPS = 1e-3, 30
#: per-sample gain of the linear cell: converges, expands (never converges), converges slowly
SCALES = torch.tensor([0.5, 1.3, 0.9], dtype=torch.float64)


def rotation(angle: float) -> torch.Tensor:
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, -s], [s, c]], dtype=torch.float64)


class ScaledRotation(torch.nn.Module):
    """``f(z, (x, s))_i = s_i R z_i + x_i + b`` per sample ``i`` (``b`` a parameter)."""

    def __init__(self) -> None:
        super().__init__()
        self.b = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
        self.R = rotation(1.0)

    def forward(self, z: torch.Tensor, inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, scales = inputs
        return scales[:, None] * (z @ self.R.T) + x + self.b

    def initial_state(self, inputs):
        return torch.zeros_like(inputs[0])


def picard_reference(cell, x, freeze=True):
    """Plain Picard from 0 for STEPS evaluations: each sample's best iterate, its relative
    residual and the evaluations it needed to meet TOL (STEPS if never). ``freeze``: a
    sample that met TOL stops (row compaction), else it goes on improving."""
    z = torch.zeros_like(x[0])
    best_z, best_r = z.clone(), torch.full((3,), math.inf, dtype=torch.float64)
    steps = torch.full((3,), STEPS)
    for k in range(STEPS):
        fz = cell(z, x).detach()
        r = (fz - z).norm(dim=1) / fz.norm(dim=1)
        better = (r < best_r) & ((best_r > TOL) | (not freeze))
        best_z[better], best_r[better] = z[better], r[better]
        steps[(best_r <= TOL) & (steps == STEPS)] = k + 1
        z = fz
    return best_z, best_r, steps


def failing_layer(**options):
    solver = Picard(tol=TOL, max_iter=STEPS, per_sample=True)
    return DEQ(ScaledRotation(), solver=solver, **{"backward": Implicit(), **options})


def test_unconverged_forward_returns_each_samples_best_iterate_and_records_it():
    deq = failing_layer()
    x = torch.randn(3, 2, dtype=torch.float64)
    with pytest.warns(ConvergenceWarning, match=r"forward solve did not converge.*2 of 3 samples"):
        z = deq((x, SCALES))
    best_z, best_r, steps = picard_reference(deq.cell, (x, SCALES))
    forward = deq.last_forward
    assert not forward.converged and forward.n_steps == STEPS
    torch.testing.assert_close(z.detach(), best_z, atol=0, rtol=0)
    torch.testing.assert_close(forward.sample_residuals, best_r, atol=1e-15, rtol=1e-12)
    assert forward.sample_steps.tolist() == steps.tolist()
    assert steps[0] < STEPS and steps[1:].tolist() == [STEPS, STEPS]  # the case could fail
    assert (deq.stats.forward_solves, deq.stats.unconverged_forward) == (1, 1)


def test_without_row_compaction_every_sample_iterates_to_the_end():
    deq = failing_layer(row_compaction=False, on_failure="record")
    x = torch.randn(3, 2, dtype=torch.float64)
    z = deq((x, SCALES))
    best_z, best_r, _ = picard_reference(deq.cell, (x, SCALES), freeze=False)
    torch.testing.assert_close(z.detach(), best_z, atol=0, rtol=0)
    torch.testing.assert_close(deq.last_forward.sample_residuals, best_r, atol=1e-15, rtol=1e-12)
    assert deq.stats.forward_evaluations == STEPS


def test_row_compaction_evaluates_only_the_pending_samples():
    # three fast samples and one that never converges: once at most half of the samples are
    # pending, only those are evaluated (before, all, with the done ones put back)
    cell, rows = ScaledRotation(), []
    forward = cell.forward
    cell.forward = lambda z, inputs: rows.append(z.shape[0]) or forward(z, inputs)
    deq = DEQ(cell, solver=Picard(tol=TOL, max_iter=STEPS, per_sample=True), on_failure="record")
    scales = torch.tensor([0.5, 0.3, 0.4, 1.3], dtype=torch.float64)
    with torch.no_grad():
        deq((torch.randn(4, 2, dtype=torch.float64), scales))
    solution = deq.last_forward
    assert rows[0] == 4 and rows[-1] == 1 and set(rows) <= {4, 2, 1}  # never 3: over half
    assert sum(rows) == 4 * solution.evaluations < 4 * solution.n_steps
    assert solution.sample_steps[:3].max() < STEPS == solution.sample_steps[3]


def test_warns_at_growing_intervals_with_the_counts_so_far():
    deq, x = failing_layer(), torch.randn(3, 2, dtype=torch.float64)
    warned_at = []
    for solve in range(1, 10):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            deq((x, SCALES))
        if caught:
            warned_at.append(solve)
            text = str(caught[0].message)
    assert warned_at == [1, 2, 4, 8]  # the 1st, 2nd, 4th, 8th failure: never silent, not noisy
    assert "have failed 8 times" in text and "the next warning at 16" in text
    assert "8 forward solves: 0 converged, 8 at max_iter; 16 of 24" in text  # nonzero counts
    assert "16 of 24 samples unconverged" in text  # samples 1 and 2 of each solve
    assert deq.stats.unconverged_forward == 9
    with pytest.warns(ConvergenceWarning):  # another layer warns on its own
        failing_layer()((x, SCALES))


def test_the_advice_fits_the_solver_and_the_failure():
    x = torch.randn(3, 2, dtype=torch.float64)
    with pytest.warns(
        ConvergenceWarning, match=r"What to try: a larger max_iter \(now 30\); Anderson"
    ):
        failing_layer()((x, SCALES))  # Picard at its cap
    anderson = DEQ(ScaledRotation(), solver=Anderson(tol=TOL, max_iter=2, per_sample=True))
    with pytest.warns(ConvergenceWarning, match=r"a larger max_iter \(now 2\)") as caught:
        anderson((x, SCALES))
    assert "Anderson or Broyden" not in str(caught[0].message)  # it is on Anderson already
    # f(z) = z + x has no fixed point: the absolute residual ‖x‖ never falls
    stalling = Anderson(tol=TOL, stop="abs", max_iter=STEPS, per_sample=True, stall_window=3)
    with pytest.warns(ConvergenceWarning, match=r"stalled after 4 steps.*What to try: Jacob"):
        DEQ(lambda z, x: z + x, solver=stalling)(x)


def test_gradient_from_an_unconverged_point_is_marked_not_exact():
    deq, x = failing_layer(), torch.randn(3, 2, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        deq((x, SCALES)).sum().backward()
    record = deq.last_backward
    assert record.method == "implicit" and not record.exact
    assert "forward solve did not converge" in record.reason
    assert deq.stats.inexact_gradients == 1 and deq.stats.backward_passes == 1


def test_converged_solves_give_an_exact_gradient():
    deq = DEQ(
        ScaledRotation(),
        solver=Anderson(tol=1e-12, max_iter=100, per_sample=True),
        backward=Implicit(),
    )
    contractive = torch.tensor([0.5, 0.8, 0.9], dtype=torch.float64)
    deq((torch.randn(3, 2, dtype=torch.float64), contractive)).sum().backward()
    assert deq.last_forward.converged and deq.last_backward.exact
    assert deq.last_backward.reason == "" and deq.stats.inexact_gradients == 0


def adjoint_failure(on_failure):
    """Anderson solves the non-contractive map's fixed point; Picard cannot solve its
    adjoint (the rotation by 2 rad of gain 1: |eigenvalues| = 1)."""
    R = rotation(2.0)
    b = torch.ones(2, dtype=torch.float64, requires_grad=True)
    stats = FixedPointStats()
    z = fixed_point(
        lambda z: R @ z + b,
        torch.zeros(2, dtype=torch.float64),
        solver=Anderson(tol=1e-12, stop="abs", max_iter=200),
        backward=Implicit(solver=Picard(max_iter=40)),
        stats=stats,
        on_failure=on_failure,
    )
    return z, b, stats


def test_unconverged_adjoint_returns_its_best_iterate_warned_once():
    z, b, stats = adjoint_failure("warn")
    with pytest.warns(ConvergenceWarning, match=r"adjoint solve did not converge"):
        z.sum().backward()
    adjoint = stats.backward
    assert not adjoint.converged and adjoint.n_steps == 40
    torch.testing.assert_close(b.grad, adjoint.z)  # ∂(1ᵀz)/∂b = u, the best adjoint iterate
    assert adjoint.residual == min(adjoint.residuals)
    assert not stats.gradient.exact and "adjoint solve did not converge" in stats.gradient.reason
    assert stats.unconverged_backward == 1 and stats.unconverged_forward == 0


def test_strict_mode_raises_in_the_forward_and_the_adjoint():
    x = torch.randn(3, 2, dtype=torch.float64)
    with pytest.raises(SolverError, match=r"Picard max_steps after 30 steps.*forward solve"):
        failing_layer(on_failure="raise")((x, SCALES))
    z, _, _ = adjoint_failure("raise")
    with pytest.raises(SolverError, match=r"Picard max_steps after 40 steps.*adjoint solve"):
        z.sum().backward()


def test_record_mode_counts_without_warning():
    deq, x = failing_layer(on_failure="record"), torch.randn(3, 2, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        deq((x, SCALES))
    assert deq.stats.unconverged_forward == 1 and not deq.last_forward.converged


def test_fixed_point_keeps_each_solvers_throw_by_default():
    R = 1.3 * rotation(1.0)
    with pytest.raises(SolverError):
        fixed_point(lambda z: R @ z + 1.0, torch.zeros(2, dtype=torch.float64), solver=Picard())
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        quiet = Picard(max_iter=20, throw=False)
        fixed_point(lambda z: R @ z + 1.0, torch.zeros(2, dtype=torch.float64), solver=quiet)


def test_counts_and_reset():
    deq, x = failing_layer(on_failure="record"), torch.randn(3, 2, dtype=torch.float64)
    deq((x, SCALES)).sum().backward()
    counts = deq.stats.counts()
    assert counts["forward_solves"] == 1
    assert counts["forward_evaluations"] == deq.last_forward.evaluations == STEPS
    assert counts["backward_passes"] == 1 and counts["backward_vjps"] == deq.last_backward.vjps
    deq.stats.reset_counts()
    assert set(deq.stats.counts().values()) == {0} and deq.last_forward is not None


def test_bad_on_failure():
    with pytest.raises(ValueError, match=r"`on_failure` must be one of 'warn', 'raise', 'record'"):
        DEQ(ScaledRotation(), on_failure="ignore")
    with pytest.raises(ValueError, match=r"`on_failure` must be one of"):
        fixed_point(torch.tanh, torch.zeros(2), on_failure=True)


def test_a_batchnorm_cell_is_solved_as_one_problem():
    # batch statistics couple the samples: no per-sample solve, no compaction
    inner = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3), torch.nn.Tanh())
    deq = DEQ(CellWithBatchNorm(inner.double()), on_failure="record")
    x = torch.randn(8, 3, dtype=torch.float64)
    deq(x)
    assert deq.last_forward.sample_residuals.shape == (1,)
    plain = DEQ(lambda z, x: 0.5 * inner(z) + x, on_failure="record")  # not inspected
    plain(x)
    assert plain.last_forward.sample_residuals.shape == (8,)
    inner.eval()  # running statistics: each sample alone again
    deq(x)
    assert deq.last_forward.sample_residuals.shape == (8,)


class CellWithBatchNorm(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, z, x):
        return 0.5 * self.inner(z) + x


def test_the_warning_points_at_the_users_line_also_in_a_folder_named_deqlab(tmp_path):
    """A user's clone ``~/deqlab/`` holds the user's scripts: only deqlab's and torch's own
    files are skipped when the warning looks for the user's line."""
    script = tmp_path / "deqlab" / "train.py"
    script.parent.mkdir()
    script.write_text(
        "import torch\n"
        "from deqlab import DEQ, Picard\n"
        "deq = DEQ(lambda z, x: 0.99 * z + x, solver=Picard(tol=1e-9, max_iter=3))\n"
        "deq(torch.ones(2, 3, dtype=torch.float64))\n"
    )
    with pytest.warns(ConvergenceWarning) as caught:
        runpy.run_path(str(script))
    assert (caught[0].filename, caught[0].lineno) == (str(script), 4)
    with pytest.warns(ConvergenceWarning) as caught:
        line = inspect.currentframe().f_lineno + 1
        failing_layer()((torch.randn(3, 2, dtype=torch.float64), SCALES))
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)
