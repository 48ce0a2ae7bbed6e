"""The Python API ``deqlab.verify``: the same statements as the modules, one JSON
document, argument checks, progress, training and the HTML page."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace

import numpy as np
import pytest

from deqlab._memory import MemoryRefusal
from deqlab.cli.app import _finite
from deqlab.papers.hieu2022.mondeq import step_size_bound
from deqlab.statements import Statement, Verdict
from deqlab.verification import (
    DELMCheck,
    InputError,
    MonDEQCheck,
    ReLUDEQCheck,
    Verification,
    load_dataset,
    verify,
)
from deqlab.verification.checks import CHECKS, Check, check_for
from deqlab.verification.flow import _unique
from deqlab.verification.memory import Square, check_memory


@pytest.fixture(scope="module")
def sphere():
    x, y, name = load_dataset("sphere", n=8, d=6, seed=0)
    return x, y, name


@pytest.fixture(scope="module")
def result(sphere):
    x, y, name = sphere
    return verify(x, y, ReLUDEQCheck(width=80), name=name)


def test_verify_returns_statements_numbers_and_a_json_document(result):
    assert isinstance(result, Verification) and result.model == "relu-deq"
    doc = json.loads(json.dumps(_finite(result.as_dict()), allow_nan=False))
    assert doc["data"]["n"] == 8 and doc["data"]["d"] == 6 and doc["settings"]["width"] == 80
    assert doc["training"] is None and doc["verdict_sentence"] == result.counts.sentence()
    back = [Statement.from_dict(s) for s in doc["statements"]]
    assert [s.name for s in back] == [s.name for s in result.statements]
    assert {"kind", "citation", "measured", "expected", "margin", "verdict"} <= set(
        doc["statements"][0]
    )
    assert len({s.name for s in result.statements}) == len(result.statements)


def test_numpy_lists_and_torch_give_the_same_numbers(sphere, result):
    x, y, name = sphere
    again = verify(x.numpy().tolist(), y.numpy(), ReLUDEQCheck(width=80), name=name)
    assert again.numbers["lambda_star"] == result.numbers["lambda_star"]
    assert again.numbers["lambda0"] == result.numbers["lambda0"]


def test_progress_is_reported_in_stages(sphere):
    x, y, _ = sphere
    seen = []
    verify(
        x,
        y,
        ReLUDEQCheck(width=20),
        progress=lambda what, done, total: seen.append((what, done, total)),
    )
    assert seen[0][1] == 0 and all(done <= total for _, done, total in seen) and len(seen) >= 4


def test_every_model_and_training(sphere):
    x, y, _ = sphere
    relu = verify(x, y, ReLUDEQCheck(width=40), train=3)
    assert not relu.numbers["condition1"]["holds"]  # so the stand-in step, and it says so
    assert relu.training["steps"] == 3 and relu.training["eta"] == pytest.approx(
        1 / relu.numbers["curvature"]
    )
    assert relu.training["eta_source"].startswith("the stand-in 1/λ_max(H(0)) (ours)")
    mon = verify(x, y, MonDEQCheck(width=16), train=2)
    assert mon.training["eta"] == pytest.approx(mon.numbers["eta_max"])
    assert mon.training["eta_source"] == "the theorem's: Theorem 3.3.5's η_max"
    assert mon.numbers["fit_widths"] == [32, 48, 64]  # from 4N = 32
    delm = verify(x, y, "delm", train=2, eta=1e-4)
    assert delm.training["loss0"] > 0 and "steps_to_epsilon" in delm.training
    assert delm.settings["width"] == 6 and delm.training["eta"] == 1e-4
    names = [s.name for s in delm.statements]
    assert names.count("Theorem 1: λ_min(D_t) ≥ 1/(m(1+γ)²) at every step") == 1
    assert (
        "over 1 run" in next(s for s in delm.statements if s.name.startswith("Theorem 1")).measured
    )


def test_normalize_makes_assumption2_hold(sphere):
    x, y, _ = sphere
    scaled = verify(3 * x, y, ReLUDEQCheck(width=20))
    norms = "Assumption 2 (i): ‖x_i‖ = √d"
    assert {s.name: s.verdict.value for s in scaled.statements}[norms] == "UNMET"
    fixed = verify(3 * x, y, ReLUDEQCheck(width=20), normalize=True)
    assert {s.name: s.verdict.value for s in fixed.statements}[norms] == "HOLDS"
    assert fixed.data["normalized"] is True


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: verify([[1.0]], [1.0], "resnet"), ValueError, "`model` must be one of"),
        (lambda: ReLUDEQCheck(width=0), ValueError, "`width` must be >= 1"),
        (lambda: ReLUDEQCheck(width=2.5), TypeError, "`width` must be an int"),
        (lambda: ReLUDEQCheck(width=10**12), ValueError, "`width` must be <= 100000 (W alone"),
        (lambda: MonDEQCheck(width=10**12), ValueError, "`width` must be <= 100000"),
        (lambda: ReLUDEQCheck(sigma_w2=1.0), ValueError, "`sigma_w2` must be in (0, 1)"),
        (lambda: DELMCheck(gamma=1.0), ValueError, "`gamma` must be in (0, 1)"),
        (lambda: DELMCheck(loss="hinge"), ValueError, "`loss` must be one of"),
    ],
)
def test_bad_settings_name_themselves(make, error, message):
    with pytest.raises(error) as err:
        make()
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"train": -1}, ValueError, "`train` must be >= 0"),
        ({"eta": 0.0}, ValueError, "`eta` must be in (0, inf)"),
        ({"model": MonDEQCheck(width=4), "train": 1}, ValueError, "width ≥ N = 8"),
    ],
)
def test_bad_arguments_name_themselves(sphere, kwargs, error, message):
    x, y, _ = sphere
    with pytest.raises(error) as err:
        verify(x, y, **kwargs)
    assert message in str(err.value)


def test_one_answer_per_theorem_and_theorem2_is_never_a_fail(result):
    lines = [a.line() for a in result.answers]
    assert [a.theorem.split(": ")[0] for a in result.answers] == [
        "Ling et al. 2023, Theorem 3 (ii)",
        "Ling et al. 2023, Theorem 2",
        "Ling et al. 2023, Theorem 1",
    ]
    assert result.answers[1].status == "cannot be decided" and "Ω(" in lines[1]
    theorem2 = next(s for s in result.statements if s.name == "Theorem 2: λ_0 ≥ mλ*/2")
    assert theorem2.verdict.value in ("PASS", "NOT APPLICABLE")
    assert result.answers[2].status in (
        "applies at this width",
        "can apply at a larger width",
        "applies at no width",
    )


def test_the_width_needed_is_one_number_and_the_statements_say_the_same(result):
    width = result.numbers["required_width"]["condition1"]
    assert result.answers[2].width == width or result.answers[2].status == "applies at this width"
    needs = [s.needs for s in result.statements if s.name.startswith("Condition 1, Eq.")]
    assert all("Condition 1 (one δ): m ≥" in n for n in needs if n)


def test_stand_ins_from_the_curvature_and_the_pl_ratio(sphere):
    x, y, _ = sphere
    trained = verify(x, y, ReLUDEQCheck(width=40), train=3, eta=1e-3, target_loss=1e-6)
    s, k = trained.stand_ins, trained.numbers
    assert s.eta == pytest.approx(1 / k["curvature"]) and 0 < s.pl_ratio <= k["curvature"]
    assert s.rate_predicted == pytest.approx(1 - s.pl_ratio / k["curvature"])
    assert s.rate_worst == pytest.approx(1 - k["H_lambda_min0"] / k["curvature"])
    assert s.rate_worst >= s.rate_predicted  # μ ≥ λ_min(H) (Eq. 4)
    assert s.rate_measured == pytest.approx(trained.training["rate_measured"])
    loss0 = k["loss0"]
    assert s.steps_measured_rate == pytest.approx(
        math.log(1e-6 / loss0) / math.log(s.rate_measured)
    )
    assert all(line.startswith("ours: ") for line in s.lines())


def test_to_frame_and_the_jupyter_representations(result):
    frame = result.to_frame()
    assert list(frame["name"]) == [s.name for s in result.statements]
    assert list(frame["verdict"]) == [s.verdict.value for s in result.statements]
    png = result._repr_png_()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    html = result._repr_html_()
    assert html.startswith("<!DOCTYPE html>") and "data:image/png;base64," in html
    assert "Does each theorem apply?" in html and "cannot be decided" in html


def test_bad_data_is_an_input_error(sphere):
    x, y, _ = sphere
    with pytest.raises(InputError, match="identical"):
        verify(np.vstack([x, x[:1]]), np.append(y, 0.0))


def test_unique_keeps_the_last_measurement_in_first_order(result):
    a, b = result.statements[:2]
    newer = Statement(a.name, a.kind, a.source, a.verdict, "newer", a.expected)
    assert [s.measured for s in _unique([a, b, newer])] == ["newer", b.measured]


def test_write_html_embeds_the_figures(tmp_path, sphere):
    x, y, _ = sphere
    page = verify(x, y, ReLUDEQCheck(width=40), train=2).write_html(tmp_path / "page")
    html = page.read_text(encoding="utf-8")
    assert page.name == "index.html" and "data:image/png;base64," in html
    assert (tmp_path / "page" / "figures" / "condition1_width.png").is_file()
    assert (tmp_path / "page" / "figures" / "training.png").is_file()
    assert "statements-hypotheses" in html and "Numbers" in html


def test_infinite_widths_survive_the_json_document(result):
    doc = _finite(result.as_dict())
    assert math.isinf(result.numbers["required_width"]["eq9"])
    assert doc["numbers"]["required_width"]["eq9"] == "inf"


def test_each_model_is_a_check_and_its_memory_need_is_refused_by_one_rule():
    """The three model dataclasses implement the one Check protocol (no type switch decides
    what they need): check_memory refuses any Square that does not fit, naming it."""
    assert all(isinstance(cls(), Check) for cls in CHECKS.values())
    assert check_for("delm") == DELMCheck() and check_for(MonDEQCheck(width=8)).width == 8

    class Huge(DELMCheck):
        def memory_need(self, n, d, *, train, device):
            return [Square("a test's n×n arrays", 1e6, 0)]

    with pytest.raises(MemoryRefusal, match=r"`X`: .*a test's n×n arrays"):
        check_memory(Huge(), 10**6, 3, train=0, subject="`X`")


@dataclass(frozen=True)
class _WideMonDEQ(MonDEQCheck):
    """The monotone DEQ with λ_0's bracket up to 100 λ_0: η_max (4/λ_0² there) differs
    between its corners."""

    def initialize(self, inputs, seed, progress, device="cpu"):
        init = super().initialize(inputs, seed, progress, device)
        lam = init.lambda0_bracket
        return replace(init, lambda0_bracket=replace(lam, upper=100 * lam.upper, at_floor=True))


def _step_size(found) -> Statement:
    return next(s for s in found.statements if s.name.startswith("η within the step-size bound"))


def test_training_statements_are_settled_at_the_corners_and_eta_from_the_least_bound():
    """The training's statements were computed at the estimates only and replaced the
    settled ones of the same name: η = η_max(λ_0 estimate) was 'within the bound' though the
    bound is smaller at a corner; the default η is now the least bound over the corners."""
    x, y, name = load_dataset("sphere", n=6, d=4, seed=2)
    check = _WideMonDEQ(width=24, monotonicity=0.2)
    found = verify(x, y, check, name=name, train=2)
    init, lam = found.initial, found.initial.lambda0_bracket
    ends = [step_size_bound(init.at({"lambda0": v}).constants) for v in (lam.lower, lam.upper)]
    assert ends[1] < ends[0] / 10
    assert found.training["eta"] == ends[1]
    assert "its least over the certified brackets" in found.training["eta_source"]
    assert _step_size(found).verdict is Verdict.HOLDS
    estimate = step_size_bound(init.constants)
    given = verify(x, y, check, name=name, train=2, eta=estimate)
    assert _step_size(given).verdict is Verdict.NOT_MEASURED  # HOLDS at one corner only
    assert any(
        line.startswith("η within the step-size bound") for line in given.numbers["undecided"]
    )
