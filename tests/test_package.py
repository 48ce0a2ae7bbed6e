"""The package imports and exposes its version; the CLI answers; ``deqlab.reproduce`` runs
an experiment in one call (imported on first use, so ``import deqlab`` stays light)."""

import json
import subprocess
import sys

import pytest

import deqlab
from deqlab.devices import DeviceError
from deqlab.experiments.config import ConfigError
from test_runs_store import LeastSquaresGD  # registers the test experiment


def test_version_is_exposed():
    assert isinstance(deqlab.__version__, str) and deqlab.__version__.count(".") >= 2


def test_cli_version_runs():
    out = subprocess.run(
        [sys.executable, "-m", "deqlab", "version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == deqlab.__version__


def test_import_deqlab_stays_light_and_reproduce_is_lazy():
    code = (
        "import sys, deqlab\n"
        "heavy = [m for m in ('deqlab.runs', 'deqlab.cli', 'deqlab.experiments.registry')"
        " if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "from deqlab import reproduce, Run\n"
        "assert reproduce.__module__ == 'deqlab.runs.api' and Run.__name__ == 'Run'\n"
        "assert 'reproduce' in deqlab.__all__ and 'Run' in deqlab.__all__\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    with pytest.raises(AttributeError, match="module 'deqlab' has no attribute 'nothing'"):
        deqlab.nothing  # noqa: B018


def test_one_call_python_api(tmp_path):
    run = deqlab.reproduce(
        LeastSquaresGD.name, preset="tiny", overrides={"steps": 20}, out=tmp_path, workers=1
    )
    assert isinstance(run, deqlab.Run) and run.status == "finished" and not run.reused
    assert run.path == tmp_path / "test-lsq-gd" / run.config_hash and run.device == "cpu"
    assert run.config.steps == 20 and run.preset == "tiny" and run.report.is_file()
    assert {s.name: s.verdict.value for s in run.statements} == {
        "lr0.05 reaches the optimum": "FAIL",  # 20 steps are too few at lr 0.05
        "lr0.3 reaches the optimum": "PASS",
    }
    assert run.counts.failed == 1 and not run.ok
    assert [d.setting for d in run.deviations] == ["n", "d", "steps", "lrs"]
    assert len(run.rows) == 2 * 20 and run.rows[0] == {
        "task": "lr0.05", "lr": 0.05, "step": 0, "loss": run.rows[0]["loss"],
    }  # fmt: skip
    assert run.summary()["config_hash"] == run.config_hash
    assert run.as_dict()["verdict_sentence"] == "ours: 1 of 2 pass"
    assert "status='finished'" in repr(run)
    same = deqlab.reproduce("test-lsq-gd", "tiny", overrides=["steps=20"], out=tmp_path)
    assert same.reused and same.path == run.path  # "key=value" strings work too
    forced = deqlab.reproduce("test-lsq-gd", "tiny", overrides={"steps": 20}, out=tmp_path,
                              workers=1, force=True)  # fmt: skip
    assert not forced.reused and forced.rows == run.rows


def test_python_api_warns_on_a_run_of_another_version(tmp_path):
    run = deqlab.reproduce("test-lsq-gd", "tiny", out=tmp_path, workers=1)
    summary = run.summary()
    summary["environment"]["deqlab"] = "0.0.2"
    (run.path / "summary.json").write_text(json.dumps(summary))
    with pytest.warns(UserWarning, match=r"computed by deqlab 0\.0\.2 .*--force \(force=True\)"):
        again = deqlab.reproduce("test-lsq-gd", "tiny", out=tmp_path)
    assert again.reused and len(again.warnings) == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"overrides": {"steps": 1.5}}, ConfigError, r"`steps` must be int; got float 1\.5"),
        ({"overrides": {"steps": True}}, ConfigError, r"`steps` must be int; got bool True"),
        ({"overrides": {"lrs": "fast"}}, ConfigError, r"`lrs\[0\]` must be float; got str"),
        ({"overrides": {"stepz": 3}}, ConfigError, r"unknown config key 'stepz'; valid keys"),
        ({"overrides": "steps=3"}, TypeError, r"`overrides` must be a dict .* got the string"),
        ({"preset": "huge"}, ConfigError, r"unknown preset 'huge' for test-lsq-gd"),
        ({"device": "cuda:x"}, DeviceError, r"`device` must be cpu, cuda or cuda:N"),
        ({"executor": "dask"}, ValueError, r"`executor` must be one of 'local', 'ray'"),
    ],
)
def test_python_api_checks_its_arguments_before_running(tmp_path, kwargs, error, message):
    with pytest.raises(error, match=message):
        deqlab.reproduce("test-lsq-gd", **{"preset": "tiny", "out": tmp_path, **kwargs})
    assert not (tmp_path / "index.sqlite").exists()  # nothing ran, nothing was written
    with pytest.raises(ConfigError, match="unknown experiment 'nope'"):
        deqlab.reproduce("nope", out=tmp_path)


def test_verify_and_diagnose_are_functions_named_apart_from_their_packages():
    """``deqlab.verify`` / ``deqlab.diagnose`` are the functions; the classes live in
    ``deqlab.verification`` / ``deqlab.diagnosis`` and the ones the docs use are exported."""
    import types

    from deqlab import RateMonitor, ReLUDEQCheck, diagnose, verify
    from deqlab.diagnosis import RateMonitor as monitor_class
    from deqlab.verification import ReLUDEQCheck as check_class

    for function, package in ((verify, deqlab.verification), (diagnose, deqlab.diagnosis)):
        assert isinstance(function, types.FunctionType) and isinstance(package, types.ModuleType)
        assert getattr(package, function.__name__) is function
    assert RateMonitor is monitor_class and ReLUDEQCheck is check_class
    assert {"verify", "diagnose", "ReLUDEQCheck", "RateMonitor"} <= set(deqlab.__all__)


def test_deqlab_verify_still_the_function_after_importing_a_submodule():
    code = (
        "import sys, types, numpy as np, deqlab\n"
        "assert 'deqlab.verification' not in sys.modules  # verify is imported on first use\n"
        "import deqlab.verification.inputs  # binds deqlab.verification, not deqlab.verify\n"
        "assert isinstance(deqlab.verify, types.FunctionType)\n"
        "assert isinstance(deqlab.diagnose, types.FunctionType)\n"
        "X = np.random.default_rng(0).standard_normal((10, 5))\n"
        "y = np.random.default_rng(1).standard_normal(10)\n"
        "found = deqlab.verify(X, y, deqlab.ReLUDEQCheck(width=32), normalize=True)\n"
        "assert isinstance(found, deqlab.verification.Verification) and found.statements\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_the_paper_records_are_registered_by_any_import_of_deqlab():
    """A stored statement reads back in a process that imports only deqlab.statements
    (the runs store does): importing deqlab registers every Paper record first."""
    code = (
        "import sys\n"
        "from deqlab.statements import Statement, paper_of\n"
        "assert paper_of('kawaguchi2021').short == 'Kawaguchi 2021'\n"
        "s = Statement.from_dict({'name': 'x', 'kind': 'theorem', 'paper': 'hieu2022',\n"
        "    'location': 'Lemma 3.3.8', 'verdict': 'FAIL', 'measured': 'm', 'expected': 'e'})\n"
        "assert s.source.citation == 'Hieu 2022 (thesis), Lemma 3.3.8'\n"
        "assert 'deqlab.experiments.registry' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
