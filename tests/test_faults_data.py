"""The fault catalogue of ``deqlab kernel``, ``deqlab data`` and the data readers: every bad
input is one ``error:`` line naming the argument or file and what was expected, exit code 2
for a usage error (1 for a command that ran and failed), and nothing left behind."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from test_faults_executors import invoke, one_error, read_only

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


def _zero_row(path: Path) -> Path:
    array = np.ones((4, 3))
    array[1, :] = 0
    return _npy(path, array)


def _zeros(path: Path) -> Path:
    """A stand-in for 200 MB of zero bytes (the same first bytes, a smaller file)."""
    path.write_bytes(bytes(4096))
    return path


def _header_claims_more(path: Path) -> Path:
    """A header announcing 10⁶ × 10⁶ float64 over 800 bytes of data."""
    with open(path, "wb") as handle:
        header = {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)}
        np.lib.format.write_array_header_1_0(handle, header)
        handle.write(bytes(800))
    return path


def _npz(path: Path) -> Path:
    np.savez(path.with_suffix(".npz"), X=np.ones((4, 3)))
    return path.with_suffix(".npz")


NOT_NPY = "is not a valid .npy array file"
BAD_INPUTS = {  # name: (make the file, what the one error line says after the file's name)
    "garbage": (
        lambda p: p.write_bytes(os.urandom(256)) and p,
        f" {NOT_NPY} (it does not start with the NumPy header; pickled data is never loaded); "
        "save the array with numpy.save",
    ),
    "pickle": (
        lambda p: p.write_bytes(__import__("pickle").dumps({"X": [1.0, 2.0]})) and p,
        f" {NOT_NPY} (it does not start with the NumPy header; pickled data is never loaded)",
    ),
    "empty": (lambda p: p.write_bytes(b"") or p, f" {NOT_NPY} (it does not start with"),
    "header-only": (_header_only, f" {NOT_NPY}: EOF: reading array header"),
    "truncated": (
        _truncated,
        f" {NOT_NPY}: its header claims shape (4, 3) float64 = 96 bytes, but the file holds "
        "76 bytes of data",
    ),
    "header-claims-1e12": (
        _header_claims_more,
        f" {NOT_NPY}: its header claims shape (1000000, 1000000) float64 = 8 TB, but the file "
        "holds 800 bytes of data",
    ),
    "zero-bytes": (_zeros, f" {NOT_NPY} (it does not start with the NumPy header;"),
    "object": (
        lambda p: _npy(p, np.array([{"a": 1}], dtype=object), allow_pickle=True),
        " holds Python objects (dtype object), not numbers; pickled data is never loaded",
    ),
    "npz": (_npz, " is a .npz archive, not a .npy array file; save the one array with"),
    "vector": (
        lambda p: _npy(p, np.ones(5)),
        " holds an array of shape (5,); expected X of shape (n, d) with n >= 1 samples (rows)",
    ),
    "cube": (lambda p: _npy(p, np.ones((2, 3, 4))), " holds an array of shape (2, 3, 4);"),
    "complex": (
        lambda p: _npy(p, np.ones((3, 4)) * 1j),
        " holds an array of dtype complex128; expected real numbers (float or int)",
    ),
    "strings": (lambda p: _npy(p, np.array([["a", "b"]])), " holds an array of dtype <U1;"),
    "no-points": (
        lambda p: _npy(p, np.zeros((3, 0))),
        " holds an array of shape (3, 0); expected X of shape (n, d) with n >= 1 samples",
    ),
    "nan": (_with_nan, " has 1 NaN/Inf entries; the data must be finite"),
    "zero-row": (_zero_row, " has 1 all-zero row(s) (samples 1); the kernels need nonzero"),
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
    assert result.exit_code == 0 and "d = 3, n = 4" in result.output


def test_kernel_reads_one_sample_per_row_as_verify_does_and_says_so(tmp_path):
    X = np.random.default_rng(0).standard_normal((300, 30))
    path = _npy(tmp_path / "X.npy", X)
    result = invoke("kernel", "--input", path, "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert (doc["n"], doc["d"]) == (300, 30)
    assert doc["data"] == f"{path}, read as (n, d) = (300, 30): one sample per row"
    text = invoke("kernel", "--input", path).output
    assert f"data: {path}, read as (n, d) = (300, 30): one sample per row, d = 30, n = 300" in text


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
        "error: `--sigma-w2` must be in (0, 1)",
    ),
    "sigma-negative": (
        ("--dataset", "sphere", "--n", "5", "--sigma-w2", "-0.1"),
        "error: `--sigma-w2` must be in (0, 1)",
    ),
    "no-points": (("--dataset", "sphere", "--n", "0"), "error: `--n` must be >= 1; got 0"),
    "n-beyond-a-class": (
        ("--dataset", "digits", "--n", "1000"),
        "error: `--n`=1000 (500 per class) exceeds the 178 samples of class 0 in ",
    ),
    "n-not-a-multiple": (
        ("--dataset", "digits", "--n", "7"),
        "error: `--n`=7 must be a multiple of the 2 classes for 'digits'",
    ),
    "device-word": (
        ("--dataset", "sphere", "--n", "5", "--device", "gpu"),
        "error: `device` must be cpu, cuda or cuda:N (N a CUDA device index); got 'gpu'",
    ),
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


def test_kernel_saving_a_matrix_that_cannot_fit_is_refused_within_seconds(tmp_path):
    """Past memory kernel answers from a subsample (tests/test_cli_kernel.py); --save needs
    the whole matrix."""
    start = time.monotonic()
    args = ("--dataset", "sphere", "--n", "1000000", "--d", "5", "--save", tmp_path / "K.npy")
    result = invoke("kernel", *args)
    assert time.monotonic() - start < 10
    assert result.exit_code == 2
    line = one_error(result)
    assert line.startswith("error: `--n`: n = 1000000 needs 16 TB for the kernel matrix and the ")
    assert re.search(
        r"memory is available \(.+\); the largest n that fits is \d+; --save writes the whole "
        r"matrix: without it, deqlab kernel answers from a subsample \(certified one-sided "
        r"bounds\)$",
        line,
    )


#: Run as ``python -c`` with the headroom and the command: the address-space limit is set
#: once deqlab is imported, to what the process has mapped plus the headroom (an import of
#: a CUDA build of torch alone maps several GB: a fixed ``ulimit -v`` would refuse it first).
ULIMITED = """
import resource, sys
import deqlab.cli
status = open("/proc/self/status").read().splitlines()
mapped = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
limit = mapped + int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.argv = ["deqlab", *sys.argv[2:]]
deqlab.cli.main()
"""


def ulimited(*args: object, headroom: int = 5 * 10**9) -> subprocess.CompletedProcess:
    """``deqlab ARGS`` in a process whose address space (``ulimit -v``) leaves it
    ``headroom`` bytes beyond what it has mapped."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-c", ULIMITED, str(headroom), *map(str, args)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


ULIMIT_V_SAYS = (
    r"but [\d.]+ GB of memory is available \(this process's address-space limit, "
    r"`ulimit -v` [\d.]+ GB, less the [\d.]+ [MG]B it has mapped\); the largest n that fits "
    r"is (\d+); --save writes the whole matrix"
)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads Linux's /proc")
def test_kernel_under_a_ulimit_is_refused_naming_the_limit_and_its_estimate(tmp_path):
    """Issue 36: the check compared 14.4 GB with the machine's memory and passed; the
    allocation then failed with a traceback. The process's own limit is the bound (past it,
    kernel answers from a subsample; --save needs the whole matrix)."""
    args = ("--dataset", "sphere", "--n", "30000", "--d", "5", "--save", tmp_path / "K.npy")
    done = ulimited("kernel", *args)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        "error: `--n`: n = 30000 needs 14.4 GB for the kernel matrix and the work array of "
        "its least eigenvalue (2 n×n float64 array(s)), "
    )
    largest = int(re.search(ULIMIT_V_SAYS, line).group(1))
    assert 10_000 < largest < 30_000


def _mnist(root: Path, images: np.ndarray) -> Path:
    from deqlab.data import write_idx

    labels = np.tile(np.arange(10, dtype=np.uint8), len(images) // 10)
    write_idx(root / "mnist" / "train-images-idx3-ubyte", images)
    write_idx(root / "mnist" / "train-labels-idx1-ubyte", labels)
    return root / "mnist" / "train-images-idx3-ubyte"


def test_kernel_on_blank_images_names_the_file_and_the_cause(tmp_path):
    path = _mnist(tmp_path, np.zeros((60, 28, 28), dtype=np.uint8))
    result = invoke("kernel", "--dataset", "mnist", "--data-dir", tmp_path, "--n", "8")
    assert result.exit_code == 2
    line = one_error(result)
    assert line.startswith(f"error: {str(path)!r}: 8 of the 8 images drawn are all zero (images ")
    assert line.endswith(
        ", ... of the file); a blank image cannot be scaled to norm √d (Assumption 2) and gives "
        "the kernels nothing: is the file a valid copy?"
    )


def test_kernel_on_images_with_no_pixels_names_the_file(tmp_path):
    path = _mnist(tmp_path, np.zeros((60, 0, 28), dtype=np.uint8))
    result = invoke("kernel", "--dataset", "mnist", "--data-dir", tmp_path, "--n", "8")
    assert result.exit_code == 2
    assert one_error(result) == (
        f"error: {str(path)!r} holds images of shape (1, 0, 28) (channels, height, width): they "
        "have no pixels"
    )


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
    assert not (tmp_path / "semeion").exists()  # a failed fetch leaves no empty directory
    deeper = tmp_path / "new" / "root"
    invoke("data", "fetch", "semeion", "--dir", deeper, "--base-url", "http://127.0.0.1:1/")
    assert not (tmp_path / "new").exists()


def test_data_fetch_of_a_manual_data_set_says_where_to_get_it():
    from deqlab.data.registry import MANUAL_DATASETS

    result = invoke("data", "fetch", "imagenet")
    assert result.exit_code == 2
    assert one_error(result) == (
        f"error: 'imagenet' is fetched by hand: get {MANUAL_DATASETS['imagenet'].source}, and "
        f"put it under <data root>/imagenet/ as {MANUAL_DATASETS['imagenet'].layout}; "
        "`deqlab data list` then finds it"
    )


def test_data_list_of_a_regular_file_is_refused(tmp_path):
    (tmp_path / "afile").write_text("")
    result = invoke("data", "list", "--dir", tmp_path / "afile")
    assert result.exit_code == 2
    assert one_error(result) == (
        f"error: `--dir` {str(tmp_path / 'afile')!r} is not a directory; give the data root "
        "directory"
    )


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
