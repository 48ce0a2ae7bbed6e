"""Preprocessing of Ling et al. (2023), Section 5: two-class subsets, Assumption 2, labels.

Assumption 2 (Ling et al. 2023): (i) ‖x_i‖₂ = √d for every input and x_i ⊥ x_j for
i ≠ j; (ii) |y_i| = O(1). :func:`normalize_columns` enforces the norm part exactly; the
orthogonality part cannot be enforced on real data and is measured instead
(:mod:`deqlab.data.diagnostics`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from deqlab._checks import check_choice, check_int, check_tensor

LABEL_KINDS = ("class", "gaussian", "uniform", "index")

# ITU-R BT.601 luma weights, the ones of PIL's convert("L") used by torchvision's
# Grayscale transform in the paper's code.
_LUMA = (0.299, 0.587, 0.114)


def normalize_columns(X: torch.Tensor) -> torch.Tensor:
    """Scale every column of ``X`` (d, n) to Euclidean norm √d (Assumption 2 (i)).

    Returns ``√d · x_i / ‖x_i‖₂`` column by column. A zero column cannot be scaled and is
    a ``ValueError`` naming its index.
    """
    check_tensor("X", X, ndim=2)
    d = X.shape[0]
    norms = torch.linalg.vector_norm(X, dim=0)  # (n,)
    zero = torch.nonzero(norms == 0).flatten()
    if zero.numel():
        shown = ", ".join(str(int(i)) for i in zero[:10])
        raise ValueError(
            f"`X` has {zero.numel()} zero column(s) (indices {shown}); a zero input cannot be "
            f"scaled to norm √d (Assumption 2)"
        )
    return X * (math.sqrt(d) / norms)


def to_grayscale(images: torch.Tensor) -> torch.Tensor:
    """Luma ``0.299 R + 0.587 G + 0.114 B`` of RGB images (N, 3, H, W) → (N, 1, H, W)."""
    check_tensor("images", images, ndim=4)
    if images.shape[1] != 3:
        raise ValueError(f"`images` must have 3 channels (N, 3, H, W); got {tuple(images.shape)}")
    weights = torch.tensor(_LUMA, dtype=images.dtype, device=images.device)
    return torch.einsum("nchw,c->nhw", images, weights).unsqueeze(1)


def select_per_class(
    labels: torch.Tensor,
    classes: Sequence[int],
    n_per_class: int | None,
    generator: torch.Generator,
) -> torch.Tensor:
    """Indices of ``n_per_class`` samples of each class, drawn without replacement.

    Returns a (len(classes) · k,) int64 tensor: the block of ``classes[0]`` first, each
    block in the random order of ``randperm`` (with ``generator``, classes in order).
    ``n_per_class=None`` takes every sample of each class (still shuffled).
    """
    blocks = []
    for c in classes:
        members = torch.nonzero(labels == c).flatten()
        if n_per_class is not None and n_per_class > members.numel():
            raise ValueError(
                f"`n_per_class`={n_per_class} exceeds the {members.numel()} samples of class {c}"
            )
        order = torch.randperm(members.numel(), generator=generator)
        blocks.append(members[order[:n_per_class]])
    return torch.cat(blocks)


def make_labels(
    kind: str,
    class_of_sample: torch.Tensor,
    n_classes: int,
    generator: torch.Generator,
    dtype: torch.dtype,
) -> torch.Tensor:
    """Labels (n,) for samples whose class position (0..n_classes-1) is ``class_of_sample``.

    - ``"class"``: ±1 for two classes — −1 for the first class, +1 for the second.
    - ``"gaussian"``: i.i.d. N(0, 1), independent of the inputs (the paper's synthetic data).
    - ``"uniform"``: i.i.d. U[0, 1), independent of the inputs — what the official code of
      Ling et al. used for MNIST and CIFAR-10 (``torch.rand(1000)``).
    - ``"index"``: the class position as int64 (for classification losses).
    """
    check_choice("labels", kind, LABEL_KINDS)
    n = class_of_sample.numel()
    if kind == "class":
        if n_classes != 2:
            raise ValueError(
                f"`labels`='class' gives ±1 labels and needs exactly 2 classes; got {n_classes} "
                f"(use labels='index' for more)"
            )
        return (2 * class_of_sample - 1).to(dtype)
    if kind == "index":
        return class_of_sample.to(torch.int64)
    if kind == "gaussian":
        return torch.randn(n, generator=generator, dtype=torch.float64).to(dtype)
    return torch.rand(n, generator=generator, dtype=torch.float64).to(dtype)


def check_float_dtype(dtype: object) -> torch.dtype:
    """``dtype`` if it is a floating-point ``torch.dtype`` (the dtype of X and of the labels)."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"`dtype` must be a floating-point torch.dtype; got {dtype!r}")
    return dtype


def check_classes(classes: object, n_classes: int, name: str | None = None) -> tuple[int, ...]:
    """``classes`` as a tuple of distinct ints in 0..n_classes-1 (at least one).

    ``name``, the data set, is quoted in the message of an out-of-range class.
    """
    if isinstance(classes, (str, bytes)) or not isinstance(classes, Sequence):
        raise TypeError(f"`classes` must be a sequence of ints; got {type(classes).__name__}")
    out = tuple(check_int("classes", c) for c in classes)
    if not out:
        raise ValueError("`classes` must name at least one class; got an empty sequence")
    bad = [c for c in out if not 0 <= c < n_classes]
    if bad:
        which = f" ({name!r} has {n_classes} classes)" if name is not None else ""
        raise ValueError(f"`classes` must lie in 0..{n_classes - 1}; got {bad[0]} in {out}{which}")
    if len(set(out)) != len(out):
        raise ValueError(f"`classes` must be distinct; got {out}")
    return out
