"""Stall detection (issue 31) against a literal reference: a sample whose best residual,
extrapolated at its rate over its last ``stall_window`` evaluations, would miss the tolerance
at ``max_iter`` stops with its best iterate; one that falls fast enough is never stopped;
per-sample residual traces; every Solution's ``raise_if_failed``."""

import math

import pytest
import torch

from deqlab.solvers import Anderson, Picard, SolverError, Status
from deqlab.solvers.rows import RowMap

#: per-sample Picard rates of f(z) = a ⊙ z + x: fast, steady (0.8¹⁵⁰ ≈ 3e-15: reaches TOL
#: within CAP), and slow (0.97¹⁵⁰ ≈ 0.01: cannot, and stalls)
RATES = torch.tensor([0.3, 0.8, 0.97], dtype=torch.float64)
WINDOW, TOL, CAP = 5, 1e-8, 150


def linear(x: torch.Tensor) -> RowMap:
    return RowMap(lambda z: RATES[:, None] * z + x, lambda z, i: RATES[i, None] * z + x[i])


def reference(x: torch.Tensor, freeze: bool):
    """Picard from 0 by hand: each row's best iterate, best residual (abs), the evaluations
    until it converged or stalled, and whether it stalled. ``freeze``: a row that is done
    stops (row compaction), else it goes on improving its best iterate until the solve ends."""
    rows = x.shape[0]
    z = torch.zeros_like(x)
    best_z, best_r = z.clone(), torch.full((rows,), math.inf, dtype=torch.float64)
    history = [best_r.clone()]
    steps, done, stalled = torch.zeros(rows, dtype=torch.long), [False] * rows, [False] * rows
    evaluated = 0  # rows evaluated under row compaction: all while over half are active
    for k in range(CAP):
        active = rows - sum(done)
        evaluated += active if 2 * active <= rows else rows
        fz = RATES[:, None] * z + x
        r = (fz - z).norm(dim=1)
        for i in range(rows):
            if done[i]:
                if not freeze and r[i] < best_r[i]:
                    best_z[i], best_r[i] = z[i], r[i]
                continue
            steps[i] += 1
            if r[i] < best_r[i]:
                best_z[i], best_r[i] = z[i], r[i]
            if best_r[i] <= TOL:
                done[i] = True
            elif k >= WINDOW:  # extrapolated at the window's rate to the end of the budget
                rate = best_r[i] / history[k - WINDOW + 1][i]
                if best_r[i] * rate ** ((CAP - k - 1) / WINDOW) > TOL:
                    done[i] = stalled[i] = True
        history.append(best_r.clone())
        if all(done):
            break
        z = torch.where(torch.tensor(done)[:, None], z, fz) if freeze else fz
    return best_z, best_r, steps, torch.tensor(stalled), evaluated


@pytest.mark.parametrize("compaction", [True, False])
def test_a_slow_sample_stalls_and_keeps_its_best_iterate(compaction):
    x = torch.randn(3, 4, dtype=torch.float64)
    solver = Picard(tol=TOL, stop="abs", max_iter=CAP, per_sample=True, throw=False,
                    stall_window=WINDOW)  # fmt: skip
    with torch.no_grad():
        solution = solver(linear(x) if compaction else linear(x).f, torch.zeros_like(x))
    best_z, best_r, steps, stalled, evaluated = reference(x, freeze=compaction)
    assert stalled.tolist() == [False, False, True]  # the case could fail
    assert solution.status is Status.STALLED and solution.n_steps < CAP
    assert solution.sample_stalled.tolist() == (stalled & (best_r > TOL)).tolist()
    assert solution.sample_steps.tolist() == steps.tolist()
    torch.testing.assert_close(solution.sample_residuals, best_r, rtol=1e-12, atol=0)
    torch.testing.assert_close(solution.z, best_z, rtol=0, atol=0)
    if compaction:  # a stalled row is no longer evaluated
        assert solution.evaluations == evaluated / 3 < solution.n_steps


def test_steady_convergence_is_never_a_stall():
    x = torch.randn(2, 4, dtype=torch.float64)
    solver = Picard(tol=TOL, stop="abs", max_iter=CAP, per_sample=True, stall_window=WINDOW)
    rates = RATES[:2]
    solution = solver(lambda z: rates[:, None] * z + x, torch.zeros_like(x))
    assert solution.converged and not solution.sample_stalled.any()
    z_star = x / (1 - rates[:, None])
    torch.testing.assert_close(solution.z, z_star, atol=1e-7, rtol=0)


def test_a_map_without_a_fixed_point_stalls_with_anderson_too():
    # f(z) = z + 1: the absolute residual is 1 whatever z; Anderson falls back to plain steps
    solver = Anderson(tol=1e-6, stop="abs", max_iter=100, stall_window=4)
    with pytest.raises(SolverError, match=r"Anderson stalled after 5 steps.*stopped falling"):
        solver(lambda z: z + 1.0, torch.zeros(3, dtype=torch.float64))


def test_stall_options_are_validated():
    with pytest.raises(ValueError, match=r"`stall_window` must be >= 1; got 0"):
        Picard(stall_window=0)
    assert Picard().stall_window is None  # off by default: the papers' solves are unchanged


def test_per_sample_residual_traces_on_request():
    x = torch.randn(3, 4, dtype=torch.float64)
    solver = Picard(tol=1e-6, max_iter=12, per_sample=True, throw=False, trace_samples=True)
    solution = solver(lambda z: RATES[:, None] * z + x, torch.zeros_like(x))
    trace = solution.sample_trace
    assert trace["abs"].shape == trace["rel"].shape == (solution.n_steps, 3)
    z = torch.zeros_like(x)
    for k in range(solution.n_steps):  # Picard by hand: r_k = ‖f(z_k) − z_k‖ per row
        fz = RATES[:, None] * z + x
        torch.testing.assert_close(trace["abs"][k], (fz - z).norm(dim=1), rtol=1e-12, atol=0)
        relative = (fz - z).norm(dim=1) / (fz.norm(dim=1) + 1e-12)
        torch.testing.assert_close(trace["rel"][k], relative, rtol=1e-12, atol=0)
        z = fz
    assert Picard(max_iter=3, throw=False)(torch.cos, torch.zeros(2)).sample_trace is None


def test_every_solution_can_raise_if_failed():
    solution = Picard(max_iter=3, throw=False)(lambda z: 2 * z + 1, torch.zeros(2))
    with pytest.raises(SolverError, match=r"Picard max_steps after 3 steps.*Hint: forward"):
        solution.raise_if_failed("forward")
    converged = Picard()(lambda z: 0.5 * z + 1, torch.zeros(2, dtype=torch.float64))
    assert converged.raise_if_failed() is converged
