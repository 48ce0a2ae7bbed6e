"""Fault catalogue of the run store: bad files, lost processes, full disks, races.

Every case asserts the message (one line naming the file or argument), the exit code and
that the run directory and the index agree afterwards (:func:`consistent`).

``FaultyLsq`` is the least-squares test experiment with fault points read from the
environment (``DEQLAB_TEST_FAULT``; ``DEQLAB_TEST_SLOW`` seconds per step;
``DEQLAB_TEST_LOG`` a file each task start is appended to; ``DEQLAB_TEST_DATASETS`` the
data sets it claims to read). Run as ``python -c "import test_faults_store as t; t.main()"
ARGS`` it is the ``deqlab`` command with the same faults, plus the points inside the store
(a checkpoint, metrics.csv, summary.json or report.html being written, the index being
finished, a run's begin paused, a fresh store indexed slowly) installed by
:func:`_install_store_faults`. Nothing here is production code.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from typer.testing import CliRunner

import deqlab._atomic
import deqlab.runs.store
from deqlab._atomic import write_text_atomic
from deqlab.cli import app
from deqlab.experiments.registry import register
from deqlab.runs.lock import OWNER_ENV, OwnerGoneError, host_name, lock_holder, process_start
from deqlab.runs.rundir import RunDir, SummaryError, file_record
from deqlab.runs.store import RunStore
from test_runs_store import LeastSquaresGD

NAME = "test-lsq-faults"
TESTS = Path(__file__).resolve().parent


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@register
class FaultyLsq(LeastSquaresGD):
    """:class:`LeastSquaresGD` with fault points (module docstring)."""

    slug = NAME.removeprefix("test-")
    presets: ClassVar = {"tiny": {"steps": 30}, "quick": {}, "paper": {"steps": 200}}

    def run_task(self, config, task, ctx):
        fault = os.environ.get("DEQLAB_TEST_FAULT", "")
        slow = float(os.environ.get("DEQLAB_TEST_SLOW", "0"))
        if log := os.environ.get("DEQLAB_TEST_LOG"):
            with open(log, "a") as handle:
                handle.write(f"{task.key} {os.getpid()}\n")
        if fault == f"start:{task.key}":
            _kill()
        if fault == f"raise:{task.key}":
            raise FileNotFoundError(
                "data set 'x' (train split) not found. Looked in:\n  /nowhere/x\n"
                "Fetch it with: deqlab data fetch x"
            )
        report = ctx.progress

        def progress(done: int, total: int) -> None:
            if fault == f"step:{task.key}:{done}":
                _kill()
            if slow:
                time.sleep(slow)
            report(done, total)

        ctx.progress = progress
        return super().run_task(config, task, ctx)

    def plot(self, config, rows, directory):
        if os.environ.get("DEQLAB_TEST_FAULT") == "plot":
            _kill()
        return super().plot(config, rows, directory)

    def datasets(self, config):
        names = os.environ.get("DEQLAB_TEST_DATASETS", "")
        return tuple(n for n in names.split(",") if n)


def _install_store_faults(fault: str) -> None:
    """SIGKILL this process inside the store: ``checkpoint:KEY:DONE`` (after the temporary
    file is written, before its rename), ``write:NAME[:NEEDLE]`` (half-way through writing
    NAME, whose text holds NEEDLE), ``finish`` (before the index records the end). Or
    order two processes: ``pause-begin:FILE`` (between a run's config.toml and its index
    row, wait until FILE exists), ``slow-index:FILE`` (open the store only once a run
    directory exists; having read it for the index, create FILE and wait a second)."""
    kind, _, rest = fault.partition(":")
    if kind == "checkpoint":
        key, _, done = rest.partition(":")
        real_save = torch.save

        def save(obj, f, *args, **kwargs):
            real_save(obj, f, *args, **kwargs)
            if f".{key}.pt." in Path(f).name and str(obj.get("done")) == done:
                _kill()

        torch.save = save
    elif kind == "write":
        target, _, needle = rest.partition(":")
        real_write = deqlab._atomic._write

        def write(path, payload):
            if Path(path).name.startswith(f".{target}.") and needle.encode() in payload:
                real_write(path, payload[: len(payload) // 2])
                _kill()
            real_write(path, payload)

        deqlab._atomic._write = write
    elif kind == "finish":
        RunStore.finish = lambda self, *a, **k: _kill()
    elif kind == "pause-begin":  # between writing config.toml and the run's index row
        real_write = deqlab.runs.store.write_text_atomic

        def write_then_pause(target, text):
            real_write(target, text)
            if Path(target).name == "config.toml":
                _wait_for_file(Path(rest))

        deqlab.runs.store.write_text_atomic = write_then_pause
    elif kind == "slow-index":  # open the store once another run began; index it slowly
        real_init, real_entry = RunStore.__init__, deqlab.runs.store.index_entry

        def init_when_begun(self, root):
            while not list(Path(root).glob("*/*/config.toml")):
                time.sleep(0.02)
            real_init(self, root)

        def slow_entry(run):
            entry = real_entry(run)
            Path(rest).touch()
            time.sleep(1.0)
            return entry

        RunStore.__init__, deqlab.runs.store.index_entry = init_when_begun, slow_entry


def _wait_for_file(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def main() -> None:
    """``deqlab`` with the faults of ``$DEQLAB_TEST_FAULT`` (used as a subprocess)."""
    _install_store_faults(os.environ.get("DEQLAB_TEST_FAULT", ""))
    from deqlab.cli import main as cli_main

    sys.argv = ["deqlab", *sys.argv[1:]]
    cli_main()


# --- helpers ----------------------------------------------------------------------------------

runner = CliRunner()


def cli(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def reproduce_args(out: Path, *extra: object) -> list[str]:
    return ["reproduce", NAME, "--preset", "tiny", "--out", str(out), "--workers", "1",
            "--quiet", *map(str, extra)]  # fmt: skip


def reproduce(out: Path, *extra: object):
    return cli(*reproduce_args(out, *extra))


def one_line(stderr: str, start: str = "error: ") -> str:
    """The single ``start`` line of ``stderr`` (asserting there is exactly one)."""
    lines = [line for line in stderr.splitlines() if line.startswith(start)]
    assert len(lines) == 1, stderr
    return lines[0]


def spawn(out: Path, *extra: object, env: dict | None = None, **kwargs) -> subprocess.Popen:
    """``deqlab reproduce`` of the faulty experiment in a subprocess."""
    return subprocess.Popen(
        [sys.executable, "-c", "import test_faults_store as t; t.main()",
         *reproduce_args(out, *extra)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path]),
             **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kwargs,
    )  # fmt: skip


def run_sub(out: Path, *extra: object, env: dict | None = None, timeout: float = 120):
    proc = spawn(out, *extra, env=env)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, stdout, stderr


def index_rows(out: Path) -> list[dict]:
    if not (out / "index.sqlite").exists():
        return []
    with sqlite3.connect(f"file:{out / 'index.sqlite'}?mode=ro", uri=True) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM runs")]


def consistent(out: Path) -> list[dict]:
    """Assert that the index and the run directories of ``out`` agree; return the rows.

    Every run directory is indexed and every row has its directory (config.toml); a
    finished run's summary says finished and its result files match the recorded sizes and
    digests; no summary says running unless the index does; no temporary file is left;
    no lock is held; ``.corrupt`` files only in checkpoints/ (and a set-aside index).
    """
    rows = index_rows(out)
    dirs = {p.parent for p in out.glob("*/*/config.toml")}
    assert {out / r["experiment"] / r["config_hash"] for r in rows} == dirs
    for r in rows:
        run = RunDir(out / r["experiment"] / r["config_hash"])
        assert r["path"] == f"{r['experiment']}/{r['config_hash']}"  # relative to the root
        if run.summary_file.exists():
            try:
                summary = run.read_summary()
            except SummaryError as err:  # only as reindex records it: interrupted, named
                assert r["status"] == "interrupted" and str(err) in r["error"]
                continue
            if r["status"] != "running":
                assert summary["status"] == r["status"], (summary["status"], r["status"])
            if r["status"] == "finished":
                assert run.verify_files(summary["files"]) == []
                assert summary["files"]["metrics.csv"] == file_record(run.metrics_file)
        else:
            assert r["status"] != "finished"
        assert lock_holder(run) is None, "lock left held"
    assert not [p for p in out.rglob(".*.tmp*")], "temporary files left"
    assert all(p.parent.name == "checkpoints" or p == out / "index.sqlite.corrupt"
               for p in out.rglob("*.corrupt"))  # fmt: skip
    return rows


def status_of(out: Path, *, as_listed: bool = False) -> str:
    """The run's status in the index (``as_listed``: as `deqlab runs list --json` says)."""
    if as_listed:
        result = cli("runs", "list", "--out", out, "--json")
        assert result.exit_code == 0, result.output
        (row,) = json.loads(result.stdout)
        return row["status"]
    (row,) = index_rows(out)
    return row["status"]


def run_dir(out: Path) -> RunDir:
    (path,) = (out / NAME).iterdir()
    return RunDir(path)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A store with one finished run (in this process)."""
    out = tmp_path_factory.mktemp("finished") / "res"
    result = reproduce(out)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def store(finished, tmp_path) -> Path:
    """A private copy of :func:`finished`."""
    out = tmp_path / "res"
    shutil.copytree(finished, out)
    return out


@pytest.fixture(scope="module")
def reference(finished) -> bytes:
    """metrics.csv of the uninterrupted run."""
    return run_dir(finished).metrics_file.read_bytes()


@pytest.fixture(autouse=True)
def _no_faults(monkeypatch):
    for var in ("DEQLAB_TEST_FAULT", "DEQLAB_TEST_SLOW", "DEQLAB_TEST_LOG",
                "DEQLAB_TEST_DATASETS", OWNER_ENV):  # fmt: skip
        monkeypatch.delenv(var, raising=False)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@contextmanager
def read_only(path: Path):
    """``path`` read-only: its modes, and as root (who ignores them) a read-only bind mount."""
    modes = {p: p.stat().st_mode for p in [path, *path.rglob("*")]}
    for p in modes:
        p.chmod(0o555 if p.is_dir() else 0o444)
    mounted = False
    try:
        if os.geteuid() == 0:
            done = subprocess.run(["mount", "--bind", "-o", "ro", str(path), str(path)],
                                  capture_output=True)  # fmt: skip
            if done.returncode != 0:
                pytest.skip("as root a read-only directory needs a bind mount, refused here")
            mounted = True
        yield path
    finally:
        if mounted:
            subprocess.run(["umount", str(path)], check=True)
        for p, mode in modes.items():
            p.chmod(mode)


# --- 1. index paths are relative to the store root ------------------------------------------


def test_runs_show_from_another_working_directory(store, monkeypatch):
    digest = run_dir(store).path.name
    monkeypatch.chdir(store)
    result = cli("runs", "show", digest, "--out", ".", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert Path(doc["path"]).resolve() == (store / NAME / digest).resolve()
    assert [s["verdict"] for s in doc["statements"]] == ["PASS", "PASS"]
    assert "summary_error" not in doc
    consistent(store)


def test_copied_store_shows_its_own_status_and_statements(store, tmp_path):
    copy = tmp_path / "res2"
    shutil.copytree(store, copy)
    digest = run_dir(copy).path.name
    with sqlite3.connect(copy / "index.sqlite") as db:  # the copy's own status differs
        db.execute("UPDATE runs SET status = 'failed'")
    summary = json.loads(run_dir(copy).summary_file.read_text())
    summary["status"] = "failed"
    run_dir(copy).write_summary(summary)
    shutil.rmtree(store)  # nothing may be read from the original any more
    result = cli("runs", "show", digest, "--out", copy)
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first == f"{NAME} {digest}  status=failed  path={copy / NAME / digest}"
    assert "[PASS] (ours, ours) lr0.3 reaches the optimum" in result.stdout
    consistent(copy)


def test_moved_store_is_reused_in_place(store, tmp_path):
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    store.rename(moved)
    result = reproduce(moved)
    assert result.exit_code == 0, result.output
    assert f"reused finished run: {moved / NAME}" in result.stdout
    (row,) = consistent(moved)
    assert row["status"] == "finished"


def test_an_old_absolute_path_in_the_index_is_ignored(store):
    with sqlite3.connect(store / "index.sqlite") as db:
        db.execute("UPDATE runs SET path = '/somewhere/else/run'")
    result = cli("runs", "list", "--out", store, "--json")
    assert result.exit_code == 0
    (row,) = json.loads(result.stdout)
    assert row["path"] == str(run_dir(store).path)
    assert cli("runs", "show", row["path"], "--out", store).exit_code == 0  # found by directory


# --- 4. result files are verified on reuse ----------------------------------------------------


def test_summary_records_size_and_digest_of_each_result_file(store):
    summary = run_dir(store).read_summary()
    assert set(summary["files"]) == {"metrics.csv", "figures/loss.png", "figures/loss.pdf"}
    for name, record in summary["files"].items():
        assert record == file_record(run_dir(store).path / name)
    consistent(store)


@pytest.mark.parametrize(
    ("damage", "what"),
    [
        ("truncate-metrics", "metrics.csv has"),
        ("delete-metrics", "metrics.csv is missing"),
        ("flip-metrics", "metrics.csv's SHA-256 differs"),
        ("flip-figure", "figures/loss.png's SHA-256 differs"),
        ("delete-figure", "figures/loss.pdf is missing"),
    ],
)
def test_damaged_result_file_is_rebuilt_from_the_checkpoints(store, reference, damage, what):
    run = run_dir(store)
    if damage == "truncate-metrics":
        run.metrics_file.write_bytes(reference[:200])
    elif damage == "delete-metrics":
        run.metrics_file.unlink()
    elif damage == "flip-metrics":
        run.metrics_file.write_bytes(reference.replace(b"lr0.3", b"lr0.4", 1))
    elif damage == "flip-figure":
        png = run.figures_dir / "loss.png"
        data = bytearray(png.read_bytes())
        data[-20] ^= 0xFF
        png.write_bytes(bytes(data))
    else:
        (run.figures_dir / "loss.pdf").unlink()
    result = reproduce(store)
    assert result.exit_code == 0, result.output
    warning = one_line(result.stderr, "warning: ")
    assert f"the result files of {run.path} do not match its summary.json" in warning
    assert what in warning and "rebuilding them from the checkpoints" in warning
    assert "run finished:" in result.stdout  # rebuilt, not "reused"
    assert run.metrics_file.read_bytes() == reference
    summary = run.read_summary()
    assert any(what in note for note in summary["notes"])
    assert all(t["reused"] for t in summary["tasks"])  # from the checkpoints, not recomputed
    consistent(store)
    assert "reused finished run" in reproduce(store).stdout  # now it matches again


def test_damaged_metrics_without_checkpoints_reruns_the_tasks(store, reference):
    run = run_dir(store)
    run.metrics_file.write_bytes(reference[:100])
    shutil.rmtree(run.path / "checkpoints")
    result = reproduce(store)
    assert result.exit_code == 0, result.output
    assert "metrics.csv has 100 bytes" in one_line(result.stderr, "warning: ")
    assert run.metrics_file.read_bytes() == reference
    assert not any(t["reused"] for t in run.read_summary()["tasks"])  # computed again
    consistent(store)


def test_summary_of_an_older_format_gains_the_file_records(store, reference):
    run = run_dir(store)
    summary = run.read_summary()
    del summary["files"]
    summary["format"] = 2
    run.write_summary(summary)
    result = reproduce(store)
    assert result.exit_code == 0 and "reused finished run" in result.stdout
    assert result.stderr == ""
    assert run.read_summary()["files"]["metrics.csv"] == file_record(run.metrics_file)
    consistent(store)


# --- 5. SIGTERM, SIGKILL, dead runs -------------------------------------------------------


def _wait_for(path_glob: Path, pattern: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while not list(path_glob.glob(pattern)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"no {pattern} within 120 s"
        time.sleep(0.02)


def test_sigterm_is_an_interrupt_and_the_run_resumes(tmp_path, reference):
    out = tmp_path / "res"
    proc = spawn(out, env={"DEQLAB_TEST_SLOW": "0.05"})
    try:
        _wait_for(out, f"{NAME}/*/checkpoints/lr0.05.pt", proc)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM
    assert one_line(stderr) == (
        "error: interrupted (terminated by SIGTERM); rerun the same command to resume from "
        "the checkpoints"
    )
    assert status_of(out) == "interrupted" and status_of(out, as_listed=True) == "interrupted"
    assert run_dir(out).read_summary()["status"] == "interrupted"
    consistent(out)
    result = reproduce(out)
    assert result.exit_code == 0, result.output
    assert run_dir(out).metrics_file.read_bytes() == reference
    assert consistent(out)[0]["status"] == "finished"


def test_sigkill_leaves_a_dead_run_that_reruns(tmp_path, reference):
    out = tmp_path / "res"
    code, _, _ = run_sub(out, env={"DEQLAB_TEST_FAULT": "step:lr0.3:15"})
    assert code == -signal.SIGKILL
    assert status_of(out) == "running"  # the index as the killed process left it
    assert status_of(out, as_listed=True) == "dead"
    listed = cli("runs", "list", "--out", out)
    assert listed.exit_code == 0 and "│ dead " in listed.stdout
    assert listed.stdout.splitlines()[-1].startswith("dead: the process computing the run is gone")
    shown = cli("runs", "show", run_dir(out).path.name, "--out", out)
    assert shown.exit_code == 0 and "status=dead" in shown.stdout
    consistent(out)
    result = reproduce(out)
    assert result.exit_code == 0, result.output
    assert run_dir(out).metrics_file.read_bytes() == reference
    assert consistent(out)[0]["status"] == "finished"


def _set_owner(out: Path, **fields) -> None:
    sets = ", ".join(f"{k} = ?" for k in fields)
    with sqlite3.connect(out / "index.sqlite") as db:
        db.execute(f"UPDATE runs SET status = 'running', {sets}", tuple(fields.values()))


def test_a_running_run_whose_pid_was_reused_is_dead(store):
    _set_owner(store, pid=os.getpid(), host=host_name(), pid_start="another-boot:1")
    assert status_of(store, as_listed=True) == "dead"


def test_a_running_run_whose_process_is_gone_is_dead(store):
    _set_owner(store, pid=_dead_pid(), host=host_name(), pid_start=None)
    assert status_of(store, as_listed=True) == "dead"


def test_a_running_run_of_a_live_process_or_another_host_is_running(store):
    _set_owner(store, pid=os.getpid(), host=host_name(), pid_start=process_start(os.getpid()))
    assert status_of(store, as_listed=True) == "running"
    _set_owner(store, pid=_dead_pid(), host="another-host")
    assert status_of(store, as_listed=True) == "running"  # cannot tell: not called dead


def test_the_index_records_the_owner_of_a_run(store):
    (row,) = index_rows(store)
    assert (row["pid"], row["host"]) == (os.getpid(), host_name())
    assert row["pid_start"] == process_start(os.getpid())


# --- a corrupt or lost index ------------------------------------------------------------------


def _hint(out: Path) -> str:
    return f"`deqlab runs reindex --out {out}` rebuilds it from the run directories"


@pytest.mark.parametrize(
    ("damage", "reason"),
    [("random", "file is not a database"), ("truncate", "database disk image is malformed"),
     ("empty", "no such table: runs")],
)  # fmt: skip
@pytest.mark.parametrize("command", ["list", "show", "diff"])
def test_corrupt_index_is_one_line_naming_reindex(store, damage, reason, command):
    index = store / "index.sqlite"
    if damage == "random":
        index.write_bytes(os.urandom(3000))
    elif damage == "truncate":
        index.write_bytes(index.read_bytes()[:5000])
    else:
        index.write_bytes(b"")
    args = {"list": ["list"], "show": ["show", "x"], "diff": ["diff", "x", "y"]}[command]
    result = cli("runs", *args, "--out", store)
    assert result.exit_code == 2
    assert one_line(result.stderr) == (
        f"error: run index '{index}' is unreadable ({reason}); {_hint(store)}"
    )
    assert result.stdout == ""


def test_corrupt_index_stops_reproduce_before_anything_runs(store):
    (store / "index.sqlite").write_bytes(os.urandom(3000))
    before = sorted(p.name for p in store.rglob("*"))
    result = reproduce(store, "--set", "steps=12")  # another run: nothing may be created
    assert result.exit_code == 2
    assert "is unreadable (file is not a database)" in one_line(result.stderr)
    assert _hint(store) in result.stderr
    assert sorted(p.name for p in store.rglob("*")) == before


def test_reindex_rebuilds_a_corrupt_index(store):
    index = store / "index.sqlite"
    index.write_bytes(os.urandom(3000))
    result = cli("runs", "reindex", "--out", store)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"the unreadable index was kept as {index}.corrupt",
        f"rebuilt {index} from 1 run directory",
    ]
    (row,) = consistent(store)
    assert row["status"] == "finished" and row["n_tasks"] == 2 and row["wall_s"] > 0
    assert json.loads(row["config_json"])["steps"] == 30
    assert "reused finished run" in reproduce(store).stdout


def test_lost_index_is_named_with_reindex_and_rebuilt_by_reproduce(store):
    (store / "index.sqlite").unlink()
    result = cli("runs", "list", "--out", store)
    assert result.exit_code == 2
    assert one_line(result.stderr) == (
        f"error: no run index at '{store / 'index.sqlite'}', but 1 run directory below it; "
        f"{_hint(store)}"
    )
    result = reproduce(store)  # a store without its index is re-indexed, then reused
    assert result.exit_code == 0 and "reused finished run" in result.stdout
    consistent(store)


def test_reindex_of_a_run_left_running_by_a_dead_process_says_interrupted(store):
    run = run_dir(store)
    summary = run.read_summary()
    run.write_summary({**summary, "status": "running"})
    (store / "index.sqlite").unlink()
    assert cli("runs", "reindex", "--out", store).exit_code == 0
    assert status_of(store) == "interrupted"
    consistent(store)


def test_reindex_names_a_run_with_an_unreadable_summary_and_skips_a_broken_config(store):
    run = run_dir(store)
    run.summary_file.write_text("{")
    broken = store / NAME / "0123456789ab"
    broken.mkdir()
    (broken / "config.toml").write_text("[experiment")
    result = cli("runs", "reindex", "--out", store)
    assert result.exit_code == 0, result.output
    assert one_line(result.stderr, "warning: ").startswith(
        f"warning: skipped {broken}: config.toml cannot be parsed"
    )
    (row,) = index_rows(store)
    assert row["status"] == "interrupted" and "summary.json' is not valid JSON" in row["error"]
    shutil.rmtree(broken)
    consistent(store)
    assert reproduce(store).exit_code == 0  # and a rerun rebuilds the summary
    assert consistent(store)[0]["status"] == "finished"


@pytest.mark.parametrize("where", ["missing", "empty"])
def test_reindex_usage_errors(tmp_path, where):
    out = tmp_path / "none"
    if where == "empty":
        out.mkdir()
    result = cli("runs", "reindex", "--out", out)
    assert result.exit_code == 2
    expected = (
        f"error: `--out` must be a run store directory; '{out}' does not exist"
        if where == "missing"
        else f"error: `--out` '{out}' holds no run directories (<experiment>/<hash>/config.toml)"
    )
    assert one_line(result.stderr) == expected
    assert not (out / "index.sqlite").exists()


# --- corrupt checkpoints ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("random", "it is not a torch checkpoint (no zip archive header)"),
        ("truncated", "it is truncated or damaged (its zip archive has no central directory)"),
        ("empty", "it is empty"),
        ("missing-keys", "it lacks the key(s) rows, state (it holds done)"),
        ("wrong-shape", "it holds a list, not a dict of done, rows, state"),
        ("bad-rows", "its 'rows' must be a list of dicts"),
    ],
)
@pytest.mark.parametrize("task", ["lr0.05", "lr0.3"])
def test_corrupt_checkpoint_is_set_aside_and_its_task_restarts(
    store, reference, content, problem, task
):
    out = store
    run = _store_with_checkpoints(out)
    path = run.checkpoint_file(task)
    good = path.read_bytes()
    if content == "random":
        path.write_bytes(os.urandom(400))
    elif content == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif content == "empty":
        path.write_bytes(b"")
    elif content == "missing-keys":
        torch.save({"done": True}, path)
    elif content == "wrong-shape":
        torch.save([1, 2], path)
    else:
        torch.save({"done": True, "rows": "abc", "state": None}, path)
    result = reproduce(out)
    assert result.exit_code == 0, result.output
    assert one_line(result.stderr, "warning: ") == (
        f"warning: checkpoint '{path}' is unreadable: {problem}; set aside as "
        f"'{task}.pt.corrupt', task {task} restarts from scratch"
    )
    assert path.with_name(f"{task}.pt.corrupt").exists()
    assert run.metrics_file.read_bytes() == reference
    summary = run.read_summary()
    assert summary["status"] == "finished" and any(problem in n for n in summary["notes"])
    assert {t["key"]: t["reused"] for t in summary["tasks"]}[task] is False
    consistent(out)


def _store_with_checkpoints(out: Path) -> RunDir:
    """The finished run of ``out`` made an interrupted one: lr0.05 done, lr0.3 stopped
    after its checkpoint at step 20."""
    run = run_dir(out)
    checkpoint = torch.load(run.checkpoint_file("lr0.3"), weights_only=True)
    partial = [r for r in checkpoint["rows"] if r["step"] < 20]
    w = _weights_at(20)
    torch.save({"done": False, "rows": partial, "state": {"w": w, "step": 20}},
               run.checkpoint_file("lr0.3"))  # fmt: skip
    with sqlite3.connect(out / "index.sqlite") as db:
        db.execute("UPDATE runs SET status = 'interrupted'")
    summary = run.read_summary()
    run.write_summary({**summary, "status": "interrupted"})
    return run


def _weights_at(step: int, lr: float = 0.3) -> torch.Tensor:
    from test_runs_store import LsqConfig, _problem

    config = LsqConfig(steps=30)
    X, y = _problem(config)
    w = torch.zeros(config.d, dtype=torch.float64)
    for _ in range(step):
        w = w - lr * (X.T @ (X @ w - y)) / config.n
    return w


def test_corrupt_checkpoint_with_a_process_pool(store, reference):
    out = store
    run = _store_with_checkpoints(out)
    run.checkpoint_file("lr0.3").write_bytes(os.urandom(300))
    result = cli(*[a if a != "1" else "2" for a in reproduce_args(out)])
    assert result.exit_code == 0, result.output
    assert "set aside as 'lr0.3.pt.corrupt'" in one_line(result.stderr, "warning: ")
    assert run.metrics_file.read_bytes() == reference
    consistent(out)


def test_a_worker_meeting_a_corrupt_checkpoint_restarts_its_task(store, capfd):
    from deqlab.runs.executors import TaskSpec, execute_task

    run = _store_with_checkpoints(store)
    run.checkpoint_file("lr0.3").write_bytes(b"garbage")
    exp = FaultyLsq()
    config = exp.resolve("tiny")
    spec = TaskSpec(FaultyLsq, config, exp.tasks(config)[1], str(run.path), "cpu", 10)
    result = execute_task(spec)
    assert result.status == "finished" and not result.reused and len(result.rows) == 30
    assert "is unreadable: it is not a torch checkpoint" in capfd.readouterr().err
    assert (run.path / "checkpoints" / "lr0.3.pt.corrupt").exists()
    assert torch.load(run.checkpoint_file("lr0.3"), weights_only=True)["done"]


# --- a bad summary.json -------------------------------------------------------------------------

BAD_SUMMARIES = {
    "truncated": ('{"status": "fini', "is not valid JSON"),
    "list": ("[1, 2]", "must hold a JSON object; got list"),
    "no-status": ('{"statements": []}', "`status` must be one of"),
    "statements": ('{"status": "finished", "statements": 3}', "`statements` must be a list"),
    "files": ('{"status": "finished", "files": [1]}', "`files` must map file names"),
}


@pytest.mark.parametrize("kind", list(BAD_SUMMARIES))
def test_bad_summary_under_reproduce_is_named_and_rebuilt(store, reference, kind):
    text, problem = BAD_SUMMARIES[kind]
    run = run_dir(store)
    run.summary_file.write_text(text)
    result = reproduce(store)
    assert result.exit_code == 0, result.output
    warning = one_line(result.stderr, "warning: ")
    assert warning.startswith(f"warning: '{run.summary_file}'") and problem in warning
    assert warning.endswith("rebuilding it from the run's checkpoints and metrics")
    summary = run.read_summary()
    assert summary["status"] == "finished" and len(summary["statements"]) == 2
    assert any(problem in note for note in summary["notes"])
    assert run.metrics_file.read_bytes() == reference
    consistent(store)


@pytest.mark.parametrize("kind", ["truncated", "list", "statements"])
def test_bad_summary_under_runs_show_is_named_and_rebuilt(store, kind):
    text, problem = BAD_SUMMARIES[kind]
    run = run_dir(store)
    run.summary_file.write_text(text)
    result = cli("runs", "show", run.path.name, "--out", store)
    assert result.exit_code == 0, result.output
    warning = one_line(result.stderr, "warning: ")
    assert warning.startswith(f"warning: '{run.summary_file}'") and problem in warning
    assert warning.endswith("; rebuilt it from the checkpoints")
    assert "[PASS] (ours, ours) lr0.05 reaches the optimum" in result.stdout
    assert "note: " in result.stdout and "summary.json was unreadable" in result.stdout
    consistent(store)


def test_bad_summary_in_a_read_only_store_is_named_not_rebuilt(store):
    run = run_dir(store)
    run.summary_file.write_text("{")
    with read_only(store):
        result = cli("runs", "show", run.path.name, "--out", store, "--json")
    assert result.exit_code == 0, result.output
    warning = one_line(result.stderr, "warning: ")
    assert "is not valid JSON" in warning and "it could not be rebuilt: output directory" in warning
    doc = json.loads(result.stdout)
    assert "is not valid JSON" in doc["summary_error"] and doc["statements"] == []
    assert run.summary_file.read_text() == "{"


def test_report_of_a_truncated_summary_names_the_file(store):
    run = run_dir(store)
    run.summary_file.write_text('{"status"')
    result = cli("report", run.path)
    assert result.exit_code == 2
    line = one_line(result.stderr)
    assert line.startswith(f"error: '{run.summary_file}' is not valid JSON")
    assert line.endswith("`deqlab runs show HASH --out STORE`, rebuilds it from the checkpoints")
    assert run.summary_file.read_text() == '{"status"'  # the report writes nothing
    assert [r["status"] for r in index_rows(store)] == ["finished"]
    assert not [p for p in store.rglob(".*.tmp*")]


# --- read-only places and full disks -----------------------------------------------------------


def test_read_only_out_is_a_usage_error(tmp_path):
    out = tmp_path / "ro"
    out.mkdir()
    with read_only(out):
        result = reproduce(out)
    assert result.exit_code == 2
    assert one_line(result.stderr).startswith(f"error: output directory '{out}' is not writable:")
    assert list(out.iterdir()) == []


def test_a_read_only_store_lists_and_shows(store):
    digest = run_dir(store).path.name
    with read_only(store):
        listed = cli("runs", "list", "--out", store, "--json")
        shown = cli("runs", "show", digest, "--out", store)
        diffed = cli("runs", "diff", digest, digest, "--out", store, "--json")
        again = reproduce(store)
    assert listed.exit_code == 0 and json.loads(listed.stdout)[0]["status"] == "finished"
    assert shown.exit_code == 0 and "status=finished" in shown.stdout and shown.stderr == ""
    assert diffed.exit_code == 0
    assert again.exit_code == 2 and "is not writable" in one_line(again.stderr)
    consistent(store)


def _disk_full_on(monkeypatch, name: str) -> None:
    """The disk fills up halfway through writing ``name``: a private patch of the one
    writer, the honest way to crash mid-write (no public knob should make writes fail)."""
    real = deqlab._atomic._write

    def write(path, payload):
        if Path(path).name.startswith(f".{name}."):
            real(path, payload[: len(payload) // 3])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(path, payload)

    monkeypatch.setattr(deqlab._atomic, "_write", write)


@pytest.mark.parametrize("name", ["metrics.csv", "summary.json", "report.html", "config.toml"])
def test_disk_full_is_one_line_and_leaves_no_partial_file(tmp_path, monkeypatch, name, reference):
    out = tmp_path / "res"
    _disk_full_on(monkeypatch, name)
    result = reproduce(out)
    monkeypatch.undo()
    assert result.exit_code == 1, result.output
    line = one_line(result.stderr)
    assert line.startswith("error: the run stopped: [Errno 28] No space left on device: '")
    assert line.endswith(f"/{name}'")
    if name == "config.toml":  # the run never began: nothing is left of it
        assert index_rows(out) == [] and not (out / NAME).exists()
        assert reproduce(out).exit_code == 0
        assert run_dir(out).metrics_file.read_bytes() == reference
        return
    (row,) = index_rows(out)
    assert row["status"] == "failed" and "No space left on device" in row["error"]
    run = run_dir(out)
    if name == "summary.json":
        assert not run.summary_file.exists()  # none, rather than one saying "running"
    else:
        assert run.read_summary()["status"] == "failed"
    consistent(out)
    result = reproduce(out)
    assert result.exit_code == 0, result.output
    assert run.metrics_file.read_bytes() == reference
    consistent(out)


def test_disk_full_while_writing_a_checkpoint_fails_the_task_only(tmp_path, monkeypatch):
    out = tmp_path / "res"
    real = torch.save

    def save(obj, f, *args, **kwargs):
        if ".lr0.3.pt." in Path(f).name:
            Path(f).write_bytes(b"PK\x03\x04 half")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)
    result = reproduce(out)
    monkeypatch.undo()
    assert result.exit_code == 1
    path = run_dir(out).checkpoint_file("lr0.3")
    assert result.stderr.splitlines() == [
        "failed tasks: lr0.3",
        f"task lr0.3 failed: OSError: [Errno 28] No space left on device: '{path}'",
    ]
    assert not path.exists()
    (row,) = consistent(out)
    assert row["status"] == "failed"
    assert reproduce(out).exit_code == 0
    assert consistent(out)[0]["status"] == "finished"


def test_a_failed_write_keeps_the_old_file_and_names_the_target(tmp_path, monkeypatch):
    target = tmp_path / "a.txt"
    write_text_atomic(target, "old")
    _disk_full_on(monkeypatch, "a.txt")
    with pytest.raises(OSError, match=r"No space left on device: '.*a\.txt'") as err:
        write_text_atomic(target, "new" * 1000)
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(target)
    assert target.read_text() == "old" and sorted(tmp_path.iterdir()) == [target]


def test_stale_temporary_files_of_a_killed_writer_are_removed(store):
    run = run_dir(store)
    dead = _dead_pid()
    stale = [run.path / f".metrics.csv.{dead}.0123456789ab.tmp.csv",
             run.path / "checkpoints" / f".lr0.3.pt.{dead}.0123456789ab.tmp.pt"]  # fmt: skip
    for path in stale:
        path.write_text("half")
    (run.path / "report.html").unlink()  # reused: the report is written again
    result = reproduce(store)
    assert result.exit_code == 0 and "reused finished run" in result.stdout
    assert not any(p.exists() for p in stale)
    consistent(store)


# --- configs are checked before a run exists ---------------------------------------------------


@pytest.mark.parametrize(
    ("name", "override", "message"),
    [
        ("ling2023-fig1", "tol=-1", "error: `tol` must be in (0, inf); got -1"),
        ("ling2023-fig1", "spectral_every=-3",
         "error: `spectral_every` must be >= 0; got -3"),
        ("ling2023-fig1", "n=99999999999999999999999",
         "error: `n` must fit in a signed 64-bit integer (-9223372036854775808 to "
         "9223372036854775807); got 99999999999999999999999"),
        ("ling2023-fig1", "tol=nan", "error: `tol` must be a finite number; got nan"),
        ("ling2023-init", "seeds=[0,-2]", "error: `seeds` must be >= 0; got -2"),
        (NAME, "lrs=[0.1,inf]", "error: `lrs[1]` must be a finite number; got inf"),
        (NAME, "seed=-1", "error: `seed` must be >= 0; got -1"),
    ],
)  # fmt: skip
def test_invalid_config_values_exit_2_before_a_run_exists(tmp_path, name, override, message):
    out = tmp_path / "res"
    result = cli("reproduce", name, "--preset", "tiny", "--set", override, "--out", out)
    assert result.exit_code == 2
    assert one_line(result.stderr) == message
    assert not out.exists()


# --- data sets and task errors -------------------------------------------------------------------


def test_a_missing_data_set_is_found_before_any_task(tmp_path, monkeypatch):
    out = tmp_path / "res"
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("DEQLAB_DATA", str(data))
    monkeypatch.setenv("DEQLAB_TEST_DATASETS", "sphere,mnist")
    log = tmp_path / "log"
    monkeypatch.setenv("DEQLAB_TEST_LOG", str(log))
    result = reproduce(out)
    assert result.exit_code == 2
    line = one_line(result.stderr)
    assert line.startswith("error: data set 'mnist' (train split) not found")
    assert f"Looked in: {data / 'mnist'} {data}" in line
    assert line.endswith("Fetch it with: deqlab data fetch mnist")
    assert not log.exists()  # no task started
    assert not (out / NAME).exists() and index_rows(out) == []


def test_a_corrupt_data_set_is_found_before_any_task(tmp_path, monkeypatch):
    out = tmp_path / "res"
    data = tmp_path / "data" / "mnist"
    data.mkdir(parents=True)
    for stem in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):  # fmt: skip
        (data / f"{stem}.gz").write_bytes(b"\x1f\x8b not really gzip")
    monkeypatch.setenv("DEQLAB_DATA", str(data.parent))
    monkeypatch.setenv("DEQLAB_TEST_DATASETS", "mnist")
    result = reproduce(out)
    assert result.exit_code == 2
    line = one_line(result.stderr)
    assert line.startswith("error: data set 'mnist' (train split) is corrupt: ")
    assert "train-images-idx3-ubyte.gz" in line and "deqlab data fetch mnist" in line
    assert not (out / NAME).exists() and index_rows(out) == []


def test_a_finished_run_is_reused_without_its_data(store, tmp_path, monkeypatch):
    monkeypatch.setenv("DEQLAB_DATA", str(tmp_path / "nothing"))
    monkeypatch.setenv("DEQLAB_TEST_DATASETS", "mnist")
    result = reproduce(store)
    assert result.exit_code == 0 and "reused finished run" in result.stdout


def test_a_multi_line_task_error_is_shown_whole(tmp_path, monkeypatch):
    out = tmp_path / "res"
    monkeypatch.setenv("DEQLAB_TEST_FAULT", "raise:lr0.3")
    result = reproduce(out)
    assert result.exit_code == 1
    whole = ("FileNotFoundError: data set 'x' (train split) not found. Looked in:\n"
             "  /nowhere/x\nFetch it with: deqlab data fetch x")  # fmt: skip
    assert f"task lr0.3 failed: {whole}" in result.stderr
    (row,) = consistent(out)
    assert row["status"] == "failed" and row["error"] == f"lr0.3: {whole}"
    summary = run_dir(out).read_summary()
    assert {t["key"]: t["error"] for t in summary["tasks"]}["lr0.3"] == whole


# --- nothing writes into a run after its owner is gone -----------------------------------------


def test_a_checkpoint_is_not_written_for_a_dead_owner(tmp_path, monkeypatch):
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    run.save_checkpoint("a", {"done": False, "rows": [], "state": None})  # no owner recorded
    dead = _dead_pid()
    run.lock_file.write_text(json.dumps({"pid": dead, "host": host_name(), "start": None}))
    with pytest.raises(OwnerGoneError, match=rf"the process {dead} that owns run .* is gone"):
        run.save_checkpoint("b", {"done": False, "rows": [], "state": None})
    me = {"pid": os.getpid(), "host": host_name(), "start": process_start(os.getpid())}
    run.lock_file.write_text(json.dumps(me))
    monkeypatch.setenv(OWNER_ENV, str(dead))  # a worker of the dead owner, now another's run
    with pytest.raises(OwnerGoneError, match=rf"owned by process {os.getpid()} now, not by"):
        run.save_checkpoint("b", {"done": False, "rows": [], "state": None})
    monkeypatch.setenv(OWNER_ENV, str(os.getpid()))
    run.save_checkpoint("b", {"done": False, "rows": [], "state": None})
    run.lock_file.write_text("")  # the owner released the run: its workers stop writing
    with pytest.raises(OwnerGoneError, match=rf"process {os.getpid()}, which started this task"):
        run.save_checkpoint("c", {"done": False, "rows": [], "state": None})
    assert sorted(p.name for p in (run.path / "checkpoints").iterdir()) == ["a.pt", "b.pt"]


def test_a_stale_lock_of_a_dead_owner_is_taken_over(tmp_path):
    out = tmp_path / "res"
    result = reproduce(out, "--set", "steps=5")
    assert result.exit_code == 0
    run = run_dir(out)
    record = {"pid": _dead_pid(), "host": host_name(), "start": None, "since": "earlier"}
    run.lock_file.write_text(json.dumps(record))
    result = reproduce(out, "--set", "steps=5", "--force")
    assert result.exit_code == 0 and result.stderr == ""  # no waiting
    assert run.lock_file.read_text() == ""  # released
    consistent(out)


# --- concurrency and fault injection (subprocesses) ---------------------------------------------


def test_two_identical_reproduce_commands_do_the_work_once(tmp_path, reference):
    out = tmp_path / "res"
    log = tmp_path / "tasks.log"
    env = {"DEQLAB_TEST_SLOW": "0.1", "DEQLAB_TEST_LOG": str(log)}
    procs = [spawn(out, env=env) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    starts = log.read_text().splitlines()
    assert sorted(s.split()[0] for s in starts) == ["lr0.05", "lr0.3"]  # each task once
    assert len({s.split()[1] for s in starts}) == 1  # by one process
    said = sorted("reused finished run" in o for o, _ in outputs)
    assert said == [False, True]
    waited = [e for _, e in outputs if "waiting for it to finish" in e]
    assert len(waited) == 1 and one_line(waited[0], "warning: ").startswith(
        f"warning: run {out / NAME}"
    )
    assert run_dir(out).metrics_file.read_bytes() == reference
    assert consistent(out)[0]["status"] == "finished"


#: SIGKILL points, in the order of one run: in a task before and after its first
#: checkpoint, while a checkpoint is written, between tasks, while the last task's final
#: checkpoint is written, while metrics.csv is written, while plotting, while the final
#: summary.json is written, before the index records the end, while report.html is written.
KILL_POINTS = [
    "step:lr0.05:7",
    "step:lr0.05:15",
    "checkpoint:lr0.05:False",
    "start:lr0.3",
    "checkpoint:lr0.3:True",
    "write:metrics.csv",
    "plot",
    'write:summary.json:"status": "finished"',
    "finish",
    "write:report.html",
]


def test_sigkill_at_ten_points_in_a_row_gives_the_uninterrupted_numbers(tmp_path, reference):
    out = tmp_path / "res"
    for point in KILL_POINTS:
        code, _, stderr = run_sub(out, env={"DEQLAB_TEST_FAULT": point})
        assert code == -signal.SIGKILL, (point, stderr)
        listed = status_of(out, as_listed=True)
        assert listed in ("dead", "finished"), (point, listed)  # never "running" for ever
    result = reproduce(out)
    assert result.exit_code == 0, result.output
    assert "reused finished run" in result.stdout  # killed after the index said finished
    assert run_dir(out).metrics_file.read_bytes() == reference
    (row,) = consistent(out)
    assert row["status"] == "finished"
    assert (run_dir(out).path / "report.html").is_file()


# --- issue 26: a deleted run, a file for --out, runs index read-only, a refusal leaves nothing --


def test_a_run_whose_directory_was_deleted_is_listed_missing(store):
    run = run_dir(store)
    shutil.rmtree(run.path)
    listed = cli("runs", "list", "--out", store)
    shown = cli("runs", "show", run.path.name, "--out", store)
    as_json = cli("runs", "list", "--out", store, "--json")
    assert (
        listed.exit_code == 0 and " missing " in listed.stdout and "finished" not in listed.stdout
    )
    hint = one_line(listed.stdout, "missing: ")
    assert hint == (
        "missing: the run directory is gone (deleted or moved); "
        f"`deqlab runs reindex --out {store}` drops it from the index"
    )
    assert shown.exit_code == 0 and "status=missing" in shown.stdout
    assert one_line(shown.stdout, "error: ") == (
        f"error: the run directory {str(run.path)!r} is missing; "
        f"`deqlab runs reindex --out {store}` drops it from the index"
    )
    assert json.loads(as_json.stdout)[0]["status"] == "missing"
    rebuilt = cli("runs", "reindex", "--out", store)  # no run directory left: said so
    assert rebuilt.exit_code == 2 and "holds no run directories" in one_line(rebuilt.stderr)


def test_a_run_whose_directory_is_there_is_not_missing(store):
    listed = cli("runs", "list", "--out", store)
    assert status_of(store, as_listed=True) == "finished" and "missing" not in listed.stdout


def test_reproduce_out_a_regular_file_is_a_usage_error(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    result = reproduce(afile)
    below = reproduce(afile / "sub")
    listed = cli("runs", "list", "--out", afile)
    assert result.exit_code == 2 and below.exit_code == 2 and listed.exit_code == 2
    assert one_line(result.stderr) == (
        f"error: output directory '{afile}' is a file, not a directory"
    )
    assert one_line(below.stderr) == (
        f"error: output directory '{afile / 'sub'}' cannot be made: '{afile}' is a file, "
        "not a directory"
    )
    assert one_line(listed.stderr) == result.stderr.strip()
    assert afile.read_text() == "keep me"


def test_runs_index_into_a_read_only_store_exits_2(store):
    with read_only(store):
        result = cli("runs", "index", "--out", store)
        reindexed = cli("runs", "reindex", "--out", store)
    assert result.exit_code == 2 and reindexed.exit_code == 2
    line = one_line(result.stderr)
    assert line.startswith(f"error: cannot write the index in '{store}': ")
    assert "Read-only file system" in line or "Permission denied" in line
    assert not (store / "index.html").exists()
    assert one_line(reindexed.stderr) == (
        f"error: cannot open the run index '{store / 'index.sqlite'}' (unable to open database "
        "file)"
    )
    assert [r["status"] for r in index_rows(store)] == ["finished"]  # the old index is kept


def test_a_missing_data_set_refusal_leaves_nothing(tmp_path, monkeypatch):
    out = tmp_path / "res"
    monkeypatch.setenv("DEQLAB_DATA", str(tmp_path / "nothing"))
    monkeypatch.setenv("DEQLAB_TEST_DATASETS", "mnist")
    result = reproduce(out)
    assert result.exit_code == 2
    assert one_line(result.stderr).startswith("error: data set 'mnist' (train split) not found")
    assert not out.exists()  # no index.sqlite, no run directory, no store
    existing = tmp_path / "existing"
    existing.mkdir()
    assert reproduce(existing).exit_code == 2
    assert list(existing.iterdir()) == []  # a store that was there stays, empty


# --- issue 36: a writer killed inside an index write, two fresh runs at once, --experiment, ------
# --- a --figure below a file ---------------------------------------------------------------------

#: A writer of the index killed inside its transaction: a small page cache makes SQLite write
#: the rollback journal (and changed pages) to disk before the commit that never comes.
KILLED_WRITER = """
import os, signal, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA cache_size = 1")
db.execute("BEGIN IMMEDIATE")
db.execute("UPDATE runs SET status = 'uncommitted', started = NULL")
for i in range(2000):
    db.execute("INSERT INTO tasks VALUES ('x', ?, 'k', 'failed', NULL, 1.0, 'now')", (f"{i:0200}",))
os.kill(os.getpid(), signal.SIGKILL)
"""


def _kill_a_writer_inside_a_transaction(index: Path) -> Path:
    """Leave a hot journal beside ``index``, as a process killed inside a write does."""
    before = index.read_bytes()
    done = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(index)], timeout=60)
    assert done.returncode == -signal.SIGKILL
    journal = index.with_name(index.name + "-journal")
    assert journal.stat().st_size > 0 and index.read_bytes() != before  # pages on disk, torn
    return journal


@pytest.mark.parametrize(
    "args", [["list"], ["list", "--json"], ["show", "{ref}"], ["diff", "{ref}", "{ref}"]]
)
def test_read_commands_roll_back_the_journal_of_a_killed_index_writer(store, args):
    ref = run_dir(store).path.name
    journal = _kill_a_writer_inside_a_transaction(store / "index.sqlite")
    result = cli("runs", *[a.format(ref=ref) for a in args], "--out", store)
    assert result.exit_code == 0 and result.stderr == "", result.output
    assert "finished" in result.stdout and "uncommitted" not in result.stdout
    assert not journal.exists()  # rolled back: the index is as its last commit left it
    (row,) = consistent(store)
    assert row["status"] == "finished" and row["started"]
    with sqlite3.connect(store / "index.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT count(*) FROM tasks").fetchone() == (2,)


def test_a_read_only_store_is_read_past_the_journal_of_a_killed_writer(store):
    journal = _kill_a_writer_inside_a_transaction(store / "index.sqlite")
    torn = (store / "index.sqlite").read_bytes(), journal.read_bytes()
    with read_only(store):
        listed = cli("runs", "list", "--out", store, "--json")
        shown = cli("runs", "show", run_dir(store).path.name, "--out", store, "--json")
    assert listed.exit_code == 0 and shown.exit_code == 0, listed.output + shown.output
    (row,) = json.loads(listed.stdout)
    assert row["status"] == "finished" and row["started"]
    assert len(json.loads(shown.stdout)["tasks"]) == 2
    assert ((store / "index.sqlite").read_bytes(), journal.read_bytes()) == torn  # untouched
    assert reproduce(store).exit_code == 0  # writable again: the next writer rolls it back
    assert not journal.exists() and consistent(store)[0]["status"] == "finished"


def test_reindex_after_a_killed_writer_keeps_the_committed_index(store):
    _kill_a_writer_inside_a_transaction(store / "index.sqlite")
    result = cli("runs", "reindex", "--out", store)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"rebuilt {store / 'index.sqlite'} from 1 run directory"]
    assert not (store / "index.sqlite.corrupt").exists()
    assert not (store / "index.sqlite-journal").exists()
    assert consistent(store)[0]["status"] == "finished"


def test_two_runs_begun_at_once_in_a_fresh_store_both_keep_their_start_time(tmp_path):
    """The race of issue 36: B opens the fresh store after A wrote its config.toml but before
    A's index row, finds run directories and no index, and indexes them; A's row lands in
    the meantime. B must not replace the index under A (A's row lost its start time)."""
    out, indexing = tmp_path / "res", tmp_path / "b-is-indexing"
    a = spawn(out, "--set", "steps=12", env={"DEQLAB_TEST_FAULT": f"pause-begin:{indexing}"})
    b = spawn(out, env={"DEQLAB_TEST_FAULT": f"slow-index:{indexing}"})
    outputs = [p.communicate(timeout=300) for p in (a, b)]
    assert [a.returncode, b.returncode] == [0, 0], outputs
    rows = consistent(out)
    assert len(rows) == 2 and {r["status"] for r in rows} == {"finished"}
    for row in rows:
        summary = RunDir(out / NAME / row["config_hash"]).read_summary()
        assert row["started"] and row["started"] <= summary["started"], (row, summary)
    listed = cli("runs", "list", "--out", out, "--json")
    assert all(r["started"] for r in json.loads(listed.stdout))


def test_runs_list_of_an_unknown_experiment_is_a_usage_error(store):
    result = cli("runs", "list", "--out", store, "--experiment", "nosuch")
    assert result.exit_code == 2 and result.stdout == ""
    line = one_line(result.stderr)
    assert line.startswith("error: `--experiment` 'nosuch' is not an experiment; known: ")
    assert "ling2023-fig1" in line and NAME in line
    known = cli("runs", "list", "--out", store, "--experiment", "ling2023-fig1")
    assert known.exit_code == 0 and known.stdout.endswith(
        f"no runs of ling2023-fig1 in '{store}'\n"
    )
    as_json = cli("runs", "list", "--out", store, "--experiment", "ling2023-fig1", "--json")
    assert as_json.exit_code == 0 and json.loads(as_json.stdout) == []


def test_runs_diff_figure_below_a_regular_file_is_a_usage_error(store, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    ref = run_dir(store).path.name
    result = cli("runs", "diff", ref, ref, "--out", store, "--figure", afile / "d.png")
    assert result.exit_code == 2 and result.stdout == ""
    assert one_line(result.stderr) == (
        f"error: `--figure` '{afile / 'd.png'}' cannot be written: '{afile}' is not a directory"
    )
    onto = cli("runs", "diff", ref, ref, "--out", store, "--figure", tmp_path)
    assert onto.exit_code == 2
    assert one_line(onto.stderr).startswith("error: `--figure` must end in .png, .pdf or .svg")
    afile.unlink()
    (tmp_path / "d.png").mkdir()
    directory = cli("runs", "diff", ref, ref, "--out", store, "--figure", tmp_path / "d.png")
    assert one_line(directory.stderr) == (
        f"error: `--figure` '{tmp_path / 'd.png'}' is a directory; give a file name, e.g. "
        f"{tmp_path / 'd.png' / 'diff.png'}"
    )
