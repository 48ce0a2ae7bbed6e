"""get_dataset and load_images (deqlab/data/registry.py): locating stored data, the paper's
subsets, labels, Assumption 2, errors; and `deqlab data list` on the same stored files."""

import math
import tarfile
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch
from typer.testing import CliRunner

from deqlab.cli.app import app
from deqlab.data import (
    DATASETS,
    DatasetNotFoundError,
    dataset_splits,
    get_dataset,
    load_images,
    n_classes,
    write_cifar100_file,
    write_cifar_batch,
    write_idx,
    write_semeion,
    write_svhn,
)
from deqlab.data.cifar import BATCH_DIR, CIFAR100_DIR, SPLIT_BATCHES

FASHION = Path("/usr/share/datasets/fashion-mnist")
COUNTS = np.array([7, 9, 4, 6, 5, 3, 8, 6, 5, 7])  # images per class in the fake splits


def _fake_split(rng, shape, start=0):
    """Images whose first two pixels encode their index (so a column names its source)."""
    labels = rng.permutation(np.repeat(np.arange(10), COUNTS))
    images = rng.integers(1, 256, (len(labels), *shape), dtype=np.uint8)
    flat = images.reshape(len(labels), -1)
    index = start + np.arange(len(labels))
    flat[:, 0], flat[:, 1] = index % 256, 1 + index // 256
    return images, labels


def _write_mnist(directory: Path, suffix: str, seed: int = 0):
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    splits = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images, labels = _fake_split(rng, (28, 28))
        write_idx(directory / f"{prefix}-images-idx3-ubyte{suffix}", images)
        write_idx(directory / f"{prefix}-labels-idx1-ubyte{suffix}", labels.astype(np.uint8))
        splits[split] = images, labels
    return splits


def _source_index(X_raw: torch.Tensor) -> np.ndarray:
    """Recover the stored index of each column of an un-normalized X (pixels / 255)."""
    pixels = torch.round(X_raw[:2] * 255).to(torch.int64).numpy()
    return pixels[0] + 256 * (pixels[1] - 1)


@pytest.fixture
def mnist_root(tmp_path):
    return tmp_path, _write_mnist(tmp_path / "mnist", ".gz")


def test_subset_is_the_documented_seeded_draw(mnist_root):
    root, splits = mnist_root
    images, labels = splits["train"]
    data = get_dataset(
        "mnist", n_per_class=3, classes=(7, 2), seed=11, normalize=False, data_dir=root
    )
    assert data.X.shape == (784, 6) and data.X.dtype == torch.float64
    source = _source_index(data.X)
    # exactly the documented draw: one generator, randperm of each class's members in order
    generator = torch.Generator().manual_seed(11)
    want = []
    for c in (7, 2):
        members = np.flatnonzero(labels == c)
        want.extend(members[torch.randperm(len(members), generator=generator)[:3].numpy()])
    np.testing.assert_array_equal(source, want)
    np.testing.assert_array_equal(labels[source], [7, 7, 7, 2, 2, 2])
    torch.testing.assert_close(data.y, torch.tensor([-1.0, -1, -1, 1, 1, 1]))
    # pixels are the stored ones over 255, flattened row-major into the columns
    torch.testing.assert_close(data.X.T, torch.from_numpy(images[source].reshape(6, -1)) / 255)
    assert data.info.source == str(root / "mnist" / "train-images-idx3-ubyte.gz")
    assert data.info.classes == (7, 2) and data.info.n_per_class == 3
    # the same seed gives the same data; another seed another subset
    again = get_dataset(
        "mnist", n_per_class=3, classes=(7, 2), seed=11, normalize=False, data_dir=root
    )
    torch.testing.assert_close(again.X, data.X, rtol=0, atol=0)
    other = get_dataset(
        "mnist", n_per_class=3, classes=(7, 2), seed=12, normalize=False, data_dir=root
    )
    assert not torch.equal(other.X, data.X)


def test_normalization_labels_and_split(mnist_root):
    root, splits = mnist_root
    raw = get_dataset("mnist", n=8, seed=3, normalize=False, data_dir=root, labels="gaussian")
    data = get_dataset("mnist", n=8, seed=3, data_dir=root, labels="gaussian")
    torch.testing.assert_close(data.X, math.sqrt(784) * raw.X / raw.X.norm(dim=0))
    torch.testing.assert_close(data.X.norm(dim=0), torch.full((8,), 28.0))
    torch.testing.assert_close(data.y, raw.y, rtol=0, atol=0)
    # the labels come from the same generator, after the subset
    generator = torch.Generator().manual_seed(3)
    for members in (COUNTS[0], COUNTS[1]):
        torch.randperm(int(members), generator=generator)
    torch.testing.assert_close(data.y, torch.randn(8, generator=generator))
    uniform = get_dataset(
        "mnist", n=8, seed=3, data_dir=root, labels="uniform", dtype=torch.float32
    )
    assert uniform.X.dtype == uniform.y.dtype == torch.float32
    assert float(uniform.y.min()) >= 0 and float(uniform.y.max()) < 1
    index = get_dataset("mnist", n_per_class=2, classes=(4, 0, 9), labels="index", data_dir=root)
    torch.testing.assert_close(index.y, torch.tensor([0, 0, 1, 1, 2, 2]))
    test_labels = splits["test"][1]
    test = get_dataset("mnist", n_per_class=2, split="test", normalize=False, data_dir=root)
    np.testing.assert_array_equal(test_labels[_source_index(test.X)], [0, 0, 1, 1])
    assert data.diagnostics.n_duplicates == 0 and 0 < data.diagnostics.max_abs_cos < 1


def test_raw_idx_files_in_the_root_and_the_env_variable(tmp_path, monkeypatch):
    splits = _write_mnist(tmp_path, "")  # raw (uncompressed) files directly in the root
    monkeypatch.setenv("DEQLAB_DATA", str(tmp_path))
    raw = load_images("mnist", "test")
    assert raw.source == tmp_path / "t10k-images-idx3-ubyte"
    np.testing.assert_array_equal(raw.images[:, 0], splits["test"][0])
    np.testing.assert_array_equal(raw.labels, splits["test"][1])


@pytest.mark.parametrize("stored_as", ["directory", "archive"])
def test_cifar10_grayscale_and_colour(tmp_path, stored_as):
    rng = np.random.default_rng(4)
    folder = tmp_path / "cifar10" / BATCH_DIR
    folder.mkdir(parents=True)
    stored = {}
    for i, name in enumerate(SPLIT_BATCHES["train"] + SPLIT_BATCHES["test"]):
        images, labels = _fake_split(rng, (3, 32, 32), start=i * COUNTS.sum())
        write_cifar_batch(folder / name, images, labels)
        stored[name] = images, labels
    if stored_as == "archive":
        with tarfile.open(tmp_path / "cifar10" / "cifar-10-python.tar.gz", "w:gz") as archive:
            archive.add(folder, arcname=BATCH_DIR)
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
    train = [stored[name] for name in SPLIT_BATCHES["train"]]
    images, labels = (np.concatenate([t[i] for t in train]) for i in (0, 1))
    colour = get_dataset(
        "cifar10", n_per_class=4, grayscale=False, normalize=False, data_dir=tmp_path
    )
    source = _source_index(colour.X)
    assert colour.X.shape == (3072, 8)
    np.testing.assert_array_equal(labels[source], [0] * 4 + [1] * 4)
    torch.testing.assert_close(colour.X.T, torch.from_numpy(images[source].reshape(8, -1)) / 255)
    gray = get_dataset("cifar10", n_per_class=4, normalize=False, data_dir=tmp_path)
    rgb = images[source].astype(np.float64) / 255
    luma = 0.299 * rgb[:, 0] + 0.587 * rgb[:, 1] + 0.114 * rgb[:, 2]
    assert gray.X.shape == (1024, 8) and gray.info.image_shape == (1, 32, 32)
    torch.testing.assert_close(gray.X.T, torch.from_numpy(luma.reshape(8, -1)))


def test_sphere_and_digits_by_name():
    sphere = get_dataset("sphere", n=20, d=30, seed=2)
    assert sphere.X.shape == (30, 20) and sphere.info.labels == "gaussian"
    torch.testing.assert_close(sphere.X.norm(dim=0), torch.full((20,), math.sqrt(30)))
    assert get_dataset("sphere").X.shape == (1000, 1000)  # the paper's n = d = 1000
    digits = get_dataset("digits", n_per_class=100, classes=(3, 8))
    assert digits.X.shape == (64, 200) and digits.info.source.endswith("digits.csv.gz")
    torch.testing.assert_close(digits.X.norm(dim=0), torch.full((200,), 8.0))
    assert digits.diagnostics.n_duplicates == 0


def test_bad_input_is_a_clear_error(mnist_root, tmp_path):
    root, _ = mnist_root
    with pytest.raises(
        ValueError, match="`name` must be one of 'sphere', 'mnist', 'fashion-mnist'"
    ):
        get_dataset("mnist-fashion")
    with pytest.raises(
        ValueError,
        match=r"`classes` must lie in 0..9; got 10 in \(0, 10\) \('mnist' has 10 classes\)",
    ):
        get_dataset("mnist", classes=(0, 10), data_dir=root)
    with pytest.raises(ValueError, match="`n_per_class`=8 exceeds the 7 samples of class 0"):
        get_dataset("mnist", n_per_class=8, data_dir=root)
    with pytest.raises(ValueError, match="`n`=9 must be a multiple of the 2 classes"):
        get_dataset("mnist", n=9, data_dir=root)
    with pytest.raises(ValueError, match="`n`=10 disagrees with `n_per_class`=4"):
        get_dataset("mnist", n=10, n_per_class=4, data_dir=root)
    with pytest.raises(ValueError, match="`labels`='class' gives ±1 labels and needs exactly 2"):
        get_dataset("mnist", n_per_class=1, classes=(0, 1, 2), data_dir=root)
    with pytest.raises(ValueError, match="`n_per_class` does not apply to 'sphere'"):
        get_dataset("sphere", n_per_class=5)
    with pytest.raises(ValueError, match="`d` applies only to 'sphere'"):
        get_dataset("mnist", d=5, data_dir=root)
    with pytest.raises(ValueError, match="`split` must be one of 'train', 'test'; got 'val'"):
        get_dataset("mnist", split="val", data_dir=root)
    with pytest.raises(TypeError, match=r"`dtype` must be a floating-point torch\.dtype"):
        get_dataset("mnist", dtype=torch.int64, data_dir=root)
    with pytest.raises(TypeError, match=r"`dtype` must be a floating-point torch\.dtype"):
        get_dataset("sphere", n=3, d=2, dtype="float64")
    with pytest.raises(ValueError, match="`split` must be one of 'train'; got 'test'"):
        get_dataset("digits", n_per_class=5, split="test")
    with pytest.raises(TypeError, match="`classes` must be a sequence of ints; got int"):
        get_dataset("mnist", classes=1, data_dir=root)


def test_missing_and_wrong_files(tmp_path):
    empty = tmp_path / "empty"
    with pytest.raises(DatasetNotFoundError) as err:
        get_dataset("mnist", data_dir=empty)
    message = str(err.value)
    assert f"{empty / 'mnist'}\n  {empty}\n" in message
    assert "expected train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz]" in message
    assert message.endswith(f"Fetch it with: deqlab data fetch mnist --dir {empty}")
    with pytest.raises(DatasetNotFoundError, match="deqlab data fetch cifar10 --dir"):
        get_dataset("cifar10", data_dir=empty)
    # half a split: the error says which file is missing
    half = tmp_path / "half" / "mnist"
    half.mkdir(parents=True)
    write_idx(half / "train-images-idx3-ubyte.gz", np.zeros((2, 28, 28), dtype=np.uint8))
    with pytest.raises(
        DatasetNotFoundError, match=r"has train-images-idx3-ubyte\.gz but no train-labels"
    ):
        get_dataset("mnist", data_dir=tmp_path / "half")
    # files that do not belong together, or a labels file where images should be
    write_idx(half / "train-labels-idx1-ubyte.gz", np.zeros(3, dtype=np.uint8))
    with pytest.raises(ValueError, match=r"holds 2 images but .* labels of shape \(3,\)"):
        get_dataset("mnist", data_dir=tmp_path / "half")
    write_idx(half / "train-images-idx3-ubyte.gz", np.zeros(3, dtype=np.uint8))
    with pytest.raises(
        ValueError, match=r"expected uint8 images of shape \(N, H, W\); got uint8 \(3,\)"
    ):
        get_dataset("mnist", data_dir=tmp_path / "half")
    (half / "train-images-idx3-ubyte.gz").write_bytes(b"<html>404</html>")
    with pytest.raises(ValueError, match="is not a readable gzip file"):
        get_dataset("mnist", data_dir=tmp_path / "half")


def test_kmnist_is_read_like_mnist(tmp_path):
    splits = _write_mnist(tmp_path / "kmnist", ".gz", seed=5)
    images, labels = splits["test"]
    data = get_dataset(
        "kmnist", n_per_class=2, classes=(9, 4), split="test", normalize=False, data_dir=tmp_path
    )
    source = _source_index(data.X)
    np.testing.assert_array_equal(labels[source], [9, 9, 4, 4])
    torch.testing.assert_close(data.X.T, torch.from_numpy(images[source].reshape(4, -1)) / 255)
    assert data.info.source == str(tmp_path / "kmnist" / "t10k-images-idx3-ubyte.gz")
    assert data.X.shape == (784, 4) and data.info.image_shape == (1, 28, 28)


@pytest.mark.parametrize("stored_as", ["directory", "archive"])
def test_cifar100_has_a_hundred_classes(tmp_path, stored_as):
    rng = np.random.default_rng(6)
    folder = tmp_path / "cifar100" / CIFAR100_DIR
    folder.mkdir(parents=True)
    stored = {}
    for split, start in (("train", 0), ("test", 1000)):
        fine = rng.permutation(np.repeat(np.arange(100), 3))  # three images of each class
        images = rng.integers(1, 256, (300, 3, 32, 32), dtype=np.uint8)
        flat = images.reshape(300, -1)
        index = start + np.arange(300)
        flat[:, 0], flat[:, 1] = index % 256, 1 + index // 256
        write_cifar100_file(folder / split, images, fine, fine // 5)
        stored[split] = images, fine
    if stored_as == "archive":
        with tarfile.open(tmp_path / "cifar100" / "cifar-100-python.tar.gz", "w:gz") as archive:
            archive.add(folder, arcname=CIFAR100_DIR)
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
    images, fine = stored["train"]
    colour = get_dataset(
        "cifar100",
        n_per_class=2,
        classes=(99, 0, 57),
        labels="index",
        grayscale=False,
        normalize=False,
        data_dir=tmp_path,
    )
    source = _source_index(colour.X)
    np.testing.assert_array_equal(fine[source], [99, 99, 0, 0, 57, 57])
    torch.testing.assert_close(colour.y, torch.tensor([0, 0, 1, 1, 2, 2]))
    torch.testing.assert_close(colour.X.T, torch.from_numpy(images[source].reshape(6, -1)) / 255)
    gray = get_dataset("cifar100", n_per_class=3, classes=(42, 7), data_dir=tmp_path)
    assert gray.X.shape == (1024, 6) and gray.info.image_shape == (1, 32, 32)
    test = get_dataset(
        "cifar100", n_per_class=1, split="test", grayscale=False, normalize=False, data_dir=tmp_path
    )
    assert set(_source_index(test.X)) <= set(range(1000, 1300))
    raw = load_images("cifar100", "test", data_dir=tmp_path)
    assert raw.labels.max() == 99 and raw.images.shape == (300, 3, 32, 32)
    with pytest.raises(
        ValueError,
        match=r"`classes` must lie in 0..99; got 100 in \(0, 100\) \('cifar100' has 100 classes\)",
    ):
        get_dataset("cifar100", classes=(0, 100), data_dir=tmp_path)
    with pytest.raises(ValueError, match="`n_per_class`=4 exceeds the 3 samples of class 99"):
        get_dataset("cifar100", n_per_class=4, classes=(99, 0), data_dir=tmp_path)


def test_svhn_colour_grayscale_and_the_digit_zero(tmp_path):
    rng = np.random.default_rng(7)
    stored = {}
    for split, prefix in (("train", "train"), ("test", "test")):
        images, labels = _fake_split(rng, (3, 32, 32), start=0 if split == "train" else 500)
        write_svhn(tmp_path / "svhn" / f"{prefix}_32x32.mat", images, labels)
        stored[split] = images, labels
    images, labels = stored["train"]
    data = get_dataset(
        "svhn", n_per_class=3, classes=(0, 3), grayscale=False, normalize=False, data_dir=tmp_path
    )
    source = _source_index(data.X)
    # the digit 0 is stored as label 10 in the .mat file and read back as class 0
    stored_y = scipy.io.loadmat(tmp_path / "svhn" / "train_32x32.mat")["y"][:, 0]
    np.testing.assert_array_equal(stored_y[source], [10, 10, 10, 3, 3, 3])
    np.testing.assert_array_equal(labels[source], [0, 0, 0, 3, 3, 3])
    torch.testing.assert_close(data.X.T, torch.from_numpy(images[source].reshape(6, -1)) / 255)
    gray = get_dataset("svhn", n_per_class=3, classes=(0, 3), normalize=False, data_dir=tmp_path)
    rgb = images[source].astype(np.float64) / 255
    luma = 0.299 * rgb[:, 0] + 0.587 * rgb[:, 1] + 0.114 * rgb[:, 2]
    torch.testing.assert_close(gray.X.T, torch.from_numpy(luma.reshape(6, -1)))
    test = get_dataset(
        "svhn", n_per_class=1, split="test", grayscale=False, normalize=False, data_dir=tmp_path
    )
    assert set(_source_index(test.X)) <= set(range(500, 500 + COUNTS.sum()))
    assert data.info.source == str(tmp_path / "svhn" / "train_32x32.mat")


def test_semeion_binary_pixels_and_a_single_split(tmp_path):
    rng = np.random.default_rng(8)
    labels = rng.permutation(np.repeat(np.arange(10), COUNTS))
    images = rng.integers(0, 2, (len(labels), 1, 16, 16), dtype=np.uint8)
    write_semeion(tmp_path / "semeion" / "semeion.data", images, labels)
    data = get_dataset("semeion", n_per_class=4, classes=(6, 2), normalize=False, data_dir=tmp_path)
    assert data.X.shape == (256, 8) and data.info.image_shape == (1, 16, 16)
    flat = images.reshape(len(images), -1).astype(np.float64)
    source = [int(np.flatnonzero((flat == column).all(axis=1))[0]) for column in data.X.T.numpy()]
    np.testing.assert_array_equal(labels[source], [6] * 4 + [2] * 4)
    assert set(np.unique(data.X.numpy())) <= {0.0, 1.0}  # pixel_max 1: stored values
    normalized = get_dataset("semeion", n_per_class=4, classes=(6, 2), data_dir=tmp_path)
    torch.testing.assert_close(normalized.X.norm(dim=0), torch.full((8,), 16.0))
    assert load_images("semeion", data_dir=tmp_path).pixel_max == 1
    with pytest.raises(ValueError, match="`split` must be one of 'train'; got 'test'"):
        get_dataset("semeion", split="test", data_dir=tmp_path)
    with pytest.raises(ValueError, match="`split` must be one of 'train'; got 'test'"):
        load_images("semeion", "test", data_dir=tmp_path)


def test_class_counts_and_splits_per_data_set():
    assert n_classes("cifar100") == 100
    assert {n_classes(name) for name in DATASETS if name not in ("sphere", "cifar100")} == {10}
    assert dataset_splits("semeion") == dataset_splits("digits") == ("train",)
    assert dataset_splits("svhn") == ("train", "test")
    with pytest.raises(ValueError, match="`name` must be one of"):
        n_classes("sphere")


def test_new_sets_missing_say_what_to_fetch(tmp_path):
    empty = tmp_path / "empty"
    for name, split, expected in (
        ("kmnist", "test", "t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz]"),
        ("cifar100", "test", "cifar-100-python/test or cifar-100-python.tar.gz"),
        ("svhn", "train", "train_32x32.mat"),
        ("semeion", "train", "semeion.data"),
    ):
        with pytest.raises(DatasetNotFoundError) as err:
            load_images(name, split, empty)
        message = str(err.value)
        assert f"data set {name!r} ({split} split) not found: expected {expected}." in message
        assert message.endswith(f"Fetch it with: deqlab data fetch {name} --dir {empty}")


def test_stored_labels_out_of_range(tmp_path):
    folder = tmp_path / "mnist"
    write_idx(folder / "train-images-idx3-ubyte", np.ones((3, 28, 28), dtype=np.uint8))
    write_idx(folder / "train-labels-idx1-ubyte", np.array([0, 10, 3], dtype=np.uint8))
    with pytest.raises(
        ValueError, match=r"train-images-idx3-ubyte: labels must lie in 0..9; got 0..10"
    ):
        load_images("mnist", data_dir=tmp_path)


def test_cli_data_list_shows_the_catalog(tmp_path, monkeypatch):
    _write_mnist(tmp_path / "mnist", ".gz")
    (tmp_path / "mnist" / "t10k-images-idx3-ubyte.gz").write_bytes(b"\x1f\x8b\x08truncated")
    monkeypatch.setenv("COLUMNS", "200")
    result = CliRunner().invoke(app, ["data", "list", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = {
        tuple(cell.strip() for cell in line.split("│")[1:3]): line
        for line in result.output.splitlines()
        if "│" in line
    }
    assert "present" in rows["mnist", "train"]
    assert "corrupt" in rows["mnist", "test"]
    for name in ("kmnist", "cifar100", "svhn", "semeion"):
        assert f"deqlab data fetch {name} --dir {tmp_path}" in rows[name, "train"]
    assert ("semeion", "test") not in rows


@pytest.mark.skipif(not FASHION.is_dir(), reason="Debian's dataset-fashion-mnist is not installed")
def test_real_fashion_mnist_from_debian(monkeypatch, tmp_path):
    monkeypatch.setenv("DEQLAB_DATA", str(tmp_path))  # nothing there: found at the Debian path
    raw = load_images("fashion-mnist")
    assert raw.images.shape == (60000, 1, 28, 28) and raw.images.dtype == np.uint8
    np.testing.assert_array_equal(np.bincount(raw.labels), [6000] * 10)
    assert raw.source == FASHION / "train-images-idx3-ubyte.gz"
    test = load_images("fashion-mnist", "test")
    np.testing.assert_array_equal(np.bincount(test.labels), [1000] * 10)
    data = get_dataset("fashion-mnist")  # the paper's subset: 500 + 500, n = 1000
    assert data.X.shape == (784, 1000)
    torch.testing.assert_close(data.X.norm(dim=0), torch.full((1000,), 28.0))
    assert data.diagnostics.n_duplicates == 0
    assert 0.9 < data.diagnostics.max_abs_cos < 1.0  # non-negative images: far from ⊥
