"""Synthetic data sets of the papers, seeded and generated on the CPU in float64.

- Ling et al. (2023), Section 5: n points uniform on the sphere of radius √d in R^d
  (so Assumption 2 (i) holds exactly), labels i.i.d. N(0, 1).
- Zou et al. (2020b), used by Kawaguchi (2021), Section 4: x_i ∈ R^d with i.i.d.
  N(0, 1) entries (or U[−1, 1] entries) and vector targets y_i = −x_i + 0.1 ς_i,
  ς_i ~ N(0, I_d).
"""

from __future__ import annotations

import math

import torch

from deqlab._checks import check_choice, check_int, check_real
from deqlab.data.labelled import DataInfo, LabelledData
from deqlab.data.preprocess import check_float_dtype, make_labels

ZOU_INPUTS = ("gaussian", "uniform")


def _generator(seed: object) -> torch.Generator:
    return torch.Generator().manual_seed(check_int("seed", seed, min_value=0))


def synthetic_sphere(
    n: int,
    d: int,
    *,
    seed: int = 0,
    labels: str = "gaussian",
    dtype: torch.dtype = torch.float64,
) -> LabelledData:
    """n inputs uniform on the sphere of radius √d in R^d, as columns of X (d, n).

    x_i = √d · g_i / ‖g_i‖₂ with g_i ~ N(0, I_d) (rotation invariance makes x_i uniform).
    ``labels``: ``"gaussian"`` N(0, 1) (the paper) or ``"uniform"`` U[0, 1). Ling et al.
    (2023), Section 5 uses n = d = 1000.
    """
    n = check_int("n", n, min_value=1)
    d = check_int("d", d, min_value=1)
    check_choice("labels", labels, ("gaussian", "uniform"))
    check_float_dtype(dtype)
    generator = _generator(seed)
    g = torch.randn(d, n, generator=generator, dtype=torch.float64)  # (d, n)
    X = g * (math.sqrt(d) / torch.linalg.vector_norm(g, dim=0))
    y = make_labels(labels, torch.zeros(n, dtype=torch.int64), 1, generator, dtype)
    info = DataInfo(source="synthetic", seed=seed, labels=labels, normalized=True)
    return LabelledData(X=X.to(dtype), y=y, name="sphere", info=info)


def zou_synthetic(
    n: int = 1000,
    d: int = 10,
    *,
    inputs: str = "gaussian",
    noise: float = 0.1,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> LabelledData:
    """Zou et al.'s regression data: X (d, n), targets Y = −X + noise · Ξ of shape (d, n).

    ``inputs="gaussian"``: entries of X i.i.d. N(0, 1); ``"uniform"``: i.i.d. U[−1, 1].
    Ξ has i.i.d. N(0, 1) entries (Kawaguchi 2021, Section 4: n = 1000, d = 10, noise 0.1).
    """
    n = check_int("n", n, min_value=1)
    d = check_int("d", d, min_value=1)
    check_choice("inputs", inputs, ZOU_INPUTS)
    noise = check_real("noise", noise, low=0.0)
    check_float_dtype(dtype)
    generator = _generator(seed)
    if inputs == "gaussian":
        X = torch.randn(d, n, generator=generator, dtype=torch.float64)  # (d, n)
    else:
        X = 2.0 * torch.rand(d, n, generator=generator, dtype=torch.float64) - 1.0
    Y = -X + noise * torch.randn(d, n, generator=generator, dtype=torch.float64)  # (d, n)
    info = DataInfo(source="synthetic", seed=seed, labels="regression", normalized=False)
    return LabelledData(X=X.to(dtype), y=Y.to(dtype), name=f"zou-{inputs}", info=info)
