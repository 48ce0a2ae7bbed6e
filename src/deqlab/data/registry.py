"""``get_dataset``: every data set of the experiments by name, preprocessed as in the papers.

Image data sets (MNIST, Fashion-MNIST, CIFAR-10, digits) follow Ling et al. (2023),
Section 5: k images of each requested class drawn at random (seeded), flattened to the
columns of X (d, n), optionally grayscale (CIFAR-10, as the paper's code), and every column
scaled to norm √d (Assumption 2). ``"sphere"`` is the paper's synthetic data.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from deqlab._checks import check_choice, check_int
from deqlab.data import cifar
from deqlab.data.digits import PIXEL_MAX, digits_path, read_digits
from deqlab.data.idx import read_idx
from deqlab.data.labelled import DataInfo, LabelledData
from deqlab.data.locate import not_found, search_dirs
from deqlab.data.preprocess import (
    LABEL_KINDS,
    check_classes,
    check_float_dtype,
    make_labels,
    normalize_columns,
    select_per_class,
    to_grayscale,
)
from deqlab.data.synthetic import synthetic_sphere

IMAGE_DATASETS = ("mnist", "fashion-mnist", "cifar10", "digits")
DATASETS = ("sphere", *IMAGE_DATASETS)
SPLITS = ("train", "test")
N_CLASSES = 10
_IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


@dataclass(frozen=True, eq=False)
class RawImages:
    """A split as stored: ``images`` (N, C, H, W) uint8, ``labels`` (N,) int64 in 0..9."""

    images: np.ndarray
    labels: np.ndarray
    source: Path
    pixel_max: int  # 255, or 16 for digits


def _existing(directory: Path, stem: str) -> Path | None:
    for path in (directory / stem, directory / f"{stem}.gz"):
        if path.is_file():
            return path
    return None


def locate(name: str, split: str = "train", data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Path of the stored split (the images file, CIFAR directory or archive, digits file).

    Raises :class:`~deqlab.data.locate.DatasetNotFoundError` saying where it looked and
    the command that fetches the data.
    """
    check_choice("name", name, IMAGE_DATASETS)
    check_choice("split", split, SPLITS if name != "digits" else ("train",))
    if name == "digits":
        return digits_path()
    problems: list[str] = []
    for directory in search_dirs(name, data_dir):
        if name == "cifar10":
            for candidate in (directory / cifar.BATCH_DIR, directory):
                if (candidate / cifar.SPLIT_BATCHES[split][0]).is_file():
                    return candidate
            if (directory / cifar.ARCHIVE).is_file():
                return directory / cifar.ARCHIVE
            continue
        images_stem, labels_stem = _IDX_FILES[split]
        images, labels = _existing(directory, images_stem), _existing(directory, labels_stem)
        if images is not None and labels is not None:
            return images
        if (images is None) != (labels is None):
            missing = labels_stem if labels is None else images_stem
            problems.append(f"{directory} has {(images or labels).name} but no {missing}[.gz]")
    if name == "cifar10":
        expected = f"{cifar.BATCH_DIR}/ or {cifar.ARCHIVE}"
    else:
        expected = " and ".join(f"{stem}[.gz]" for stem in _IDX_FILES[split])
    raise not_found(name, split, expected, data_dir, problems)


def _read_idx_split(path: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 1, H, W) and labels (N,) from an IDX images file and its labels file."""
    labels_path = _existing(path.parent, _IDX_FILES[split][1])
    images, labels = read_idx(path), read_idx(labels_path).astype(np.int64)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(
            f"{path}: expected uint8 images of shape (N, H, W); got {images.dtype} "
            f"{images.shape} — is this an images file?"
        )
    if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
        raise ValueError(
            f"{path} holds {images.shape[0]} images but {labels_path} holds labels of "
            f"shape {labels.shape}; the two files do not belong together"
        )
    return images[:, None], labels


@functools.lru_cache(maxsize=4)
def _read_cached(name: str, split: str, path: Path, mtime_ns: int) -> RawImages:
    """The split stored at ``path`` (``mtime_ns`` is part of the key: edits invalidate)."""
    pixel_max = PIXEL_MAX if name == "digits" else 255
    if name == "digits":
        images, labels = read_digits()
    elif name == "cifar10":
        images, labels = cifar.read_cifar10(path, split)
    else:
        images, labels = _read_idx_split(path, split)
    if labels.size and (labels.min() < 0 or labels.max() >= N_CLASSES):
        raise ValueError(
            f"{path}: labels must lie in 0..{N_CLASSES - 1}; got {labels.min()}..{labels.max()}"
        )
    images.flags.writeable = False
    labels.flags.writeable = False
    return RawImages(images, labels, path, pixel_max=pixel_max)


def load_images(
    name: str, split: str = "train", data_dir: str | os.PathLike[str] | None = None
) -> RawImages:
    """Read a split as stored (read-only arrays, cached by path and modification time)."""
    path = locate(name, split, data_dir)
    return _read_cached(name, split, path, path.stat().st_mtime_ns)


def _check_sizes(name: str, n: object, n_per_class: object, n_classes: int) -> int | None:
    """Resolve ``n`` / ``n_per_class`` for an image data set into k per class (None: all)."""
    if n is None and n_per_class is None:
        return 500  # Ling et al. (2023), Section 5: 500 of each class
    if n_per_class is not None:
        k = check_int("n_per_class", n_per_class, min_value=1)
        if n is not None and check_int("n", n, min_value=1) != k * n_classes:
            raise ValueError(
                f"`n`={n} disagrees with `n_per_class`={k} × {n_classes} classes; give one of them"
            )
        return k
    n = check_int("n", n, min_value=1)
    if n % n_classes:
        raise ValueError(f"`n`={n} must be a multiple of the {n_classes} classes for {name!r}")
    return n // n_classes


def get_dataset(
    name: str,
    *,
    n: int | None = None,
    n_per_class: int | None = None,
    classes: tuple[int, ...] | None = None,
    d: int | None = None,
    seed: int = 0,
    labels: str | None = None,
    normalize: bool = True,
    grayscale: bool = True,
    split: str = "train",
    data_dir: str | os.PathLike[str] | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> LabelledData:
    """A data set of the experiments as :class:`LabelledData` (X (d, n), y (n,)).

    ``name``: ``"sphere"`` (``n`` points, default 1000, on the sphere of radius √d in
    R^d, default d = 1000; labels ``"gaussian"`` by default) or an image data set
    ``"mnist"``, ``"fashion-mnist"``, ``"cifar10"``, ``"digits"``. For ``"sphere"`` the
    image options (``split``, ``grayscale``, ``normalize``, ``data_dir``) have no effect:
    its points already have norm √d.

    Image data sets: ``n_per_class`` images of each of ``classes`` (default 500 of classes
    (0, 1), the paper's n = 1000; ``n`` may be given instead and is split equally), drawn
    without replacement with ``seed``; pixels scaled to [0, 1]; CIFAR-10 converted to luma
    grayscale (d = 1024) when ``grayscale``, else d = 3072 channel-major; every column
    scaled to norm √d when ``normalize`` (Assumption 2). Whole splits: :func:`load_images`.
    ``labels``: ``"class"`` (default; ±1, −1 for ``classes[0]``), ``"gaussian"`` N(0, 1),
    ``"uniform"`` U[0, 1) (the official code's choice), or ``"index"`` (int64 class
    position). Samples come in class blocks: ``classes[0]`` first. Random draws use one
    CPU generator seeded with ``seed``: the subset first, then the labels.
    """
    check_choice("name", name, DATASETS)
    check_choice("split", split, SPLITS)
    if name == "sphere":
        for arg, value in (("n_per_class", n_per_class), ("classes", classes)):
            if value is not None:
                raise ValueError(f"`{arg}` does not apply to 'sphere' (use n and d); got {value!r}")
        data = synthetic_sphere(
            1000 if n is None else n,
            1000 if d is None else d,
            seed=seed,
            labels="gaussian" if labels is None else labels,
            dtype=dtype,
        )
        return data.to(device=device) if device is not None else data
    if d is not None:
        raise ValueError(f"`d` applies only to 'sphere'; {name!r} has a fixed input size")
    check_float_dtype(dtype)
    labels = check_choice("labels", "class" if labels is None else labels, LABEL_KINDS)
    classes = check_classes((0, 1) if classes is None else classes, N_CLASSES)
    k = _check_sizes(name, n, n_per_class, len(classes))
    seed = check_int("seed", seed, min_value=0)
    raw = load_images(name, split, data_dir)
    generator = torch.Generator().manual_seed(seed)
    chosen = select_per_class(torch.tensor(raw.labels), classes, k, generator)  # (n,)
    images = torch.from_numpy(raw.images[chosen.numpy()]).to(torch.float64) / raw.pixel_max
    if grayscale and images.shape[1] == 3:
        images = to_grayscale(images)
    X = images.reshape(images.shape[0], -1).T  # (d, n)
    if normalize:
        X = normalize_columns(X)
    position = {c: i for i, c in enumerate(classes)}
    class_of_sample = torch.tensor([position[int(c)] for c in raw.labels[chosen.numpy()]])
    y = make_labels(labels, class_of_sample, len(classes), generator, dtype)
    info = DataInfo(
        source=str(raw.source),
        seed=seed,
        labels=labels,
        normalized=bool(normalize),
        classes=classes,
        n_per_class=k,
        split=split,
        image_shape=tuple(images.shape[1:]),
    )
    X = X.to(device=device, dtype=dtype).contiguous()
    return LabelledData(X=X, y=y.to(device=device), name=name, info=info)
