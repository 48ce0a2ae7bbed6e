"""Faults of the executors and bad inputs to ``kernel``, ``data``, the trainers, the solvers
and the readers: each case asserts the message and the exit code (CLI through typer's
CliRunner or a subprocess), including the many that were handled well already.

``SlowLsq`` (registered here as ``test-slow-lsq``) is :class:`LeastSquaresGD` slowed down by
``$DEQLAB_TEST_SLOW`` seconds a step, so a test can kill a sweep while its workers run.
"""

from __future__ import annotations

import builtins
import errno
import gzip
import io
import math
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from deqlab.cli.app import app
from deqlab.experiments.registry import register
from test_runs_store import LeastSquaresGD

TESTS = Path(__file__).resolve().parent
runner = CliRunner()


@register
class SlowLsq(LeastSquaresGD):
    """:class:`LeastSquaresGD` sleeping ``$DEQLAB_TEST_SLOW`` seconds at every step."""

    name = "test-slow-lsq"
    presets: ClassVar = {"tiny": {"steps": 30}, "quick": {}, "paper": {"steps": 200}}

    def run_task(self, config, task, ctx):
        slow = float(os.environ.get("DEQLAB_TEST_SLOW", "0"))
        report = ctx.progress

        def progress(done: int, total: int) -> None:
            time.sleep(slow)
            report(done, total)

        ctx.progress = progress
        return super().run_task(config, task, ctx)


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def one_error(result) -> str:
    """The output's single ``error:`` line (asserting there is exactly one)."""
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    return lines[0]


# --- processes ---------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped by its new parent, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in directory.rglob("*")
        if p.is_file()
    }


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


DRIVER = (
    "import sys; sys.path.insert(0, {tests!r}); import test_faults_executors; "
    "from deqlab.cli.app import main; sys.argv = ['deqlab', *sys.argv[1:]]; main()"
)

linux_only = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="reads processes from /proc"
)


@linux_only
def test_sigkill_of_the_main_process_takes_the_pool_with_it_and_nothing_writes_after(tmp_path):
    out = tmp_path / "res"
    command = [
        sys.executable, "-c", DRIVER.format(tests=str(TESTS)),
        "reproduce", "test-slow-lsq", "--preset", "tiny", "--set", "steps=4000",
        "--workers", "2", "--checkpoint-every", "1", "--out", str(out), "--quiet",
    ]  # fmt: skip
    env = {**os.environ, "DEQLAB_TEST_SLOW": "0.02"}
    parent = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        checkpoints = out / "test-slow-lsq"
        _wait_for(lambda: len(list(checkpoints.rglob("*.pt"))) == 2, 120, "both tasks to run")
        workers = _children(parent.pid)  # the two workers and multiprocessing's tracker
        assert len(workers) >= 2 and all(_alive(pid) for pid in workers)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    _wait_for(lambda: not any(_alive(pid) for pid in workers), 5, "the workers to die")
    run_dir = next(checkpoints.iterdir())
    before = _snapshot(run_dir)
    time.sleep(2.0)  # 100 steps' worth: an orphan would have written checkpoints by now
    assert _snapshot(run_dir) == before


@linux_only
@pytest.mark.parametrize("use_prctl", [True, False])
def test_a_worker_dies_with_its_parent(tmp_path, use_prctl):
    """prctl(PR_SET_PDEATHSIG) on Linux, and the watchdog thread alone (as on macOS)."""
    armed = tmp_path / "armed"
    child = (
        "import os, sys, time; from deqlab.runs.executors.local import die_with_parent; "
        f"die_with_parent(int(sys.argv[1]), use_prctl={use_prctl}); "
        f"open({str(armed)!r}, 'w').close(); time.sleep(120)"
    )
    parent_code = (
        "import os, subprocess, sys, time; "
        f"p = subprocess.Popen([sys.executable, '-c', {child!r}, str(os.getpid())]); "
        "print(p.pid, flush=True); time.sleep(120)"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE)
    try:
        pid = int(parent.stdout.readline())
        _wait_for(armed.exists, 60, "the child to arm its watch")
        assert _alive(pid)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        parent.stdout.close()
    _wait_for(lambda: not _alive(pid), 3, f"child {pid} to die with its parent")


def test_owner_alive_outside_a_pool_worker():
    from deqlab.runs.executors import local as executors

    assert executors._owner_pid is None and executors.owner_alive()


# --- a read-only place ---------------------------------------------------------------------------


@contextmanager
def read_only(directory: Path):
    """``directory`` made read-only. Root ignores file modes, so there a write under it (a
    file opened for writing, a directory made, a file moved in) fails as it would for
    anyone else: PermissionError (EACCES)."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o555)
    patches = pytest.MonkeyPatch()
    if os.geteuid() == 0:
        inside = str(directory.resolve())

        def denied(path) -> bool:
            return os.path.abspath(os.fspath(path)).startswith(inside)

        def refuse(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))

        real_open, real_os_open = builtins.open, os.open
        real_mkdir, real_replace = os.mkdir, os.replace

        def open_(file, mode="r", *args, **kwargs):
            if isinstance(file, str | os.PathLike) and set(mode) & set("wax+") and denied(file):
                refuse(file)
            return real_open(file, mode, *args, **kwargs)

        def os_open(path, flags, *args, **kwargs):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and denied(path):
                refuse(path)
            return real_os_open(path, flags, *args, **kwargs)

        def mkdir(path, *args, **kwargs):
            if denied(path):
                refuse(path)
            return real_mkdir(path, *args, **kwargs)

        def replace(src, dst, *args, **kwargs):
            if denied(dst):
                refuse(dst)
            return real_replace(src, dst, *args, **kwargs)

        patches.setattr(builtins, "open", open_)
        patches.setattr(io, "open", open_)
        patches.setattr(os, "open", os_open)
        patches.setattr(os, "mkdir", mkdir)
        patches.setattr(os, "replace", replace)
    try:
        yield directory
    finally:
        patches.undo()
        directory.chmod(0o755)


# --- the catalogue: deqlab kernel --input -----------------------------------------------------


def _npy(path: Path, array, **kwargs) -> Path:
    np.save(path, array, **kwargs)
    return path


def _header_only(path: Path) -> Path:
    full = _npy(path.with_suffix(".full.npy"), np.ones((4, 3)))
    path.write_bytes(full.read_bytes()[:40])
    return path


def _truncated(path: Path) -> Path:
    full = _npy(path.with_suffix(".full.npy"), np.ones((4, 3)))
    path.write_bytes(full.read_bytes()[:-20])
    return path


def _with_nan(path: Path) -> Path:
    array = np.ones((4, 3))
    array[1, 2] = np.nan
    return _npy(path, array)


def _zero_column(path: Path) -> Path:
    array = np.ones((4, 3))
    array[:, 1] = 0
    return _npy(path, array)


def _npz(path: Path) -> Path:
    np.savez(path.with_suffix(".npz"), X=np.ones((4, 3)))
    return path.with_suffix(".npz")


NOT_NPY = "is not a valid .npy array file"
BAD_INPUTS = {  # name: (make the file, what the one error line says after the file's name)
    "garbage": (
        lambda p: p.write_bytes(os.urandom(256)) and p,
        f" {NOT_NPY} (it does not start with the NumPy header; pickled data is never loaded); "
        "save X with numpy.save",
    ),
    "pickle": (
        lambda p: p.write_bytes(__import__("pickle").dumps({"X": [1.0, 2.0]})) and p,
        f" {NOT_NPY} (it does not start with the NumPy header; pickled data is never loaded)",
    ),
    "empty": (lambda p: p.write_bytes(b"") or p, f" {NOT_NPY} (it does not start with"),
    "header-only": (_header_only, f" {NOT_NPY}: EOF: reading array header"),
    "truncated": (_truncated, f" {NOT_NPY}: Failed to read all data for array."),
    "object": (
        lambda p: _npy(p, np.array([{"a": 1}], dtype=object), allow_pickle=True),
        " holds Python objects (dtype object), not numbers; pickled data is never loaded",
    ),
    "npz": (_npz, " is a .npz archive, not a .npy array file; save the one array X with"),
    "vector": (
        lambda p: _npy(p, np.ones(5)),
        " holds an array of shape (5,); expected X of shape (d, n), one point per column",
    ),
    "cube": (lambda p: _npy(p, np.ones((2, 3, 4))), " holds an array of shape (2, 3, 4);"),
    "complex": (
        lambda p: _npy(p, np.ones((3, 4)) * 1j),
        " holds an array of dtype complex128; expected real numbers (float or int)",
    ),
    "strings": (lambda p: _npy(p, np.array([["a", "b"]])), " holds an array of dtype <U1;"),
    "no-points": (
        lambda p: _npy(p, np.zeros((3, 0))),
        " holds an array of shape (3, 0); expected X of shape (d, n) with d >= 1 features",
    ),
    "nan": (_with_nan, " has 1 NaN/Inf entries; X must be finite"),
    "zero-column": (_zero_column, ": `X` has 1 all-zero column(s) (points 1); the kernels need"),
    "missing": (lambda p: p, ": no such file"),
    "directory": (lambda p: p.mkdir() or p, " is a directory, not a .npy file"),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_kernel_input_that_is_not_one_real_matrix(tmp_path, case):
    make, says = BAD_INPUTS[case]
    path = make(tmp_path / f"{case}.npy")
    result = invoke("kernel", "--input", path)
    assert result.exit_code == 2
    assert one_error(result).startswith(f"error: `--input` {str(path)!r}{says}")


def test_kernel_reads_an_integer_matrix(tmp_path):
    path = _npy(tmp_path / "int.npy", np.arange(1, 13).reshape(4, 3))
    result = invoke("kernel", "--input", path)
    assert result.exit_code == 0 and "d = 4, n = 3" in result.output


# --- deqlab kernel: the other arguments ----------------------------------------------------------

KERNEL_USAGE = {  # arguments after `kernel`: the start of the one error line (exit 2)
    "no-source": ((), "error: give exactly one of --dataset NAME or --input X.npy"),
    "two-sources": (
        ("--dataset", "sphere", "--input", "x.npy"),
        "error: give exactly one of --dataset NAME or --input X.npy",
    ),
    "unknown-dataset": (
        ("--dataset", "nope"),
        "error: `--dataset` must be one of 'sphere', 'mnist', ",
    ),
    "negative-depth": (
        ("--dataset", "sphere", "--depth", "-2"),
        "error: `--depth` must be a non-negative integer or 'inf'; got '-2'",
    ),
    "word-depth": (
        ("--dataset", "sphere", "--depth", "deep"),
        "error: `--depth` must be a non-negative integer or 'inf'; got 'deep'",
    ),
    "fraction-depth": (
        ("--dataset", "sphere", "--depth", "2.5"),
        "error: `--depth` must be a non-negative integer or 'inf'; got '2.5'",
    ),
    "sigma-one": (
        ("--dataset", "sphere", "--n", "5", "--sigma-w2", "1"),
        "error: `sigma_w2` must be in (0, 1)",
    ),
    "sigma-negative": (
        ("--dataset", "sphere", "--n", "5", "--sigma-w2", "-0.1"),
        "error: `sigma_w2` must be in (0, 1)",
    ),
    "no-points": (("--dataset", "sphere", "--n", "0"), "error: `n` must be >= 1; got 0"),
    "ntk-with-depth": (
        ("--dataset", "sphere", "--n", "5", "--ntk", "--depth", "3"),
        "error: --ntk is the infinite-depth kernel: drop --depth or use 'inf'",
    ),
    "parameterization": (
        ("--dataset", "sphere", "--n", "5", "--ntk", "--parameterization", "mup"),
        "error: `parameterization` must be one of 'standard', 'ntk'; got 'mup'",
    ),
}


@pytest.mark.parametrize("case", KERNEL_USAGE)
def test_kernel_usage_errors(case):
    args, says = KERNEL_USAGE[case]
    result = invoke("kernel", *args)
    assert result.exit_code == 2
    assert one_error(result).startswith(says)


def test_kernel_at_depth_one_billion_returns_at_once_and_says_it_computed_k():
    start = time.monotonic()
    result = invoke("kernel", "--dataset", "sphere", "--n", "10", "--d", "5", "--depth", "1e9")
    assert result.exit_code == 0 and time.monotonic() - start < 30
    assert "kernel: K^(1000000000) = K = K^(∞) (Eq. 14), to 1e-14" in result.output
    assert "note: depth 1000000000 > 15: from l = 15 on" in result.output


def test_kernel_outside_assumption_1_warns_in_one_line():
    result = invoke("kernel", "--dataset", "sphere", "--n", "5", "--sigma-w2", "0.2")
    assert result.exit_code == 0
    (line,) = [x for x in result.output.splitlines() if "Assumption 1" in x]
    assert line.startswith("warning: `sigma_w2` = 0.2 violates Assumption 1 of Ling et al.")


def test_kernel_on_a_missing_data_set_says_how_to_fetch_it(tmp_path):
    result = invoke("kernel", "--dataset", "mnist", "--data-dir", tmp_path)
    assert result.exit_code == 2  # a missing input, as in every command
    assert one_error(result) == (
        "error: data set 'mnist' (train split) not found: expected train-images-idx3-ubyte[.gz] "
        f"and train-labels-idx1-ubyte[.gz]. Looked in: {tmp_path / 'mnist'} {tmp_path} "
        f"Fetch it with: deqlab data fetch mnist --dir {tmp_path}"
    )


def test_kernel_save_onto_a_directory(tmp_path):
    result = invoke("kernel", "--dataset", "sphere", "--n", "5", "--save", tmp_path)
    assert result.exit_code == 2
    assert one_error(result) == (
        f"error: `--save` {str(tmp_path)!r} is a directory; give a file name, e.g. "
        f"{tmp_path / 'K.npy'}"
    )


def test_kernel_save_through_a_file(tmp_path):
    (tmp_path / "file").write_text("")
    target = tmp_path / "file" / "K.npy"
    result = invoke("kernel", "--dataset", "sphere", "--n", "5", "--save", target)
    assert result.exit_code == 2
    assert one_error(result) == (
        f"error: `--save` {str(target)!r} cannot be written: {str(tmp_path / 'file')!r} is "
        "not a directory"
    )


def test_kernel_save_into_a_read_only_directory(tmp_path):
    with read_only(tmp_path / "ro") as directory:
        target = directory / "K.npy"
        result = invoke("kernel", "--dataset", "sphere", "--n", "5", "--save", target)
    assert result.exit_code == 2
    assert one_error(result) == (
        f"error: `--save` {str(target)!r} cannot be written: {str(directory)!r} is not "
        "writable (Permission denied)"
    )
    assert not list(directory.iterdir())


def test_kernel_save_into_a_new_directory_works(tmp_path):
    target = tmp_path / "new" / "deeper" / "K.npy"
    result = invoke("kernel", "--dataset", "sphere", "--n", "5", "--save", target)
    assert result.exit_code == 0 and np.load(target).shape == (5, 5)


# --- deqlab data ----------------------------------------------------------------------------------


def test_data_fetch_into_a_read_only_directory(tmp_path):
    with read_only(tmp_path / "ro") as directory:
        result = invoke("data", "fetch", "mnist", "--dir", directory, "--no-progress")
    assert result.exit_code == 2
    assert one_error(result) == (
        f"error: data directory {str(directory / 'mnist')!r} is not writable (Permission "
        "denied); give a writable --dir, or set $DEQLAB_DATA"
    )


def test_data_fetch_through_a_file(tmp_path):
    (tmp_path / "file").write_text("")
    result = invoke("data", "fetch", "mnist", "--dir", tmp_path / "file", "--no-progress")
    assert result.exit_code == 2
    assert one_error(result) == (
        f"error: data directory {str(tmp_path / 'file' / 'mnist')!r} is not writable (Not a "
        "directory); give a writable --dir, or set $DEQLAB_DATA"
    )


def test_data_fetch_of_an_unknown_or_bundled_set():
    unknown = invoke("data", "fetch", "nope")
    assert unknown.exit_code == 2
    assert one_error(unknown).startswith("error: `name` must be one of 'mnist', ")
    bundled = invoke("data", "fetch", "sphere")
    assert bundled.exit_code == 2
    assert one_error(bundled).endswith("('sphere' is generated or bundled: nothing to fetch)")


def test_data_fetch_from_an_unreachable_mirror(tmp_path):
    result = invoke(
        "data", "fetch", "semeion", "--dir", tmp_path, "--base-url", "http://127.0.0.1:1/",
        "--no-progress",
    )  # fmt: skip
    assert result.exit_code == 1
    assert one_error(result).startswith("error: http://127.0.0.1:1/semeion.data: ")
    assert not list((tmp_path / "semeion").glob("semeion.data"))


def test_data_list_reports_a_truncated_file_as_corrupt(tmp_path):
    from deqlab.data import write_idx

    folder = tmp_path / "mnist"
    images = np.zeros((3, 28, 28), dtype=np.uint8)
    write_idx(folder / "train-images-idx3-ubyte.gz", images)
    write_idx(folder / "train-labels-idx1-ubyte.gz", np.zeros(3, dtype=np.uint8))
    whole = (folder / "train-images-idx3-ubyte.gz").read_bytes()
    (folder / "train-images-idx3-ubyte.gz").write_bytes(whole[: len(whole) // 2])
    result = invoke("data", "list", "--dir", tmp_path, "--json")
    assert result.exit_code == 0
    import json

    (entry,) = [
        e for e in json.loads(result.stdout) if e["name"] == "mnist" and e["split"] == "train"
    ]
    assert entry["status"] == "corrupt"
    assert "is a truncated gzip file (the compressed stream ends early)" in entry["detail"]


# --- readers -----------------------------------------------------------------------------------


def test_idx_header_whose_dimensions_overflow_names_the_file(tmp_path):
    from deqlab.data import IdxFormatError, read_idx

    path = tmp_path / "big-idx3-ubyte"
    sizes = np.array([2**31, 2**31, 2**31], dtype=">u4").tobytes()
    path.write_bytes(bytes([0, 0, 8, 3]) + sizes + b"\0" * 10)
    with pytest.raises(IdxFormatError) as caught:
        read_idx(path)
    assert str(caught.value).startswith(
        f"{path}: IDX header announces shape (2147483648, 2147483648, 2147483648)"
    )
    assert str(caught.value).endswith("the file is truncated or its header is corrupt")


def test_idx_truncated_gzip_and_foreign_header(tmp_path):
    from deqlab.data import IdxFormatError, read_idx

    cut = tmp_path / "cut.gz"
    cut.write_bytes(gzip.compress(bytes([0, 0, 8, 1, 0, 0, 0, 100]) + b"\1" * 100)[:20])
    with pytest.raises(IdxFormatError, match=rf"^{cut} is a truncated gzip file"):
        read_idx(cut)
    text = tmp_path / "text.idx"
    text.write_bytes(b"hello world")
    with pytest.raises(IdxFormatError, match=rf"^{text} is not an IDX file: header 68656c6c"):
        read_idx(text)


def test_semeion_and_svhn_garbage_name_the_file(tmp_path):
    from deqlab.data import SemeionFormatError, SvhnFormatError, read_semeion, read_svhn

    short = tmp_path / "semeion.data"
    short.write_text("1 0 1\n")
    with pytest.raises(SemeionFormatError, match=rf"^{short}, line 1: 3 values, expected 266"):
        read_semeion(short)
    mat = tmp_path / "train_32x32.mat"
    mat.write_bytes(b"garbage")
    with pytest.raises(SvhnFormatError, match=rf"^{mat} is not a readable MATLAB file"):
        read_svhn(mat)


# --- trainers ------------------------------------------------------------------------------------


def _relu_deq(name: str | None = None):
    from deqlab.models.relu_deq import ReLUDEQ

    model = ReLUDEQ.init(4, 16, seed=0)
    if name is not None:
        with torch.no_grad():
            getattr(model, name).view(-1)[0] = math.nan
    gen = torch.Generator().manual_seed(1)
    return model, torch.randn(4, 6, generator=gen), torch.randn(6, generator=gen)


@pytest.mark.parametrize(("name", "count"), [("W", "1 of 256"), ("U", "1 of 64"), ("a", "1 of 16")])
def test_relu_deq_trainer_names_the_parameter_that_is_not_finite(name, count):
    from deqlab.train import GDConfig, GDTrainer

    model, X, y = _relu_deq(name)
    with pytest.raises(ValueError) as caught:
        GDTrainer(model, X, y, GDConfig(lr=0.1))
    assert str(caught.value) == (
        f"parameter `{name}` of the ReLUDEQ is not finite ({count} entries NaN/Inf) before "
        "training; the trainer needs finite parameters"
    )


def test_relu_deq_trainer_stops_when_a_parameter_turns_non_finite():
    from deqlab.train import GDConfig, GDTrainer

    model, X, y = _relu_deq()
    trainer = GDTrainer(model, X, y, GDConfig(lr=0.1))
    trainer.step()
    with torch.no_grad():
        model.W[2, 3] = math.inf
    record = trainer.step()
    assert trainer.stop_reason == record["status"] == "parameter_not_finite"
    assert trainer.message == (
        "step 1: parameter `W` of the ReLUDEQ is not finite (1 of 256 entries NaN/Inf): GD with "
        "lr = 0.1 diverged"
    )


def test_relu_deq_trainer_with_a_huge_learning_rate_stops_with_a_status():
    from deqlab.train import GDConfig, GDTrainer

    model, X, y = _relu_deq()
    trainer = GDTrainer(model, X, y, GDConfig(lr=1e6, spectral_every=0))
    records = trainer.run(10)
    assert trainer.stopped and records[-1]["status"] == trainer.stop_reason
    assert trainer.message.startswith(f"step {records[-1]['step']}: ")


def _mondeq(name: str | None = None):
    from deqlab.models.mondeq import MonDEQ

    model = MonDEQ(4, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    if name is not None:
        with torch.no_grad():
            dict(model.named_parameters())[name].view(-1)[0] = math.nan
    gen = torch.Generator().manual_seed(1)
    return model, torch.randn(4, 6, generator=gen), torch.randn(6, generator=gen)


@pytest.mark.parametrize("name", ["A", "B", "U", "u"])
def test_monotone_trainer_names_the_parameter_that_is_not_finite(name):
    from deqlab.train.mondeq_gd import MonDEQGD

    model, X, y = _mondeq(name)
    with pytest.raises(
        ValueError, match=rf"^parameter `{name}` of the MonDEQ is not finite \(1 of"
    ):
        MonDEQGD(model, X, y, lr=0.1)


def test_monotone_trainer_says_when_a_step_made_a_parameter_non_finite():
    from deqlab.train.mondeq_gd import MonDEQGD

    model, X, y = _mondeq()
    trainer = MonDEQGD(model, X, y, lr=0.1)
    first = trainer.step()
    with torch.no_grad():
        model.u[0] = math.nan
    record = trainer.step()
    assert trainer.stopped and math.isnan(record["loss"]) and record["step"] == 1
    assert trainer.message == (
        "the loss diverged at step 1 with learning rate lr = 0.1: parameter `u` of the MonDEQ "
        f"is not finite (1 of 8 entries NaN/Inf); the last finite loss was {first['loss']:.6g} "
        "at step 0; lower the learning rate"
    )


def _delm(name: str | None = None, lr: float = 0.1):
    from deqlab.models.delm import DELM
    from deqlab.train.delm_gd import DELMGDConfig, DELMGradientDescent

    model = DELM(4, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    if name is not None:
        with torch.no_grad():
            getattr(model, name).view(-1)[0] = math.nan
    gen = torch.Generator().manual_seed(1)
    X, Y = torch.randn(4, 6, generator=gen), torch.randn(1, 6, generator=gen)
    return lambda: DELMGradientDescent(model, X, Y, DELMGDConfig(lr=lr))


@pytest.mark.parametrize(("name", "count"), [("A", "1 of 16"), ("B", "1 of 4")])
def test_delm_trainer_names_the_parameter_that_is_not_finite(name, count):
    with pytest.raises(ValueError) as caught:
        _delm(name)()
    assert str(caught.value) == (
        f"parameter `{name}` of the DELM is not finite ({count} entries NaN/Inf) before "
        "training; the trainer needs finite parameters"
    )


def test_delm_divergence_is_reported_as_divergence():
    from deqlab.train.divergence import DivergenceError

    trainer = _delm(lr=1e6)()
    with pytest.raises(DivergenceError) as caught:
        trainer.run(200)
    step = trainer.step_count
    message = str(caught.value)
    assert message.startswith(f"the loss diverged at step {step} with learning rate lr = 1e+06: ")
    assert f"the last finite loss was {trainer.last_finite[1]:.6g} at step {step - 1}" in message
    assert message.endswith("; lower the learning rate") and "`Q` must be finite" not in message


def test_kawaguchi_fig2_with_a_huge_learning_rate_reports_divergence(tmp_path):
    result = invoke(
        "reproduce", "kawaguchi2021-fig2", "--preset", "tiny", "--set", "lr=1e6", "--set",
        "steps=40", "--set", "bound_steps=20", "--workers", 1, "--out", tmp_path, "--quiet",
    )  # fmt: skip
    assert result.exit_code == 1
    failures = [x for x in result.output.splitlines() if x.startswith("task a-delm-identity")]
    assert failures and failures[0].startswith(
        "task a-delm-identity failed: DivergenceError: the loss diverged at step "
    )
    assert "with learning rate lr = 1e+06" in failures[0] and "`Q` must be finite" not in (
        result.output
    )


# --- solvers --------------------------------------------------------------------------------


def test_solvers_name_what_is_wrong():
    from deqlab.solvers import Picard
    from deqlab.solvers.solution import SolverError, get_solver

    z = torch.zeros(3)
    with pytest.raises(
        SolverError, match=r"(?s)^Picard diverged after \d+ steps: .*may not be contractive"
    ):
        Picard(max_iter=50)(lambda x: 2 * x + 1, z)
    with pytest.raises(SolverError, match=r"(?s)^Picard max_steps after 5 steps: .*raise max_iter"):
        Picard(max_iter=5, tol=1e-14)(lambda x: 0.9 * x + 1, z)
    with pytest.raises(ValueError, match=r"^`z0` must be finite; got 1 NaN/Inf entries$"):
        Picard()(lambda x: x, torch.tensor([math.nan]))
    with pytest.raises(ValueError, match=r"^`f\(z0\)` must have the shape of `z0` \(3,\); got"):
        Picard()(lambda x: x[:1], z)
    with pytest.raises(ValueError, match=r"^unknown solver 'nope'; valid names: 'anderson'"):
        get_solver("nope")
    with pytest.raises(ValueError, match=r"^`max_iter` must be >= 1; got 0$"):
        Picard(max_iter=0)


# --- executors ------------------------------------------------------------------------------

EXECUTOR_USAGE = {
    "unknown-executor": (
        ("--executor", "dask"),
        "error: `executor` must be one of 'local', 'ray'; got 'dask'",
    ),
    "no-workers": (("--workers", "0"), "error: Invalid value for '--workers': Input should be"),
    "address-for-local": (
        ("--executor", "local", "--address", "h:1"),
        "error: `address` is only used by the ray executor; got --executor local",
    ),
    "address-form": (
        ("--executor", "ray", "--address", "nonsense"),
        "error: `address` must be HOST:PORT (e.g. 10.0.0.5:6379, the head node's GCS), "
        "ray://HOST:PORT (Ray Client) or auto; got 'nonsense'",
    ),
    "address-refused": (
        ("--executor", "ray", "--address", "127.0.0.1:1"),
        "error: cannot reach the Ray cluster at 127.0.0.1:1: a TCP connection to 127.0.0.1 "
        "port 1 failed within 5 s (Connection refused)",
    ),
}


@pytest.mark.parametrize("case", EXECUTOR_USAGE)
def test_executor_usage_errors_create_no_run(tmp_path, case):
    args, says = EXECUTOR_USAGE[case]
    result = invoke("reproduce", "test-lsq-gd", "--preset", "tiny", "--out", tmp_path, *args)
    assert result.exit_code == 2
    assert one_error(result).startswith(says)
    assert not (tmp_path / "test-lsq-gd").exists()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_task_fails_alone_in_process_and_in_a_pool(tmp_path, workers):
    result = invoke(
        "reproduce", "test-lsq-gd", "--preset", "tiny", "--set", "lrs=[0.05,9.0]",
        "--workers", workers, "--out", tmp_path, "--quiet",
    )  # fmt: skip
    assert result.exit_code == 1
    assert "task lr9 failed: FloatingPointError: GD diverged at step 5 with lr 9.0" in (
        result.output
    )
    assert "failed tasks: lr9" in result.output


def test_a_pool_worker_writes_nothing_once_its_parent_is_gone(tmp_path, monkeypatch):
    """``owner_alive`` is what a worker asks before each checkpoint: with another parent
    recorded (its own died), the worker exits instead of writing."""
    from deqlab.runs.executors import local as executors

    # the owner die_with_parent records, made another process: the state a worker is in once
    # its parent died, short of killing one (die_with_parent with that pid exits at once)
    monkeypatch.setattr(executors, "_owner_pid", os.getppid() + 1)
    assert not executors.owner_alive()
    code = (
        "import os, sys; from pathlib import Path; import deqlab.runs.executors.local as ex; "
        "sys.path.insert(0, sys.argv[1]); from test_runs_store import LeastSquaresGD; "
        "ex._owner_pid = os.getppid() + 1; exp = LeastSquaresGD(); config = exp.resolve('tiny'); "
        "spec = ex.TaskSpec(LeastSquaresGD, config, exp.tasks(config)[0], sys.argv[2], 'cpu', 1); "
        "ex.execute_task(spec); print('wrote')"
    )
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-c", code, str(TESTS), str(run)], capture_output=True, text=True
    )
    assert done.returncode == 1 and "wrote" not in done.stdout
    assert not (run / "checkpoints").exists() or not list((run / "checkpoints").iterdir())


def test_ray_payloads_travel_on_the_cpu_with_their_structure():
    from collections import namedtuple

    from deqlab.runs.executors.ray import to_cpu

    Pair = namedtuple("Pair", "x y")
    w = torch.ones(3, requires_grad=True)
    moved = to_cpu({"state": {"w": w * 2, "trail": [w, (1, "a")]}, "pair": Pair(1, 2)})
    assert not moved["state"]["w"].requires_grad and moved["state"]["w"].device.type == "cpu"
    assert moved["state"]["trail"][1] == (1, "a") and moved["pair"] == Pair(1, 2)
