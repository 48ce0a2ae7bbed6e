"""``deqlab verify`` on the command line: the acceptance JSON, the table, the page, and
every bad input as one ``error:`` line with exit code 2."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import deqlab.cli.verify  # noqa: F401  (registers the command until app.py imports it)
from deqlab.cli import app

runner = CliRunner()
SMALL = ("--dataset", "sphere", "--n", "40", "--d", "40", "--width", "400")
TINY = ("--dataset", "sphere", "--n", "6", "--d", "4")


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def parsed(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_acceptance_json_holds_every_number_the_issue_names():
    doc = parsed(invoke("verify", *SMALL, "--json"))
    k = doc["numbers"]
    for key in (
        "lambda_star",
        "lambda0",
        "lambda0_theorem2",
        "eq10_bound",
        "condition_number_K",
        "ntk_lambda_min",
        "rate_at_bound",
    ):
        assert isinstance(k[key], float), key
    for eq in ("eq7", "eq8", "eq9"):
        assert {"lhs", "rhs", "margin"} <= set(k["condition1"][eq])
    assert set(k["required_width"]) == {"condition1", "eq7", "eq8", "eq9", "scaling", "what"}
    assert k["theorem2_width"]["constant"] is None and k["theorem2_width"]["scale"] > 0
    assert doc["data"] == {**doc["data"], "n": 40, "d": 40, "normalized": False}
    kinds = {s["kind"] for s in doc["statements"]}
    assert kinds == {"hypothesis", "theorem", "ours"} and doc["page"] is None
    assert all(
        {"source", "measured", "expected", "margin", "verdict"} - {"source"} <= set(s)
        for s in doc["statements"]
    )


def test_table_output_shows_numbers_statements_and_verdicts():
    result = runner.invoke(app, ["verify", *SMALL], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for text in ("λ* = λ_min(K)", "Statements", "Theorem 2", "Condition 1, Eq. (7)", "verdicts:"):
        assert text in result.stdout, text


def test_out_writes_the_page_for_every_model(tmp_path):
    for model, figure in (("relu-deq", "training"), ("mondeq", "training"), ("delm", "corollary1")):
        out = tmp_path / model
        width = () if model == "delm" else ("--width", "12")  # the DELM's width is d
        args = (*TINY, *width, "--model", model, "--train", "2", "--out", out, "--json")
        doc = parsed(invoke("verify", *args))
        assert doc["page"] == str(out / "index.html") and doc["training"]["steps"] == 2
        assert (out / "figures" / f"{figure}.png").is_file(), model


def test_input_files_and_label_columns(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((10, 3)), rng.standard_normal(10)
    np.savetxt(
        tmp_path / "d.csv",
        np.column_stack([y, x]),
        delimiter=",",
        header="target,a,b,c",
        comments="",
    )
    doc = parsed(invoke("verify", "--input", tmp_path / "d.csv", "--width", "30", "--json"))
    assert doc["data"]["n"] == 10 and doc["data"]["d"] == 3
    verdicts = {s["name"]: s["verdict"] for s in doc["statements"]}
    assert verdicts["Assumption 2 (i): ‖x_i‖ = √d"] == "UNMET"
    doc = parsed(
        invoke("verify", "--input", tmp_path / "d.csv", "--normalize", "--width", "30", "--json")
    )
    assert {s["name"]: s["verdict"] for s in doc["statements"]}[
        "Assumption 2 (i): ‖x_i‖ = √d"
    ] == "HOLDS"


def _file(tmp_path, name: str, x, y) -> str:
    path = tmp_path / name
    if name.endswith(".npz"):
        np.savez(path, X=x, y=y)
    else:
        torch.save({"X": torch.as_tensor(x), "y": torch.as_tensor(y)}, path)
    return str(path)


X = np.random.default_rng(1).standard_normal((6, 3))
Y = np.arange(6.0)
X_NAN = np.where(np.arange(18).reshape(6, 3) == 7, np.nan, X)
Y_INF = np.where(np.arange(6) == 4, -np.inf, Y)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: _file(p, "a.npz", X[:, 0], Y), "error: X must be 2-D"),
        (
            lambda p: _file(p, "a.npz", X_NAN, Y),
            "X has 1 NaN/Inf entries (the first at index (2, 1))",
        ),
        (lambda p: _file(p, "a.npz", X, Y_INF), "y has 1 NaN/Inf entries (the first at index (4))"),
        (lambda p: _file(p, "a.npz", np.zeros((0, 3)), np.zeros(0)), "the data are empty"),
        (lambda p: _file(p, "a.npz", X[:1], Y[:1]), "one sample (n = 1)"),
        (
            lambda p: _file(p, "a.pt", np.vstack([X, X[:1]]), np.append(Y, 1)),
            "inputs 0 and 6 are identical",
        ),
        (
            lambda p: _file(p, "a.npz", np.vstack([X, X[2:3]]), np.append(Y, 1)),
            "so λ* = λ_0 = 0 and no width makes Condition 1 (Eqs. (7)–(9)) hold",
        ),
        (lambda p: _file(p, "a.npz", X, Y[:4]), "the labels have the wrong length"),
        (lambda p: (p / "a.npz").write_bytes(b"junk") and str(p / "a.npz"), "cannot read"),
        (lambda p: str(p / "missing.csv"), "no such file"),
        (
            lambda p: (p / "a.csv").write_text("a,b,y\n1,2,3\n4,5\n") and str(p / "a.csv"),
            "line 3: 2 columns, the first line has 3",
        ),
        (lambda p: np.save(p / "a.npy", X[:, 0]) or str(p / "a.npy"), "must hold one (n, d + 1)"),
        (lambda p: (p / "a.json").write_text("{}") and str(p / "a.json"), "the extension"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_code_2(tmp_path, make, message):
    result = invoke("verify", "--input", make(tmp_path), "--json")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give exactly one of --dataset NAME or --input FILE"),
        (("--dataset", "sphere", "--input", "x.csv"), "give exactly one of"),
        (("--dataset", "nope"), "`name` must be one of 'sphere'"),
        (("--dataset", "sphere", "--label-column", "y"), "--label-column applies to --input"),
        (("--input", "x.csv", "--n", "5"), "--n applies to --dataset"),
        (("--dataset", "digits", "--classes", "zero"), "--classes must be integers"),
        (("--dataset", "sphere", "--n", "1"), "one sample (n = 1)"),
        (("--dataset", "sphere", "--n", "5", "--model", "cnn"), "`model` must be one of"),
        (("--dataset", "sphere", "--n", "5", "--sigma-w2", "2"), "`sigma_w2` must be in (0, 1)"),
        (("--dataset", "sphere", "--n", "5", "--width", "0"), "`width` must be >= 1"),
        (
            ("--dataset", "sphere", "--n", "5", "--width", "many"),
            "--width must be an integer or integers separated by commas; got 'many'",
        ),
        (("--dataset", "sphere", "--n", "5", "--loss", "hinge"), "`loss` must be one of"),
        (("--dataset", "sphere", "--n", "5", "--loss", "logistic"), "applies to the DELM"),
        (
            ("--dataset", "sphere", "--n", "5", "--model", "delm", "--loss", "logistic"),
            "needs labels y ∈ {0, 1} (or two classes); the labels take 5 distinct values",
        ),
        (("--dataset", "sphere", "--n", "5", "--model", "delm", "--tau", "-1"), "`tau` must be"),
        (
            ("--dataset", "sphere", "--n", "5", "--model", "delm", "--logistic-radius", "0"),
            "radius",
        ),
    ],
)
def test_usage_errors_are_one_line_with_exit_code_2(args, message):
    result = invoke("verify", *args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def test_out_onto_a_file_is_refused(tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("x")
    result = invoke("verify", "--dataset", "sphere", "--n", "4", "--out", target)
    assert result.exit_code == 2 and "is a file, not a directory" in result.stderr


def test_a_missing_image_data_set_names_it_and_the_fetch_command(tmp_path):
    result = invoke("verify", "--dataset", "cifar10", "--data-dir", tmp_path)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: data set 'cifar10'")
    assert f"Looked in: {tmp_path / 'cifar10'} {tmp_path} " in lines[0]
    assert lines[0].endswith(f"Fetch it with: deqlab data fetch cifar10 --dir {tmp_path}")
    assert result.stdout == ""


def test_delm_logistic_loss_reads_two_classes_and_checks_corollary2(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((20, 3))
    y = np.where(x[:, 0] + 0.5 * rng.standard_normal(20) > 0, 1.0, -1.0)
    np.savez(tmp_path / "d.npz", X=x, y=y)
    doc = parsed(
        invoke(
            "verify",
            "--input",
            tmp_path / "d.npz",
            "--model",
            "delm",
            "--loss",
            "logistic",
            "--tau",
            "0.1",
            "--json",
        )
    )
    k = doc["numbers"]
    assert k["label_map"] == {"-1": 0, "1": 1} and k["corollary"] == "Corollary 2"
    assert k["time_equation"] == "Eq. (11)" and k["radius"] == "inf"
    assert k["kappa"] == pytest.approx(0.2 * np.linalg.svd(x)[1][-1] ** 2, rel=1e-10)
    verdicts = {s["name"]: s["verdict"] for s in doc["statements"]}
    assert verdicts["rank(Φ) = m"] == "HOLDS" and doc["settings"]["loss"] == "logistic"
    assert verdicts["Theorem 1: λ_min(D_t) ≥ 1/(m(1+γ)²) at every step"] == "PASS"


def test_the_readme_lists_every_option_of_verify():
    """README's command table row of verify names every option ``verify --help`` has."""
    from pathlib import Path

    import typer.main

    command = typer.main.get_command(app).commands["verify"]
    options = {o for p in command.params for o in p.opts if o != "--help"}
    readme = Path(__file__).resolve().parents[1] / "README.md"
    (row,) = [
        line for line in readme.read_text().splitlines() if line.startswith("| `deqlab verify")
    ]
    assert len(options) > 20 and "--logistic-radius" in options
    named = set(re.findall(r"(?<![\w-])--[a-z0-9]+(?:-[a-z0-9]+)*(?![\w-])", row))
    assert sorted(options - named) == []


def test_delm_training_puts_the_time_to_epsilon_beside_the_run(tmp_path):
    """ε above L₀ − L*: T_ε = 0 (Eq. (10)), ε holds from step 0, so the theorem is checked
    at every step and passes; the JSON carries both times, the page marks them."""
    doc = parsed(
        invoke(
            "verify",
            *TINY,
            "--model",
            "delm",
            "--train",
            "2",
            "--epsilon",
            "1e9",
            "--out",
            tmp_path,
            "--json",
        )
    )
    t, k = doc["training"], doc["numbers"]
    assert t["epsilon"] == 1e9 and t["time_to_epsilon"] == {"predicted": 0.0, "measured": 0.0}
    assert k["time_to_epsilon"]["guaranteed"] == 0.0
    (time,) = [s for s in doc["statements"] if s["name"].startswith("Eq. (10)")]
    largest = max((r["loss"] - k["loss_star"]) / 1e9 for r in t["records"])
    assert time["verdict"] == "PASS" and time["value"] == pytest.approx(largest, rel=1e-12)
    assert (tmp_path / "figures" / "corollary1.png").is_file()
