"""``get_dataset``: every data set of the experiments by name, preprocessed as in the papers.

Image data sets (MNIST, Fashion-MNIST, KMNIST, CIFAR-10, CIFAR-100, SVHN, SEMEION, digits)
follow Ling et al. (2023), Section 5: k images of each requested class drawn at random
(seeded), flattened to the columns of X (d, n), optionally grayscale (the colour sets, as
the paper's code does for CIFAR-10), and every column scaled to norm √d (Assumption 2).
``"sphere"`` is the paper's synthetic data.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from deqlab._checks import check_choice, check_int
from deqlab.data import cifar, semeion, svhn
from deqlab.data.digits import PIXEL_MAX, digits_path, read_digits
from deqlab.data.idx import read_idx
from deqlab.data.labelled import DataInfo, LabelledData
from deqlab.data.locate import DatasetNotFoundError, data_root, not_found, search_dirs
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

IMAGE_DATASETS = (
    "mnist",
    "fashion-mnist",
    "kmnist",
    "cifar10",
    "cifar100",
    "svhn",
    "semeion",
    "digits",
)
DATASETS = ("sphere", *IMAGE_DATASETS)
SPLITS = ("train", "test")
N_CLASSES = 10  # the class count of every image set but CIFAR-100: see CLASS_COUNTS
CLASS_COUNTS: dict[str, int] = {name: N_CLASSES for name in IMAGE_DATASETS} | {"cifar100": 100}
# The splits of each image set: digits and SEMEION come as a single set of images.
DATASET_SPLITS: dict[str, tuple[str, ...]] = {name: SPLITS for name in IMAGE_DATASETS} | {
    "digits": ("train",),
    "semeion": ("train",),
}
IDX_DATASETS = ("mnist", "fashion-mnist", "kmnist")
_PIXEL_MAX = {"digits": PIXEL_MAX, "semeion": 1}  # else 255
_IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


@dataclass(frozen=True)
class ManualDataset:
    """A data set deqlab reads but cannot download (it needs registration): where to get it,
    the layout expected under ``<data root>/<name>/``, and what runs on it need besides."""

    name: str
    splits: tuple[str, ...]
    source: str
    layout: str
    needs: str


#: Data sets read from a copy the user provides (``deqlab data fetch`` cannot get them).
MANUAL_DATASETS: dict[str, ManualDataset] = {
    "imagenet": ManualDataset(
        "imagenet", ("train", "val"),
        source="ILSVRC-2012 from https://image-net.org (registration required; "
        "deqlab cannot download it)",
        layout="train/<wnid>/*.JPEG and val/<wnid>/*.JPEG (the validation images sorted "
        "into their class folders)",
        needs="its runs train at 224 × 224 and need a GPU (--device cuda)",
    ),
}  # fmt: skip


def locate_manual(name: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """``<data root>/<name>`` holding a folder per split; else a one-line
    :class:`~deqlab.data.locate.DatasetNotFoundError` with the source, layout and needs."""
    entry = MANUAL_DATASETS[check_choice("name", name, tuple(MANUAL_DATASETS))]
    where = data_root(data_dir) / name
    if all((where / split).is_dir() for split in entry.splits):
        return where
    raise DatasetNotFoundError(
        f"data set {name!r} not found: expected {where}/ holding {entry.layout}; get "
        f"{entry.source} and set DEQLAB_DATA to the directory holding {name}/; {entry.needs}"
    )


def n_classes(name: str) -> int:
    """Number of classes of image data set ``name`` (labels lie in 0..n_classes-1)."""
    return CLASS_COUNTS[check_choice("name", name, IMAGE_DATASETS)]


def dataset_splits(name: str) -> tuple[str, ...]:
    """The splits of image data set ``name``: ``("train", "test")``, or ``("train",)``."""
    return DATASET_SPLITS[check_choice("name", name, IMAGE_DATASETS)]


@dataclass(frozen=True, eq=False)
class RawImages:
    """A split as stored: ``images`` (N, C, H, W) uint8, ``labels`` (N,) int64 in 0..K-1.

    K is :func:`n_classes` (100 for CIFAR-100 — its fine labels —, else 10).
    """

    images: np.ndarray
    labels: np.ndarray
    source: Path
    pixel_max: int  # 255, or 16 for digits, or 1 for SEMEION (binary pixels)


def _existing(directory: Path, stem: str) -> Path | None:
    for path in (directory / stem, directory / f"{stem}.gz"):
        if path.is_file():
            return path
    return None


def _find(name: str, split: str, directory: Path, problems: list[str]) -> Path | None:
    """The stored split of ``name`` in ``directory`` (None: not there; notes go to problems)."""
    if name == "cifar10":
        for candidate in (directory / cifar.BATCH_DIR, directory):
            if (candidate / cifar.SPLIT_BATCHES[split][0]).is_file():
                return candidate
        archive = directory / cifar.ARCHIVE
        return archive if archive.is_file() else None
    if name == "cifar100":
        for candidate in (directory / cifar.CIFAR100_DIR, directory):
            if (candidate / cifar.CIFAR100_FILES[split]).is_file():
                return candidate
        archive = directory / cifar.CIFAR100_ARCHIVE
        return archive if archive.is_file() else None
    if name in ("svhn", "semeion"):
        path = directory / (svhn.SPLIT_FILES[split] if name == "svhn" else semeion.FILENAME)
        return path if path.is_file() else None
    images_stem, labels_stem = _IDX_FILES[split]
    images, labels = _existing(directory, images_stem), _existing(directory, labels_stem)
    if images is not None and labels is not None:
        return images
    if (images is None) != (labels is None):
        missing = labels_stem if labels is None else images_stem
        problems.append(f"{directory} has {(images or labels).name} but no {missing}[.gz]")
    return None


def _expected(name: str, split: str) -> str:
    """What :func:`locate` looks for, in words."""
    if name == "cifar10":
        return f"{cifar.BATCH_DIR}/ or {cifar.ARCHIVE}"
    if name == "cifar100":
        return f"{cifar.CIFAR100_DIR}/{cifar.CIFAR100_FILES[split]} or {cifar.CIFAR100_ARCHIVE}"
    if name == "svhn":
        return svhn.SPLIT_FILES[split]
    if name == "semeion":
        return semeion.FILENAME
    return " and ".join(f"{stem}[.gz]" for stem in _IDX_FILES[split])


def locate(name: str, split: str = "train", data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Path of the stored split (the images file, CIFAR directory or archive, SVHN or
    SEMEION file, digits file).

    Raises :class:`~deqlab.data.locate.DatasetNotFoundError` saying where it looked and
    the command that fetches the data. Only presence is checked here: a damaged file is
    reported by the reader (and by :func:`deqlab.data.inventory.check_split`).
    """
    check_choice("name", name, IMAGE_DATASETS)
    check_choice("split", split, DATASET_SPLITS[name])
    if name == "digits":
        return digits_path()
    problems: list[str] = []
    for directory in search_dirs(name, data_dir):
        found = _find(name, split, directory, problems)
        if found is not None:
            return found
    raise not_found(name, split, _expected(name, split), data_dir, problems)


def stored_files(
    name: str, split: str = "train", data_dir: str | os.PathLike[str] | None = None
) -> tuple[Path, ...]:
    """Every file the split is read from (both IDX files, each CIFAR-10 batch, …)."""
    path = locate(name, split, data_dir)
    if name in IDX_DATASETS:
        return path, _existing(path.parent, _IDX_FILES[split][1])
    if not path.is_dir():
        return (path,)
    if name == "cifar10":
        return tuple(path / batch for batch in cifar.SPLIT_BATCHES[split])
    return (path / cifar.CIFAR100_FILES[split],)


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
    if name == "digits":
        images, labels = read_digits()
    elif name == "cifar10":
        images, labels = cifar.read_cifar10(path, split)
    elif name == "cifar100":
        images, labels, _ = cifar.read_cifar100(path, split)  # the fine labels: 100 classes
    elif name == "svhn":
        images, labels = svhn.read_svhn(path)
    elif name == "semeion":
        images, labels = semeion.read_semeion(path)
    else:
        images, labels = _read_idx_split(path, split)
    count = CLASS_COUNTS[name]
    if labels.size and (labels.min() < 0 or labels.max() >= count):
        raise ValueError(
            f"{path}: labels must lie in 0..{count - 1}; got {labels.min()}..{labels.max()}"
        )
    images.flags.writeable = False
    labels.flags.writeable = False
    return RawImages(images, labels, path, pixel_max=_PIXEL_MAX.get(name, 255))


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


def _check_class_sizes(raw: RawImages, classes: tuple[int, ...], k: int | None, asked: str) -> None:
    """Refuse k per class beyond the smallest chosen class, naming the argument given
    (``n``, split equally, or ``n_per_class``) and the largest n the file allows."""
    if k is None:
        return
    counts = {c: int((raw.labels == c).sum()) for c in classes}
    short = min(classes, key=counts.__getitem__)
    if k <= counts[short]:
        return
    given = f"`n`={k * len(classes)} ({k} per class)" if asked == "n" else f"`n_per_class`={k}"
    largest = f"n = {counts[short] * len(classes)}" if asked == "n" else f"{counts[short]}"
    raise ValueError(
        f"{given} exceeds the {counts[short]} samples of class {short} in {str(raw.source)!r}; "
        f"at most {largest}"
    )


def _check_images(raw: RawImages, chosen: np.ndarray) -> None:
    """Refuse images with no pixels, or chosen images that are all zero, naming the file."""
    where = str(raw.source)
    if 0 in raw.images.shape[1:]:
        raise ValueError(
            f"{where!r} holds images of shape {raw.images.shape[1:]} (channels, height, width): "
            "they have no pixels"
        )
    zero = np.sort(chosen[~raw.images[chosen].reshape(len(chosen), -1).any(axis=1)])
    if zero.size:
        shown = ", ".join(str(int(i)) for i in zero[:5]) + (", ..." if zero.size > 5 else "")
        raise ValueError(
            f"{where!r}: {zero.size} of the {len(chosen)} images drawn are all zero (images "
            f"{shown} of the file); a blank image cannot be scaled to norm √d (Assumption 2) "
            "and gives the kernels nothing: is the file a valid copy?"
        )


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
    ``"mnist"``, ``"fashion-mnist"``, ``"kmnist"`` (28×28), ``"cifar10"``, ``"cifar100"``,
    ``"svhn"`` (32×32 colour), ``"semeion"`` (16×16 binary, a single split) or ``"digits"``
    (8×8, a single split). For ``"sphere"`` the image options (``split``, ``grayscale``,
    ``normalize``, ``data_dir``) have no effect: its points already have norm √d.

    Image data sets: ``n_per_class`` images of each of ``classes`` (default 500 of classes
    (0, 1), the paper's n = 1000; ``n`` may be given instead and is split equally), drawn
    without replacement with ``seed``; classes are 0..9, or 0..99 for CIFAR-100 (its fine
    labels); pixels scaled to [0, 1]; colour images (CIFAR-10, CIFAR-100, SVHN) converted
    to luma grayscale (d = 1024) when ``grayscale``, else d = 3072 channel-major; every
    column scaled to norm √d when ``normalize`` (Assumption 2). Whole splits:
    :func:`load_images`.
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
    classes = check_classes((0, 1) if classes is None else classes, CLASS_COUNTS[name], name)
    k = _check_sizes(name, n, n_per_class, len(classes))
    seed = check_int("seed", seed, min_value=0)
    raw = load_images(name, split, data_dir)
    _check_class_sizes(raw, classes, k, asked=("n_per_class" if n_per_class is not None else "n"))
    generator = torch.Generator().manual_seed(seed)
    chosen = select_per_class(torch.tensor(raw.labels), classes, k, generator)  # (n,)
    _check_images(raw, chosen.numpy())
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
