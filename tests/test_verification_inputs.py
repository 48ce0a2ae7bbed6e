"""The data of deqlab verify: every file format, every unusable input as one clear
InputError, normalisation, and Assumption 2 as hypotheses that hold and that fail."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from deqlab.statements import Verdict
from deqlab.verification.files import load_file
from deqlab.verification.inputs import InputError, assumption2, load_dataset, prepare

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 3))
Y = RNG.standard_normal(6)


def test_prepare_turns_rows_into_columns_in_float64():
    inputs = prepare(X.astype(np.float32), Y.tolist(), name="mine")
    assert inputs.X.shape == (3, 6) and inputs.X.dtype == torch.float64
    assert torch.allclose(inputs.X, torch.tensor(X.T, dtype=torch.float64), atol=1e-6)
    assert inputs.n == 6 and inputs.d == 3 and inputs.name == "mine"
    summary = inputs.summary()
    assert summary["n"] == 6 and summary["d"] == 3 and summary["normalized"] is False
    assert summary["max_abs_cos"] == pytest.approx(inputs.diagnostics.max_abs_cos)


def test_normalize_scales_every_input_to_norm_sqrt_d():
    inputs = prepare(X, Y, normalize=True)
    assert torch.allclose(inputs.X.norm(dim=0), torch.full((6,), math.sqrt(3), dtype=torch.float64))
    assert inputs.diagnostics.max_norm_error < 1e-12 and inputs.normalized


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        (X[:, 0], Y, "X must be 2-D"),
        (X, Y[:5], "the labels have the wrong length: y has shape (5,), X has n = 6"),
        (np.zeros((0, 3)), np.zeros(0), "the data are empty"),
        (X[:1], Y[:1], "one sample (n = 1)"),
        (np.where(np.arange(18).reshape(6, 3) == 4, np.nan, X), Y, "X has 1 NaN/Inf entries"),
        (X, np.where(np.arange(6) == 2, np.inf, Y), "y has 1 NaN/Inf entries"),
        (np.vstack([X[:5], X[2:3]]), Y, "inputs 2 and 5 are identical"),
        (np.vstack([X[:5], np.zeros((1, 3))]), Y, "input 5 is all zeros"),
        ([["a", "b"], ["c", "d"]], [1, 2], "X must hold numbers"),
    ],
)
def test_unusable_data_is_one_clear_input_error(x, y, message):
    with pytest.raises(InputError) as err:
        prepare(x, y)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_duplicates_explain_that_no_width_makes_condition1_hold():
    with pytest.raises(InputError, match="no width makes Condition 1"):
        prepare(np.vstack([X, X[:1]]), np.append(Y, 0.0))


def test_parallel_inputs_become_duplicates_only_when_normalised():
    parallel = np.vstack([X[:5], 2 * X[:1]])
    prepare(parallel, Y)  # reported (Assumption 2), not refused
    with pytest.raises(InputError, match="identical"):
        prepare(parallel, Y, normalize=True)


def test_standardize_gives_each_feature_zero_mean_and_unit_variance():
    inputs = prepare(X * [1.0, 10.0, 100.0] + 5.0, Y, standardize=True)
    assert torch.allclose(inputs.X.mean(dim=1), torch.zeros(3, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(inputs.X.var(dim=1, correction=0), torch.ones(3, dtype=torch.float64))
    assert inputs.standardized and not inputs.normalized
    both = prepare(X, Y, standardize=True, normalize=True)  # standardised, then to the sphere
    assert torch.allclose(both.X.norm(dim=0), torch.full((6,), math.sqrt(3), dtype=torch.float64))
    with pytest.raises(InputError, match=r"^feature 1 is constant .*--standardize cannot scale it"):
        prepare(np.column_stack([X[:, 0], np.ones(6), X[:, 1]]), Y, standardize=True)


def test_the_summary_says_the_layout_read_and_where_the_labels_were():
    summary = prepare(X, Y, labels="column 'target'").summary()
    assert summary["layout"] == "X read as (n, d) = (6, 3): one sample per row"
    assert summary["labels"] == "column 'target'" and summary["standardized"] is False


def test_a_column_label_vector_is_accepted():
    assert prepare(X, Y[:, None]).y.shape == (6,)


# ---- files ----------------------------------------------------------------------------------


def _check(got):
    x, y, _ = got
    assert np.allclose(np.asarray(x, dtype=float), X) and np.allclose(np.asarray(y, dtype=float), Y)


def test_npz_npy_pt_files(tmp_path):
    np.savez(tmp_path / "d.npz", X=X, y=Y)
    _check(load_file(tmp_path / "d.npz"))
    np.save(tmp_path / "d.npy", np.column_stack([X, Y]))
    _check(load_file(tmp_path / "d.npy"))
    torch.save({"X": torch.tensor(X), "y": torch.tensor(Y)}, tmp_path / "d.pt")
    _check(load_file(tmp_path / "d.pt"))
    torch.save((torch.tensor(X), torch.tensor(Y)), tmp_path / "pair.pt")
    _check(load_file(tmp_path / "pair.pt"))


def test_csv_with_and_without_header_and_a_chosen_label_column(tmp_path):
    table = np.column_stack([Y, X])
    plain = tmp_path / "plain.csv"
    np.savetxt(plain, np.column_stack([X, Y]), delimiter=",")
    named = tmp_path / "named.csv"
    np.savetxt(named, np.column_stack([X, Y]), delimiter=",", header="a,b,c,Target", comments="")
    _check(load_file(named))  # the column named target, any case
    assert load_file(named).labels == "column 'Target'"
    other = tmp_path / "other.csv"
    np.savetxt(other, table, delimiter=",", header="score,a,b,c", comments="")
    _check(load_file(other, label_column="score"))
    assert load_file(other, label_column="score").labels == "column 'score'"
    _check(load_file(plain, label_column="-1"))
    _check(load_file(plain, label_column="3"))
    assert load_file(plain, label_column="3").labels == "column 3"


def test_a_csv_without_a_label_column_is_refused_not_guessed(tmp_path):
    wine = tmp_path / "wine.csv"
    wine.write_text("alcohol,malic_acid,proline\n14.2,1.7,1065\n13.2,1.8,1050\n")
    with pytest.raises(InputError) as err:
        load_file(wine)
    assert str(err.value) == (
        f"{str(wine)!r} has no label column (named label, y, target; its columns: alcohol, "
        "malic_acid, proline): name it with --label-column NAME|INDEX"
    )
    plain = tmp_path / "plain.csv"
    plain.write_text("1,2,3\n4,5,6\n")
    with pytest.raises(InputError, match="it has no header line\\): name it with --label-column"):
        load_file(plain)


def test_a_non_numeric_label_names_the_column_and_the_value(tmp_path):
    path = tmp_path / "bc.csv"
    path.write_text("radius,texture,diagnosis\n17.9,10.4,M\n20.5,17.8,B\n")
    with pytest.raises(InputError) as err:
        load_file(path, label_column="diagnosis")
    assert str(err.value) == (
        f"{str(path)!r}, line 2: the label column 'diagnosis' holds 'M', not a number; labels "
        "must be numbers (encode the classes as 0, 1, …)"
    )
    path.write_text("radius,texture,y\n17.9,n/a,1\n")
    with pytest.raises(InputError, match=r"line 2: column 'texture' holds 'n/a', not a number$"):
        load_file(path)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("x.txt", b"1,2", "the extension must be one of .npy, .npz, .pt, .csv"),
        ("x.npz", b"not a zip file", "cannot read"),
        ("x.npy", b"\x93NUMPY garbage", "is not a valid .npy array file"),
        ("x.pt", b"garbage", "is not a file torch.save wrote; it must hold a dict {'X'"),
        ("x.csv", b"a,b,y\n1,2,3\n4,5\n", "line 3: 2 columns, the first line has 3"),
        ("x.csv", b"a,y\n1,2\n3,oops\n", "line 3: the label column 'y' holds 'oops'"),
        ("x.csv", b"1\n2\n", "needs at least two columns"),
        ("x.csv", b"", "is empty"),
    ],
)
def test_unreadable_files_are_one_clear_input_error(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError) as err:
        load_file(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_file_problems_name_what_is_missing(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_file(tmp_path / "absent.npz")
    np.savez(tmp_path / "d.npz", features=X)
    with pytest.raises(InputError, match="arrays named X and y; it has features"):
        load_file(tmp_path / "d.npz")
    np.save(tmp_path / "d.npy", Y)
    with pytest.raises(InputError, match=r"one \(n, d \+ 1\) array"):
        load_file(tmp_path / "d.npy")
    torch.save([1, 2, 3], tmp_path / "d.pt")
    with pytest.raises(InputError, match=r"a pair \(X, y\) of tensors .*; it holds a list$"):
        load_file(tmp_path / "d.pt")
    with pytest.raises(InputError, match=r"applies to \.csv files only"):
        load_file(tmp_path / "d.pt", label_column="y")
    np.savetxt(tmp_path / "d.csv", np.column_stack([X, Y]), delimiter=",")
    with pytest.raises(InputError, match="neither a column name"):
        load_file(tmp_path / "d.csv", label_column="label")


def test_load_dataset_transposes_the_registry_data():
    x, y, name = load_dataset("sphere", n=5, d=4, seed=2)
    assert x.shape == (5, 4) and y.shape == (5,) and name == "sphere (seed 2)"
    assert torch.allclose(x.norm(dim=1), torch.full((5,), 2.0, dtype=x.dtype))


# ---- Assumption 2 ---------------------------------------------------------------------------


def _verdicts(inputs):
    return {s.name: s.verdict for s in assumption2(inputs)}


NORMS = "Assumption 2 (i): ‖x_i‖ = √d"
PARALLEL = "Assumption 2 (i): no two inputs parallel"


def test_assumption2_holds_on_the_sphere():
    x, y, _ = load_dataset("sphere", n=8, d=5)
    assert _verdicts(prepare(x, y)) == {NORMS: Verdict.HOLDS, PARALLEL: Verdict.HOLDS}


def test_assumption2_norms_unmet_off_the_sphere_and_holds_after_normalize():
    found = {s.name: s for s in assumption2(prepare(X, Y))}
    assert found[NORMS].verdict is Verdict.UNMET and "--normalize" in found[NORMS].needs
    assert _verdicts(prepare(X, Y, normalize=True))[NORMS] is Verdict.HOLDS


def test_assumption2_parallel_pair_unmet_names_the_pair():
    found = {s.name: s for s in assumption2(prepare(np.vstack([X[:5], -3 * X[1:2]]), Y))}
    assert found[PARALLEL].verdict is Verdict.UNMET
    assert "inputs 1 and 5" in found[PARALLEL].measured
