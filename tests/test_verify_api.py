"""The Python API ``deqlab.verify.verify``: the same statements as the modules, one JSON
document, argument checks, progress, training and the HTML page."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from deqlab.cli.app import _finite
from deqlab.statements import Statement
from deqlab.verify import InputError, Verification, load_dataset, verify
from deqlab.verify.api import _unique


@pytest.fixture(scope="module")
def sphere():
    x, y, name = load_dataset("sphere", n=8, d=6, seed=0)
    return x, y, name


@pytest.fixture(scope="module")
def result(sphere):
    x, y, name = sphere
    return verify(x, y, width=80, name=name)


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
    again = verify(x.numpy().tolist(), y.numpy(), width=80, name=name)
    assert again.numbers["lambda_star"] == result.numbers["lambda_star"]
    assert again.numbers["lambda0"] == result.numbers["lambda0"]


def test_progress_is_reported_in_stages(sphere):
    x, y, _ = sphere
    seen = []
    verify(x, y, width=20, progress=lambda what, done, total: seen.append((what, done, total)))
    assert seen[0][1] == 0 and all(done <= total for _, done, total in seen) and len(seen) >= 4


def test_every_model_and_training(sphere):
    x, y, _ = sphere
    relu = verify(x, y, width=40, train=3)
    assert relu.training["steps"] == 3 and relu.training["eta"] == pytest.approx(
        0.5 * relu.numbers["eq10_bound"]
    )
    mon = verify(x, y, "mondeq", width=16, train=2)
    assert mon.training["eta"] == pytest.approx(mon.numbers["eta_max"])
    assert mon.numbers["fit_widths"] == [8, 16, 32]
    delm = verify(x, y, "delm", train=2, eta=1e-4)
    assert delm.settings["width"] == 6 and delm.training["eta"] == 1e-4
    names = [s.name for s in delm.statements]
    assert names.count("Theorem 1: λ_min(D_t) ≥ 1/(m(1+γ)²) at every step") == 1
    assert "over 1 run" in next(s for s in delm.statements if s.name.startswith("Theorem 1"))\
        .measured  # fmt: skip


def test_normalize_makes_assumption2_hold(sphere):
    x, y, _ = sphere
    scaled = verify(3 * x, y, width=20)
    norms = "Assumption 2 (i): ‖x_i‖ = √d"
    assert {s.name: s.verdict.value for s in scaled.statements}[norms] == "UNMET"
    fixed = verify(3 * x, y, width=20, normalize=True)
    assert {s.name: s.verdict.value for s in fixed.statements}[norms] == "HOLDS"
    assert fixed.data["normalized"] is True


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"model": "resnet"}, ValueError, "`model` must be one of"),
        ({"width": 0}, ValueError, "`width` must be >= 1"),
        ({"width": 2.5}, TypeError, "`width` must be an int"),
        ({"sigma_w2": 1.0}, ValueError, "`sigma_w2` must be in (0, 1)"),
        ({"gamma": 1.0}, ValueError, "`gamma` must be in (0, 1)"),
        ({"train": -1}, ValueError, "`train` must be >= 0"),
        ({"eta": 0.0}, ValueError, "`eta` must be in (0, inf)"),
        ({"model": "delm", "width": 7}, ValueError, "`width` of the DELM is d = 6"),
        ({"model": "mondeq", "width": 4, "train": 1}, ValueError, "width ≥ N = 8"),
    ],
)
def test_bad_arguments_name_themselves(sphere, kwargs, error, message):
    x, y, _ = sphere
    with pytest.raises(error) as err:
        verify(x, y, **kwargs)
    assert message in str(err.value)


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
    page = verify(x, y, width=40, train=2).write_html(tmp_path / "page")
    html = page.read_text(encoding="utf-8")
    assert page.name == "index.html" and "data:image/png;base64," in html
    assert (tmp_path / "page" / "figures" / "condition1_width.png").is_file()
    assert (tmp_path / "page" / "figures" / "training.png").is_file()
    assert "statements-hypotheses" in html and "Numbers" in html


def test_infinite_widths_survive_the_json_document(result):
    doc = _finite(result.as_dict())
    assert math.isinf(result.numbers["required_width"]["eq9"])
    assert doc["numbers"]["required_width"]["eq9"] == "inf"
