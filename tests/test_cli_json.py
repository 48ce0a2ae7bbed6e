"""``--json`` on list, reproduce, runs list|show, kernel and data list: one JSON document on
stdout and nothing else (progress and warnings go to stderr)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from deqlab.cli import app
from deqlab.data import catalog, get_dataset, write_idx
from deqlab.data.registry import MANUAL_DATASETS
from deqlab.experiments.registry import experiment_names
from deqlab.theory import least_eigenvalue, population_gram
from test_runs_store import LeastSquaresGD  # registers the test experiment

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def parsed(result) -> object:
    """The JSON document of a successful command (stdout must hold nothing else)."""
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A run store with one finished run of the test experiment (20 steps: one FAIL)."""
    out = tmp_path_factory.mktemp("store")
    args = ("reproduce", LeastSquaresGD.name, "--preset", "tiny", "--out", out, "--workers", 1)
    result = invoke(*args, "--set", "steps=20", "--json")  # progress bars: stderr only
    run = parsed(result)
    return out, run


def test_reproduce_json_is_the_run_with_statements_deviations_and_verdicts(store):
    out, run = store
    assert run["experiment"] == "test-lsq-gd" and run["preset"] == "tiny"
    assert run["status"] == "finished" and run["reused"] is False and run["device"] == "cpu"
    assert run["path"] == str(out / "test-lsq-gd" / run["config_hash"])
    assert run["report"].endswith("report.html") and run["warnings"] == []
    verdicts = {s["name"]: s["verdict"] for s in run["statements"]}
    assert verdicts == {"lr0.05 reaches the optimum": "FAIL", "lr0.3 reaches the optimum": "PASS"}
    assert run["verdicts"] == {"ours": {"FAIL": 1, "PASS": 1}}
    assert run["verdict_sentence"] == "ours: 1 of 2 pass"
    assert [d["setting"] for d in run["deviations"]] == ["n", "d", "steps", "lrs"]
    again = parsed(invoke("reproduce", "test-lsq-gd", "--preset", "tiny", "--out", out,
                          "--set", "steps=20", "--json"))  # fmt: skip
    assert again["reused"] is True and again["config_hash"] == run["config_hash"]


def test_runs_list_json(store):
    out, run = store
    rows = parsed(invoke("runs", "list", "--out", out, "--json"))
    (row,) = [r for r in rows if r["config_hash"] == run["config_hash"]]
    assert row["experiment"] == "test-lsq-gd" and row["status"] == "finished"
    assert row["config"] == {"n": 40, "d": 5, "steps": 20, "lrs": [0.05, 0.3], "seed": 0}
    assert row["n_tasks"] == 2 and row["n_failed"] == 0 and row["wall_s"] > 0
    assert "config_json" not in row
    only = parsed(invoke("runs", "list", "--out", out, "--experiment", "ling2023-fig1", "--json"))
    assert only == []  # a known experiment without runs here
    unknown = invoke("runs", "list", "--out", out, "--experiment", "nothing", "--json")
    assert unknown.exit_code == 2 and unknown.stdout == ""  # not an empty list (issue 36)


def test_runs_show_json_has_statements_deviations_and_verdict_counts(store):
    out, run = store
    doc = parsed(invoke("runs", "show", run["config_hash"][:5], "--out", out, "--json"))
    assert doc["config_hash"] == run["config_hash"] and doc["status"] == "finished"
    assert doc["config"]["steps"] == 20
    assert [t["task_key"] for t in doc["tasks"]] == ["lr0.05", "lr0.3"]
    assert doc["statements"] == run["statements"]
    assert doc["deviations"] == run["deviations"]
    assert doc["verdicts"] == {"ours": {"FAIL": 1, "PASS": 1}}
    assert doc["verdict_sentence"] == "ours: 1 of 2 pass"
    assert doc["report"] == run["report"]
    assert {f["path"] for f in doc["figures"]} == {"figures/loss.png", "figures/loss.pdf"}
    import deqlab

    assert doc["provenance"]["deqlab"] == deqlab.__version__
    assert doc["computed_by"].startswith(f"deqlab {deqlab.__version__} (")


def test_list_json_names_presets_and_data_sets_per_preset():
    entries = parsed(invoke("list", "--json"))
    assert [e["name"] for e in entries] == experiment_names()
    by_name = {e["name"]: e for e in entries}
    lsq = by_name["test-lsq-gd"]
    assert lsq["presets"] == ["tiny", "quick", "paper"] and lsq["title"] and lsq["paper"]
    assert lsq["datasets"] == {"tiny": [], "quick": [], "paper": []}
    for entry in entries:
        assert set(entry["datasets"]) == set(entry["presets"])
        for sets in entry["datasets"].values():
            for s in sets:
                assert isinstance(s["present"], bool)
                if s["name"] in ("sphere", "digits"):
                    assert s["present"]  # generated / bundled: always here
                elif not s["present"] and s["name"] in MANUAL_DATASETS:  # no download
                    assert s["fetch"] is None and MANUAL_DATASETS[s["name"]].source in s["detail"]
                elif not s["present"]:
                    assert s["fetch"] == f"deqlab data fetch {s['name']}"


def test_list_json_pipes_through_json_tool():
    """The README's promise, in real processes: `deqlab list --json | python -m json.tool`."""
    listing = subprocess.run(
        [sys.executable, "-m", "deqlab", "list", "--json"], capture_output=True, check=True
    )
    tool = subprocess.run(
        [sys.executable, "-m", "json.tool"], input=listing.stdout, capture_output=True
    )
    assert tool.returncode == 0, tool.stderr
    assert "ling2023-fig1" in {e["name"] for e in json.loads(tool.stdout)}


def test_kernel_json_matches_the_library():
    doc = parsed(invoke("kernel", "--dataset", "sphere", "--n", 12, "--d", 6, "--json"))
    K = population_gram(get_dataset("sphere", n=12, d=6).X, 0.08)
    lam = least_eigenvalue(K)
    assert doc["n"] == 12 and doc["d"] == 6 and doc["sigma_w2"] == 0.08 and doc["depth"] is None
    assert doc["kernel"] == "K = K^(∞) (Eq. 14)" and doc["singular"] is False
    # the CLI's estimate is eigh's (its eigenvector proves the upper side), the library's
    # eigvalsh's: two LAPACK routines, equal to rounding
    assert doc["lambda_min"] == pytest.approx(lam.value, rel=1e-14, abs=0)
    assert doc["lambda_max"] == pytest.approx(lam.max_eigenvalue, rel=1e-14, abs=0)
    lower, upper = doc["lambda_min_bounds"]
    assert lower <= lam.value <= upper and (upper - lower) / upper < 1e-8  # certified
    assert "Cholesky" in doc["lambda_min_proofs"][0]
    assert doc["condition_number"] == pytest.approx(lam.condition_number, rel=1e-12)
    assert doc["diagonal"]["min"] == pytest.approx(1.0869565217391304)
    depth = parsed(invoke("kernel", "--dataset", "sphere", "--n", 5, "--d", 4, "--depth", 2,
                          "--json"))  # fmt: skip
    assert depth["depth"] == 2 and depth["kernel"] == "K^(2) (Definition 1)"


def test_data_list_json_is_the_catalog(tmp_path):
    rows = parsed(invoke("data", "list", "--dir", tmp_path, "--json"))
    assert rows == [e.as_dict() for e in catalog(tmp_path)]
    by_key = {(r["name"], r["split"]): r for r in rows}
    assert by_key[("sphere", None)]["status"] == "generated"
    assert by_key[("digits", "train")]["status"] == "present"
    mnist = by_key[("mnist", "test")]
    assert mnist["status"] == "missing" and mnist["location"] is None
    assert mnist["fetch"] == f"deqlab data fetch mnist --dir {tmp_path}"
    write_idx(tmp_path / "mnist" / "train-images-idx3-ubyte.gz", np.zeros((2, 28, 28), np.uint8))
    write_idx(tmp_path / "mnist" / "train-labels-idx1-ubyte.gz", np.array([0, 1], np.uint8))
    rows = parsed(invoke("data", "list", "--dir", tmp_path, "--json"))
    by_key = {(r["name"], r["split"]): r for r in rows}
    assert by_key[("mnist", "train")]["status"] == "present"
    assert by_key[("mnist", "train")]["location"].endswith("train-images-idx3-ubyte.gz")
    assert by_key[("mnist", "test")]["status"] == "missing"
