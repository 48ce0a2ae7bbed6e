"""Readers of the stored formats (IDX, CIFAR-10 pickle batches), preprocessing, synthetic data."""

import gzip
import io
import json
import math
import pickle
import tarfile

import numpy as np
import pytest
import torch

from deqlab.data import (
    CifarFormatError,
    DataInfo,
    IdxFormatError,
    LabelledData,
    input_diagnostics,
    normalize_columns,
    read_cifar10,
    read_idx,
    synthetic_sphere,
    to_grayscale,
    write_cifar_batch,
    write_idx,
    zou_synthetic,
)
from deqlab.data.cifar import BATCH_DIR, SPLIT_BATCHES

INFO = DataInfo(source="test", seed=0, labels="gaussian", normalized=False, classes=(3, 8))

# ---------------------------------------------------------------- IDX


@pytest.mark.parametrize("suffix", ["", ".gz"])
@pytest.mark.parametrize("dtype", ["u1", "i1", "i2", "i4", "f4", "f8"])
def test_idx_round_trip_every_type(tmp_path, suffix, dtype):
    rng = np.random.default_rng(0)
    array = (rng.standard_normal((3, 4, 5)) * 50).astype(dtype)
    path = write_idx(tmp_path / f"a-idx3-ubyte{suffix}", array)
    back = read_idx(path)
    assert back.dtype == np.dtype(dtype) and back.shape == (3, 4, 5)
    np.testing.assert_array_equal(back, array)


def test_idx_bytes_follow_the_published_layout(tmp_path):
    """Header 00 00 08 03, big-endian uint32 sizes, then the pixels — as LeCun's page says."""
    labels = np.array([7, 2, 1], dtype=np.uint8)
    images = np.arange(2 * 2 * 3, dtype=np.uint8).reshape(2, 2, 3)
    write_idx(tmp_path / "l-idx1-ubyte", labels)
    write_idx(tmp_path / "i-idx3-ubyte.gz", images)
    assert (tmp_path / "l-idx1-ubyte").read_bytes() == bytes.fromhex("00000801 00000003 070201")
    raw = gzip.decompress((tmp_path / "i-idx3-ubyte.gz").read_bytes())
    assert raw[:16] == bytes.fromhex("00000803 00000002 00000002 00000003")
    assert raw[16:] == bytes(range(12))
    # big-endian multi-byte types
    write_idx(tmp_path / "s", np.array([1, 258], dtype=np.int32))
    assert (tmp_path / "s").read_bytes()[8:] == bytes.fromhex("00000001 00000102")


def test_idx_errors(tmp_path):
    (tmp_path / "junk").write_bytes(b"PK\x03\x04 not idx")
    with pytest.raises(IdxFormatError, match="not an IDX file"):
        read_idx(tmp_path / "junk")
    good = write_idx(tmp_path / "x", np.zeros((4, 3), dtype=np.uint8)).read_bytes()
    (tmp_path / "short").write_bytes(good[:-1])
    with pytest.raises(IdxFormatError, match=r"announces shape \(4, 3\)"):
        read_idx(tmp_path / "short")
    (tmp_path / "bad.gz").write_bytes(good)  # not gzip-compressed
    with pytest.raises(IdxFormatError, match="not a readable gzip file"):
        read_idx(tmp_path / "bad.gz")
    with pytest.raises(TypeError, match="`array` dtype must be one of"):
        write_idx(tmp_path / "c", np.zeros(2, dtype=np.complex64))


def test_idx_header_whose_sizes_overflow_int64_is_named_not_a_reshape_error(tmp_path):
    """65536⁴ elements = 2⁶⁴ wraps to 0 in int64: the size check must not be fooled."""
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(bytes.fromhex("00000804") + np.full(4, 65536, dtype=">u4").tobytes())
    with pytest.raises(
        IdxFormatError,
        match=rf"{path}: IDX header announces shape \(65536, 65536, 65536, 65536\) "
        r"\(18446744073709551636 bytes with the header\) but the file holds 20 bytes: the file "
        r"is truncated or its header is corrupt",
    ):
        read_idx(path)
    good = write_idx(tmp_path / "y", np.zeros((2, 3), dtype=np.uint8)).read_bytes()
    (tmp_path / "long").write_bytes(good + b"\x00")
    with pytest.raises(
        IdxFormatError, match="holds 19 bytes: the file has trailing bytes or its header"
    ):
        read_idx(tmp_path / "long")


def test_truncated_idx_gz_is_named(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (50, 28, 28), dtype=np.uint8)
    payload = write_idx(tmp_path / "full.gz", images).read_bytes()
    cut = tmp_path / "t10k-images-idx3-ubyte.gz"
    cut.write_bytes(payload[: len(payload) // 2])
    with pytest.raises(IdxFormatError, match=rf"{cut} is a truncated gzip file"):
        read_idx(cut)


# ---------------------------------------------------------------- CIFAR-10


def _batch(rng, n):
    return rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8), rng.integers(0, 10, n)


def test_cifar_batch_uses_the_real_pickle_layout(tmp_path):
    rng = np.random.default_rng(1)
    images, labels = _batch(rng, 3)
    path = write_cifar_batch(tmp_path / "data_batch_1", images, labels)
    payload = path.read_bytes()
    assert b"numpy.core.multiarray\n_reconstruct" in payload  # as written by numpy 1 / Python 2
    batch = pickle.loads(payload, encoding="bytes")  # the loading recipe of the CIFAR page
    assert set(batch) == {b"batch_label", b"labels", b"data", b"filenames"}
    assert batch[b"data"].shape == (3, 3072) and batch[b"data"].dtype == np.uint8
    # row = 1024 red, then 1024 green, then 1024 blue, each row-major
    np.testing.assert_array_equal(batch[b"data"][1, 1024 + 32 * 5 + 7], images[1, 1, 5, 7])


@pytest.mark.parametrize("stored_as", ["directory", "archive"])
def test_cifar_read_back_exactly(tmp_path, stored_as):
    rng = np.random.default_rng(2)
    batches = {name: _batch(rng, 4) for split in ("train", "test") for name in SPLIT_BATCHES[split]}
    folder = tmp_path / BATCH_DIR
    folder.mkdir()
    for name, (images, labels) in batches.items():
        write_cifar_batch(folder / name, images, labels)
    source = folder
    if stored_as == "archive":
        source = tmp_path / "cifar-10-python.tar.gz"
        with tarfile.open(source, "w:gz") as archive:
            archive.add(folder, arcname=BATCH_DIR)
    for split in ("train", "test"):
        images, labels = read_cifar10(source, split)
        want = [batches[name] for name in SPLIT_BATCHES[split]]
        np.testing.assert_array_equal(images, np.concatenate([w[0] for w in want]))
        np.testing.assert_array_equal(labels, np.concatenate([w[1] for w in want]))
        assert labels.dtype == np.int64


def test_cifar_refuses_code_and_malformed_batches(tmp_path):
    class Exploit:
        def __reduce__(self):
            return (print, ("pwned",))

    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "test_batch").write_bytes(pickle.dumps({b"data": Exploit()}, protocol=2))
    with pytest.raises(CifarFormatError, match=r"global __builtin__.print is not allowed"):
        read_cifar10(folder, "test")
    (folder / "test_batch").write_bytes(pickle.dumps({b"pixels": np.zeros(3)}, protocol=2))
    with pytest.raises(CifarFormatError, match="missing 'data'/'labels' keys"):
        read_cifar10(folder, "test")
    with pytest.raises(CifarFormatError, match="has no batch file 'data_batch_1'"):
        read_cifar10(folder, "train")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz"):
        pass
    (tmp_path / "empty.tar.gz").write_bytes(buffer.getvalue())
    with pytest.raises(CifarFormatError, match="has no member 'cifar-10-batches-py/test_batch'"):
        read_cifar10(tmp_path / "empty.tar.gz", "test")


# ---------------------------------------------------------------- preprocessing


def test_normalize_columns_gives_norm_sqrt_d_and_keeps_directions():
    X = torch.randn(7, 5) * torch.tensor([0.1, 1.0, 10.0, 3.0, 1e-3])
    Xn = normalize_columns(X)
    torch.testing.assert_close(torch.linalg.vector_norm(Xn, dim=0), torch.full((5,), math.sqrt(7)))
    cos = torch.nn.functional.cosine_similarity(X, Xn, dim=0)
    torch.testing.assert_close(cos, torch.ones(5))
    X[:, 3] = 0.0
    with pytest.raises(ValueError, match=r"1 zero column\(s\) \(indices 3\)"):
        normalize_columns(X)
    with pytest.raises(ValueError, match="`X` must be a 2-D tensor"):
        normalize_columns(torch.ones(3))


def test_grayscale_is_bt601_luma():
    images = torch.rand(2, 3, 4, 5)
    gray = to_grayscale(images)
    want = 0.299 * images[:, 0] + 0.587 * images[:, 1] + 0.114 * images[:, 2]
    torch.testing.assert_close(gray, want[:, None])
    with pytest.raises(ValueError, match="must have 3 channels"):
        to_grayscale(torch.rand(2, 1, 4, 5))


def test_diagnostics_match_the_full_gram_matrix():
    X = torch.randn(6, 37)
    X[:, 30] = -2.5 * X[:, 4]  # antiparallel pair: |cos| = 1
    unit = X / X.norm(dim=0)
    gram = (unit.T @ unit).abs().fill_diagonal_(0)
    for block_size in (1, 5, 37, 100):
        diag = input_diagnostics(X, block_size=block_size)
        assert diag.max_abs_cos == pytest.approx(float(gram.max()), abs=1e-15)
        assert sorted(diag.closest_pair) == [4, 30]
        assert diag.n_duplicates == 0


def test_diagnostics_orthogonal_and_duplicate_inputs():
    Q = torch.linalg.qr(torch.randn(8, 8))[0] * math.sqrt(8)  # orthogonal columns, norm √8
    diag = input_diagnostics(Q)
    assert diag.max_abs_cos < 1e-12 and diag.max_norm_error < 1e-12
    X = torch.cat([Q[:, :5], Q[:, [1, 1, 3]]], dim=1)  # three duplicates of two inputs
    diag = input_diagnostics(X)
    assert diag.n_duplicates == 3
    assert diag.max_abs_cos == pytest.approx(1.0)
    assert diag.warnings()[0].startswith("3 duplicate input(s)")


# ---------------------------------------------------------------- synthetic data


def test_sphere_points_lie_on_the_sphere_and_are_uniform():
    data = synthetic_sphere(4000, 3, seed=5)
    assert data.X.shape == (3, 4000) and data.y.shape == (4000,)
    torch.testing.assert_close(data.X.norm(dim=0), torch.full((4000,), math.sqrt(3)))
    # uniform on the sphere of radius √3: E[x] = 0, E[x xᵀ] = I (Monte Carlo, 5σ bands)
    assert data.X.mean(dim=1).abs().max() < 5 / math.sqrt(4000)
    torch.testing.assert_close(data.X @ data.X.T / 4000, torch.eye(3), atol=0.12, rtol=0)
    assert abs(float(data.y.mean())) < 5 / math.sqrt(4000)
    assert float(data.y.var()) == pytest.approx(1.0, abs=0.12)
    torch.testing.assert_close(synthetic_sphere(4000, 3, seed=5).X, data.X, rtol=0, atol=0)
    assert not torch.equal(synthetic_sphere(4000, 3, seed=6).X, data.X)
    uniform = synthetic_sphere(50, 3, seed=5, labels="uniform", dtype=torch.float32).y
    assert uniform.dtype == torch.float32 and 0 <= float(uniform.min()) < float(uniform.max()) < 1


def test_zou_synthetic_targets_are_minus_x_plus_noise():
    data = zou_synthetic(2000, 10, seed=3)
    residual = data.y + data.X  # = 0.1 ς
    assert data.X.shape == data.y.shape == (10, 2000)
    assert float(residual.std()) == pytest.approx(0.1, rel=0.05)
    assert float(data.X.std()) == pytest.approx(1.0, rel=0.05)
    exact = zou_synthetic(2000, 10, seed=3, noise=0.0)
    torch.testing.assert_close(exact.y, -exact.X, rtol=0, atol=0)
    torch.testing.assert_close(exact.X, data.X, rtol=0, atol=0)  # noise drawn after inputs
    box = zou_synthetic(2000, 10, inputs="uniform", seed=3).X
    assert -1 <= float(box.min()) < -0.99 and 0.99 < float(box.max()) <= 1
    with pytest.raises(ValueError, match="`inputs` must be one of 'gaussian', 'uniform'"):
        zou_synthetic(inputs="normal", seed=0)
    with pytest.raises(TypeError, match="`n` must be an int"):
        zou_synthetic(10.0, seed=0)


# ---------------------------------------------------------------- the container


def test_labelled_data_checks_shapes_warns_on_duplicates_and_moves():
    X = torch.randn(4, 6)
    with pytest.raises(ValueError, match=r"`y` must have shape \(n,\) or \(q, n\) with n = 6"):
        LabelledData(X=X, y=torch.zeros(5), name="t", info=INFO)
    with pytest.raises(ValueError, match=r"`X` must be 2-D \(d, n\)"):
        LabelledData(X=X[0], y=torch.zeros(6), name="t", info=INFO)
    X[:, 5] = X[:, 2]
    data = LabelledData(X=X, y=torch.zeros(6), name="twins", info=INFO)
    assert (data.d, data.n) == (4, 6)
    with pytest.warns(UserWarning, match=r"twins: 1 duplicate input\(s\).*λ\* = 0"):
        assert data.diagnostics.n_duplicates == 1
    assert data.diagnostics is data.diagnostics  # computed once
    single = data.to(dtype=torch.float32)
    assert single.X.dtype == single.y.dtype == torch.float32 and single.info is INFO
    indexed = LabelledData(X=X, y=torch.arange(6), name="t", info=INFO).to(dtype=torch.float32)
    assert indexed.y.dtype == torch.int64  # integer labels keep their type
    assert json.loads(json.dumps(INFO.as_dict()))["classes"] == [3, 8]
