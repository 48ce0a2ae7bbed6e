"""Fault catalogue of ``deqlab verify`` (issue 26): each bad input is one ``error:`` line on
stderr with exit code 2, its message asserted; and the one-line answers, the label column
and the layout read are printed."""

from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from deqlab.cli import app

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def one_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and result.stdout == "", result.output
    return lines[0]


def _wine(tmp_path):
    path = tmp_path / "wine.csv"
    path.write_text("alcohol,malic_acid,proline\n14.2,1.7,1065\n13.2,1.8,1050\n12.1,2.1,990\n")
    return path


def test_a_csv_without_a_label_column_is_refused(tmp_path):
    path = _wine(tmp_path)
    assert one_error(invoke("verify", "--input", path)) == (
        f"error: {str(path)!r} has no label column (named label, y, target; its columns: "
        "alcohol, malic_acid, proline): name it with --label-column NAME|INDEX"
    )


def test_non_numeric_labels_name_the_column_and_the_value(tmp_path):
    path = tmp_path / "bc.csv"
    path.write_text("radius,texture,diagnosis\n17.9,10.4,M\n20.5,17.8,B\n")
    assert one_error(invoke("verify", "--input", path, "--label-column", "diagnosis")) == (
        f"error: {str(path)!r}, line 2: the label column 'diagnosis' holds 'M', not a number; "
        "labels must be numbers (encode the classes as 0, 1, …)"
    )


def test_a_huge_width_is_refused_in_one_line_before_allocating():
    start = time.monotonic()
    result = invoke("verify", "--dataset", "sphere", "--n", "5", "--width", "1000000000000")
    assert one_error(result) == (
        "error: `width` must be <= 100000 (W alone would take 8e+24 bytes, m² float64 "
        "numbers); got 1000000000000"
    )
    assert time.monotonic() - start < 10


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_out_is_refused_before_computing(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = invoke("verify", "--dataset", "sphere", "--n", "5", "--out", locked / "page")
        assert one_error(result) == (
            f"error: --out {str(locked / 'page')!r} is not writable (no write permission on "
            f"{str(locked)!r})"
        )
    finally:
        locked.chmod(0o700)


def test_an_out_under_a_file_is_refused_before_computing(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    result = invoke("verify", "--dataset", "sphere", "--n", "5", "--out", afile / "page")
    assert one_error(result) == (
        f"error: --out {str(afile / 'page')!r} cannot be created: {str(afile)!r} is a file"
    )


def test_a_width_listed_twice_is_refused():
    result = invoke("verify", "--dataset", "sphere", "--n", "5", "--width", "20,20")
    assert one_error(result) == "error: --width lists a width twice: '20,20'"


def test_the_answers_labels_and_layout_are_printed(tmp_path):
    path = tmp_path / "d.csv"
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((8, 3)), rng.standard_normal(8)
    np.savetxt(path, np.column_stack([x, y]), delimiter=",", header="a,b,c,target", comments="")
    result = invoke("verify", "--input", path, "--standardize", "--normalize", "--width", "40")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{path}: n = 8, d = 3 (standardised, then normalised)")
    assert lines[1] == "X read as (n, d) = (8, 3): one sample per row; labels: column 'target'"
    assert lines[2] == "answers (one line per theorem):"
    assert lines[4].startswith("  Ling et al. 2023, Theorem 2: λ_0 ≥ mλ*/2: cannot be decided")
    assert "FAIL" not in next(x for x in lines if x.startswith("│ Theorem 2: λ_0"))
    assert "symbols: n samples, d features, m width (--width)" in result.stdout


def test_a_width_sweep_prints_a_table_and_draws_a_figure(tmp_path):
    result = invoke(
        "verify",
        "--dataset",
        "sphere",
        "--n",
        "6",
        "--d",
        "4",
        "--width",
        "8,16,64",
        "--out",
        tmp_path,
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "width sweep, K computed once: λ* = " in out
    assert [line.split()[0] for line in out.splitlines()[3:6]] == ["8", "16", "64"]
    assert "λ_0/(mλ*/2) (Theorem 2): " in out and (tmp_path / "width_sweep.png").is_file()


def test_a_file_of_zero_bytes_is_not_a_valid_npy_file(tmp_path):
    path = tmp_path / "zeros.npy"
    path.write_bytes(bytes(4096))  # stands in for 200 MB of zero bytes
    assert one_error(invoke("verify", "--input", path)) == (
        f"error: {str(path)!r} is not a valid .npy array file (it does not start with the NumPy "
        "header; pickled data is never loaded); save the array with numpy.save"
    )


def test_an_npy_header_that_claims_more_than_the_file_holds_is_refused(tmp_path):
    path = tmp_path / "liar.npy"
    np.save(path, np.zeros(100))
    raw = path.read_bytes().replace(b"(100,)", b"(1000000, 1000000)")
    header_end = raw.index(b"\n") + 1
    path.write_bytes(raw[:header_end] + bytes(800))
    message = one_error(invoke("verify", "--input", path))
    assert message.startswith(
        f"error: {str(path)!r} is not a valid .npy array file: its header "
        "claims shape (1000000, 1000000) float64 = 8 TB"
    )


def test_a_million_points_are_answered_from_a_named_subsample_in_seconds(monkeypatch):
    from deqlab.verification import subsample

    monkeypatch.setattr(subsample, "CAP", 300)  # the size memory allows, capped: seconds here
    start = time.monotonic()
    result = invoke("verify", "--dataset", "sphere", "--n", "1000000", "--d", "5", "--width", "50")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[2].startswith("beyond memory: n = 1,000,000 needs 16 TB for K and its work")
    assert "the subsample S = 300 of the 1,000,000 points (seed 0)" in lines[2]
    assert "at least" in result.stdout and time.monotonic() - start < 120
    assert "λ* ∈ [0, " in result.stdout  # certified from above by interlacing, below by K ⪰ 0


def test_training_past_memory_or_inputs_past_memory_are_refused_in_one_line():
    from deqlab.verification import verify

    X = np.lib.stride_tricks.as_strided(np.ones(1), shape=(10**6, 5), strides=(0, 0))
    with pytest.raises(ValueError, match=r"; --train needs the full data \(λ_τ and H\(τ\) are"):
        verify(X, np.zeros(10**6), train=5)  # --train needs the full data
    X = np.lib.stride_tricks.as_strided(np.ones(1), shape=(10**10, 5), strides=(0, 0))
    with pytest.raises(ValueError, match=r"^`X`: n = 10000000000 needs 1.6e\+09 TB for K"):
        verify(X, np.zeros(1))  # not even the inputs fit: refused before reading them


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--device", "gpu"), "error: `device` must be cpu, cuda or cuda:N (N a CUDA device"),
        (("--device", "cuda:7", "--model", "delm"), "error: device 'cuda:7' "),
    ],
)
def test_a_bad_device_is_one_line(args, says):
    result = invoke("verify", "--dataset", "sphere", "--n", "6", *args)
    assert one_error(result).startswith(says)


def test_the_monotone_dEQ_and_the_delm_run_on_the_cpu_only():
    from deqlab.verification import DELMCheck, verify
    from deqlab.verification.checks import _cpu_only

    with pytest.raises(ValueError, match=r"^`device` 'cuda' applies to --model relu-deq"):
        _cpu_only(DELMCheck(), "cuda")
    x = np.random.default_rng(0).standard_normal((6, 3))
    cpu = verify(x, np.arange(6.0), DELMCheck(), device="cpu")
    assert cpu.settings["device"] == "cpu"


def test_a_width_that_does_not_fit_is_named_not_n(monkeypatch):
    from deqlab.verification import memory

    monkeypatch.setattr(memory, "available_bytes", lambda device=None: 2 * 10**9)
    result = invoke("verify", "--dataset", "sphere", "--n", "40", "--d", "5", "--width", "30000")
    assert one_error(result) == (
        "error: `width`: m = 30000 needs 21.6 GB for W(0) and the m×m work of its solves and "
        "norms (3 m×m float64 arrays), but 2 GB of memory is available; the largest width "
        "that fits is 8494"  # √((2·10⁹ − 256 MiB headroom)/24)
    )


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads Linux's /proc")
def test_verify_under_a_ulimit_is_refused_naming_the_limit_and_its_estimate():
    """Issue 36: `ulimit -v 6000000; deqlab verify --width 50 --dataset sphere --n 30000
    --d 5` passed the memory check (15 GB against the machine's memory) and died 4 s later
    with "can't allocate memory". Since issue 35, past the limit verify answers from a
    subsample (tests/test_verification_subsample.py); trained, the data must fit whole."""
    from test_faults_data import ulimited

    args = ("verify", "--width", "50", "--dataset", "sphere", "--n", "30000", "--d", "5")
    done = ulimited(*args, "--train", "1")
    assert done.returncode == 2 and done.stdout == "", done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        "error: `--n`: n = 30000 needs 28.8 GB for K, the DEQ NTK over it and a work array, "
        "then H(0) of Eq. (4) (4 n×n float64 array(s)), "
    )
    says = re.search(
        r"but [\d.]+ GB of memory is available \(this process's address-space limit, `ulimit "
        r"-v` [\d.]+ GB, less the [\d.]+ [MG]B it has mapped\); the largest n that fits is "
        r"(\d+); --train needs the full data \(λ_τ and H\(τ\) are n×n\): without it, verify "
        r"answers from a subsample \(certified one-sided bounds\)$",
        line,
    )
    assert says is not None and 5_000 < int(says.group(1)) < 30_000


def test_an_allocation_that_fails_after_the_check_is_one_line(monkeypatch):
    """The last resort where an estimate falls short: torch's own allocation error, named."""
    import deqlab.verification

    def allocate(*args, **kwargs):
        return torch.empty(2**50, dtype=torch.uint8)  # 1 PB: fails here and now

    monkeypatch.setattr(deqlab.verification, "verify", allocate)
    line = one_error(invoke("verify", "--dataset", "sphere", "--n", "6", "--d", "3"))
    assert line.startswith(
        "error: out of memory: DefaultCPUAllocator: can't allocate memory: you tried to "
        "allocate 1125899906842624 bytes. Error code 12 (Cannot allocate memory); "
    )
    assert re.search(r"; [\d.]+ [kMGT]?B is available now \(.+\); a smaller --n or --width "
                     r"fits$", line)  # fmt: skip


# --- issue 36: complex X, two label columns, a semicolon file, overflowing scales, a .pt that
# --- holds no data, a width sweep of the DELM, training that stops at once -----------------


def _xy(n: int = 8, d: int = 3):
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, d)), rng.standard_normal(n)


def _csv(path, header: str, separator: str = ",", rows=None) -> None:
    X, y = _xy()
    rows = rows if rows is not None else np.column_stack([X, y])
    lines = [header] + [separator.join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")


def _complex(path):
    X, y = _xy()
    np.savez(path, X=X + 1j * X, y=y)


def _two_labels(path):
    _csv(path, "a,b,label,y")


def _huge_labels(path):
    X, y = _xy()
    np.savez(path, X=X, y=y * 1e300)


def _huge_inputs(path):
    X, y = _xy()
    np.savez(path, X=X * 1e200, y=y)


def _module(path):
    torch.save(torch.nn.Linear(3, 1), path)


def _random_bytes(path):
    path.write_bytes(np.random.default_rng(0).bytes(1000))


def _one_column(path):
    path.write_text("a b c target\n1 2 3 4\n5 6 7 9\n")


def _decimal_commas(path):
    path.write_text("a;b;target\n1,5;2;3\n2;1;0\n")


PT_HOLDS = (
    "it must hold a dict {'X': ..., 'y': ...} or a pair (X, y) of tensors or arrays, saved "
    "with torch.save({'X': X, 'y': y}, path)"
)
BAD_FILES = {  # name: (make the file, the one error line after "error: ", {file} its path)
    "complex.npz": (_complex, "X holds complex numbers (complex128); verify needs real numbers: "
                    "pass the real part (X.real) or the magnitudes (abs(X)) if that is what you "
                    "mean"),
    "both.csv": (_two_labels, "{file} has 2 label-like columns ('label', 'y'): name the label "
                 "column with --label-column NAME (the others are then features; drop those "
                 "that are not)"),
    "labels.npz": (_huge_labels, "y's largest entry is 1.01e+300 (label 6); verify takes entries "
                   "up to 1e+100 in magnitude: Φ(0) = ½‖y‖² and the bounds built on it overflow "
                   "float64; rescale the labels"),
    "inputs.npz": (_huge_inputs, "X's largest entry is 2.33e+200 (input 4, feature 0); verify "
                   "takes entries up to 1e+60 in magnitude: K, the NTK and Condition 1 carry up "
                   "to the fourth power of an input's norm, which overflows float64; rescale X, "
                   "or pass --normalize (normalize=True) to scale every input to norm √d"),
    "module.pt": (_module, "{file} holds a torch.nn.modules.linear.Linear, not data (it is read "
                  "with weights_only=True: nothing in it is run); " + PT_HOLDS),
    "random.pt": (_random_bytes, "{file} is not a file torch.save wrote; " + PT_HOLDS),
    "spaces.csv": (_one_column, "{file} needs at least two columns (features and the label), "
                   "separated by commas, semicolons or tabs; its first line has one"),
    "commas.csv": (_decimal_commas, "{file}, line 2: column 'a' holds '1,5', not a number; a "
                   "decimal comma? write decimal points (1.5, not 1,5)"),
}  # fmt: skip


@pytest.mark.parametrize("name", BAD_FILES)
def test_a_file_verify_cannot_check_is_one_line(tmp_path, name):
    make, says = BAD_FILES[name]
    path = tmp_path / name
    make(path)
    line = one_error(invoke("verify", "--input", path, "--width", "20"))
    assert line == "error: " + says.replace("{file}", repr(str(path)))


def test_a_semicolon_or_tab_separated_csv_is_read_and_said_so(tmp_path):
    for separator, word in ((";", "semicolon"), ("\t", "tab")):
        path = tmp_path / f"{word}.csv"
        _csv(path, separator.join(["a", "b", "c", "target"]), separator)
        result = invoke("verify", "--input", path, "--width", "20")
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines()[1] == (
            f"X read as (n, d) = (8, 3): one sample per row; labels: column 'target' "
            f"({word}-separated)"
        )


def test_huge_inputs_are_checked_after_normalize_scales_them(tmp_path):
    path = tmp_path / "inputs.npz"
    _huge_inputs(path)
    result = invoke("verify", "--input", path, "--normalize", "--width", "20", "--json")
    assert result.exit_code == 0, result.output
    small = tmp_path / "small.npz"
    X, y = _xy()
    np.savez(small, X=X, y=y)
    same = invoke("verify", "--input", small, "--normalize", "--width", "20", "--json")
    import json

    big, ref = json.loads(result.stdout), json.loads(same.stdout)
    assert big["numbers"]["lambda_star"] == pytest.approx(ref["numbers"]["lambda_star"], 1e-12)


def test_a_label_column_named_among_two_is_read(tmp_path):
    path = tmp_path / "both.csv"
    _two_labels(path)
    result = invoke("verify", "--input", path, "--label-column", "label", "--width", "20")
    assert result.exit_code == 0, result.output
    assert "X read as (n, d) = (8, 3): one sample per row; labels: column 'label'" in (
        result.stdout
    )  # y is a feature: the user said so


@pytest.mark.parametrize("model", ["delm", "mondeq"])
def test_a_width_sweep_of_another_model_is_one_line(model):
    args = ("--dataset", "sphere", "--n", "10", "--d", "5", "--width", "200,400", "--model", model)
    assert one_error(invoke("verify", *args)) == (
        "error: a width sweep (--width M,M,...) is for --model relu-deq without --train"
    )


@pytest.mark.parametrize(
    ("model", "says"),
    [("relu-deq", "step 1: ‖W‖₂ = "), ("mondeq", "step 1 with learning rate lr = 1000: ")],
)
def test_training_that_stops_at_once_says_why_in_the_text(model, says):
    args = ("--dataset", "sphere", "--n", "10", "--d", "5", "--width", "40", "--model", model)
    result = invoke("verify", *args, "--train", "5", "--eta", "1e3")
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.stdout.splitlines() if "training: stopped at" in line]
    assert says in row
