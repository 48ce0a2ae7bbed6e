"""Beyond memory (deqlab.verification.subsample): the seeded subsample, Cauchy interlacing
checked for each quantity against the full computation at sizes where both fit, and verify's
one-sided answers ("at least" widths) against the same data answered in full."""

from __future__ import annotations

import json

import pytest
import torch

from deqlab import ReLUDEQCheck
from deqlab.data import get_dataset
from deqlab.statements import Verdict
from deqlab.theory.kernels import least_eigenvalue, population_gram
from deqlab.theory.ntk import deq_ntk
from deqlab.verification import load_dataset, subsample, verify


def test_a_subsample_is_seeded_sorted_and_named():
    first, again = subsample.draw(1000, 50, seed=3), subsample.draw(1000, 50, seed=3)
    assert torch.equal(first.indices, again.indices) and first.size == 50
    assert bool((first.indices[1:] > first.indices[:-1]).all())
    assert not torch.equal(first.indices, subsample.draw(1000, 50, seed=4).indices)
    assert first.name == "S = 50 of the 1,000 points (seed 3)"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_interlacing_bounds_lambda_star_and_the_ntk_from_above(seed):
    X = get_dataset("sphere", n=400, d=10, seed=seed).X
    sample = subsample.draw(400, 120, seed)
    K, ntk = subsample.kernels(X[:, sample.indices], 0.08, sample)
    full_K = least_eigenvalue(population_gram(X, 0.08)).value
    full_ntk = least_eigenvalue(deq_ntk(X, 0.08)).value
    assert K.bracket.lower == 0.0 and full_K <= K.bracket.upper
    assert ntk.bracket.lower == 0.0 and full_ntk <= ntk.bracket.upper
    assert K.bracket.upper < 3 * full_K  # an upper bound, not a vacuous one
    assert "Cauchy interlacing" in K.bracket.upper_proof


def test_interlacing_bounds_lambda0_of_the_gram_of_z_from_above():
    Z = torch.randn(300, 200, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    full = float(torch.linalg.eigvalsh(Z.T @ Z)[0])
    for seed in range(3):
        S = subsample.draw(200, 60, seed).indices
        assert full <= float(torch.linalg.eigvalsh(Z[:, S].T @ Z[:, S])[0])
    assert subsample.rank_zero(100, 200).bracket.upper == 0.0  # m < n: 0 by rank


def _memory(monkeypatch, available: float, source: str = "the machine's MemAvailable") -> None:
    monkeypatch.setattr(subsample, "available_memory", lambda device=None: (int(available), source))


def test_the_size_is_the_largest_that_fits_or_none(monkeypatch):
    _memory(monkeypatch, 1e12)
    assert subsample.size_for(3000, 10, buffers=2, per_point=80) is None  # it all fits
    _memory(monkeypatch, subsample.HEADROOM + 50e6)
    size = subsample.size_for(3000, 10, buffers=2, per_point=80)
    assert subsample.LEAST <= size < 3000
    assert 2 * 8 * size**2 <= 50e6
    _memory(monkeypatch, subsample.HEADROOM + 1e5)
    assert (
        subsample.size_for(3000, 10, buffers=2, per_point=80) is None
    )  # not even LEAST points: refused


def test_past_memory_verify_answers_at_least_what_the_full_computation_does(monkeypatch):
    x, y, name = load_dataset("sphere", n=1200, d=20)
    check = ReLUDEQCheck(width=300)
    full = verify(x, y, check, name=name)
    limit = "this process's address-space limit, `ulimit -v` 1.2 GB, less the 0.9 GB mapped"
    _memory(monkeypatch, subsample.HEADROOM + 12e6, limit)  # K alone would take 11.5 MB
    part = verify(x, y, check, name=name)
    k, sample = part.numbers, part.numbers["subsample"]
    assert sample["why"] == (
        f"n = 1,200 needs 23 MB for K and its work array (2 n×n float64), 280 MB of memory is "
        f"available ({limit})"
    )
    assert 100 <= sample["size"] < 1200 and sample["seed"] == 0
    lower, upper = k["lambda_star_bounds"]
    assert lower == 0.0 and full.numbers["lambda_star"] <= upper
    for key in ("eq7", "eq8"):  # certified lower bounds of the widths Condition 1 needs
        assert k["required_width"][key] <= full.numbers["required_width"][key]
    assert k["theorem2_width"]["scale"] <= full.numbers["theorem2_width"]["scale"]
    assert k["eq9_limit"]["bound"] >= full.numbers["eq9_limit"]["bound"]
    assert k["residual_norm"] <= full.numbers["residual_norm"]
    assert k["X_fro"] == pytest.approx(full.numbers["X_fro"], rel=1e-12)  # over every point
    assert part.data["max_abs_cos_over"].startswith("the pairs of the subsample S (S = ")
    assert part.data["max_abs_cos"] <= full.data["max_abs_cos"]  # a lower bound of the maximum
    verdicts = {s.name: s.verdict for s in part.statements}
    assert verdicts["Theorem 3 (ii): λ* > 0 (K strictly positive definite)"] is (
        Verdict.NOT_MEASURED
    )
    assert verdicts["DEQ NTK: λ_min(NTK) ≥ λ*"] is Verdict.NOT_MEASURED
    assert part.answers[0].status == "cannot be decided"
    assert f"S = {sample['size']:,} of the 1,200 points (seed 0)" in part.answers[0].why


def test_one_sided_statements_keep_what_their_bound_decides():
    from deqlab.papers import LING

    sample = subsample.draw(1000, 100, 0)
    met = LING.hypothesis(
        "Theorem 2", name="Theorem 2's width m = Ω(n²/λ*² log(n/(λ*t))), its constant taken as 1",
        value=2.0, relation=">=", threshold=1.0, measured="m/scale = 2",
    )  # fmt: skip
    unmet = LING.hypothesis(
        "Condition 1", name="Condition 1, Eq. (7) at initialization", value=0.5, relation=">=",
        threshold=1.0, measured="0.5", needs="Eq. (7) alone: m ≥ 10⁶",
    )  # fmt: skip
    found = subsample.one_sided([met, unmet], sample)
    assert found[0].verdict is Verdict.NOT_MEASURED and "lower bound" in found[0].detail
    assert found[1].verdict is Verdict.UNMET
    assert found[1].needs == f"at least, from {sample.name}: Eq. (7) alone: m ≥ 10⁶"


def test_past_memory_a_width_sweep_answers_from_s_what_the_full_sweep_finds(monkeypatch):
    """Below n, λ_0 = 0 by rank and every margin is 0 exactly: the rows are those of the
    sweep on all the data; λ* comes as [0, an upper bound]; S is named."""
    from typer.testing import CliRunner

    from deqlab.cli import app

    args = ["verify", "--dataset", "sphere", "--n", "600", "--d", "10", "--width", "50,100"]
    full = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    _memory(monkeypatch, subsample.HEADROOM + 3e6)  # K alone would take 2.9 MB
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    part = json.loads(result.stdout)
    assert "subsample" not in full and 100 <= part["subsample"]["size"] < 600
    assert part["rows"] == full["rows"] and part["holds_from"] == full["holds_from"]
    assert all(r["lambda0"] == 0 and r["eq7"] == r["eq8"] == r["eq9"] == 0 for r in part["rows"])
    lower, upper = part["lambda_star_bounds"]
    assert lower == 0.0 and full["lambda_star"] <= upper == part["lambda_star"]
    text = CliRunner().invoke(app, args).stdout.splitlines()
    assert text[1].startswith("beyond memory: n = 600 needs 5.76 MB for K and its work array")
    assert "the sweep comes from the subsample S = " in text[1] and "(seed 0)" in text[1]
    assert text[2].startswith("width sweep, K computed once: λ* ∈ [0, ")


@pytest.mark.parametrize("width", [600, 700])
def test_past_memory_a_width_at_or_above_n_is_refused_in_one_line(monkeypatch, width):
    """At m ≥ n, λ_0 = λ_min(Z(0)ᵀZ(0)) is not 0 by rank: a subsample would bound it from
    above only, and the margins of Condition 1 with it; refused, naming what fits."""
    x, y, name = load_dataset("sphere", n=600, d=10)
    _memory(monkeypatch, subsample.HEADROOM + 3e6)
    with pytest.raises(ValueError, match=r"^`width`: K of n = 600 points does not fit in me") as e:
        verify(x, y, ReLUDEQCheck(width=width), name=name)
    assert str(e.value).endswith(f"at m = {width} ≥ n, λ_0 would need Z(0)ᵀZ(0) on every "
                                 "point (n×n): give a width below 600")  # fmt: skip
