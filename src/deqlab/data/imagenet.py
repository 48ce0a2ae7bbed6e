"""ImageNet (ILSVRC-2012) read from an image-folder copy: the data of thesis Figure 4.5.

deqlab cannot download ImageNet (it needs registration at image-net.org). A copy is looked
for at ``<root>/imagenet`` (root: ``data_dir``, else ``$DEQLAB_DATA``, else
``~/.cache/deqlab``) in the usual image-folder layout, ``train/<wnid>/*.JPEG`` and
``val/<wnid>/*.JPEG`` (the validation images sorted into class folders). Images are read
with Pillow, resized so the shorter side is ``size · 8/7`` and centre-cropped to
``size × size`` (the standard ImageNet evaluation crop, 256 → 224).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from deqlab._checks import check_choice, check_int
from deqlab.data.registry import MANUAL_DATASETS, locate_manual

SPLITS = MANUAL_DATASETS["imagenet"].splits
SUFFIXES = (".jpeg", ".jpg", ".png")


def imagenet_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The ImageNet copy (:data:`deqlab.data.registry.MANUAL_DATASETS`); a one-line
    :class:`~deqlab.data.locate.DatasetNotFoundError` when it is absent."""
    return locate_manual("imagenet", data_dir)


def _load(path: Path, size: int) -> np.ndarray:
    """One image as ``(3, size, size)`` uint8: shorter side to ``size·8/7``, centre crop."""
    from PIL import Image

    with Image.open(path) as image:
        image = image.convert("RGB")
        scale = round(size * 8 / 7) / min(image.size)
        w, h = max(round(image.width * scale), size), max(round(image.height * scale), size)
        image = image.resize((w, h), Image.BILINEAR)
        left, top = (w - size) // 2, (h - size) // 2
        crop = image.crop((left, top, left + size, top + size))
        return np.asarray(crop, dtype=np.uint8).transpose(2, 0, 1)


def read_imagenet(
    split: str,
    *,
    classes: int,
    n_per_class: int,
    size: int,
    seed: int = 0,
    data_dir: str | os.PathLike[str] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n_per_class`` images of each of the first ``classes`` classes (sorted wnids).

    Returns images ``(n, 3, size, size)`` float32 in [0, 1] and labels ``(n,)`` in
    ``0..classes−1``; the images of a class are drawn at random (seeded) from its folder.
    """
    split = check_choice("split", split, SPLITS)
    classes = check_int("classes", classes, min_value=1)
    n_per_class = check_int("n_per_class", n_per_class, min_value=1)
    size = check_int("size", size, min_value=1)
    folder = imagenet_dir(data_dir) / split
    wnids = sorted(p.name for p in folder.iterdir() if p.is_dir())
    if len(wnids) < classes:
        raise ValueError(f"`classes` = {classes} exceeds the {len(wnids)} classes in {folder}")
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for label, wnid in enumerate(wnids[:classes]):
        files = sorted(p for p in (folder / wnid).iterdir() if p.suffix.lower() in SUFFIXES)
        if len(files) < n_per_class:
            raise ValueError(
                f"`n_per_class` = {n_per_class} exceeds the {len(files)} images in {folder / wnid}"
            )
        for index in sorted(rng.choice(len(files), n_per_class, replace=False)):
            images.append(_load(files[index], size))
            labels.append(label)
    pixels = torch.from_numpy(np.stack(images)).float() / 255.0
    return pixels, torch.tensor(labels, dtype=torch.int64)
