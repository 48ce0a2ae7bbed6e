"""Baselines the DELM is compared with (Kawaguchi 2021, Section 2.2, Section 4, Appendix D).

All models take inputs with samples as columns, X of shape (m_x, n), and return (m_y, n).

* ``LinearModel``: f(x) = W φ(x) (Eq. 2); ``LinearModel.from_delm`` gives W₀ = B₀ U₀⁻¹, the
  same function as a DELM at initialization (Appendix D.1).
* ``ReLUMLP``: fully connected ReLU network of depth H, entries of every weight drawn
  N(0, 1/width) (Appendix D.1), with or without bias terms (Appendix D.2).
* ``LinearResNet``: f(x) = B (I + W_L) ⋯ (I + W_1) A x with identity initialization
  W_l = 0 and fixed input/output layers A, B (Zou et al. 2020; Bartlett et al. 2019).
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn

from deqlab._checks import check_int, check_tensor
from deqlab.models.delm import DELM, FeatureMap, identity_features


def _check_input(X: object, rows: int) -> torch.Tensor:
    return check_tensor("X", X, shape=(rows, None))


def _check_sizes(m_x: object, m_y: object, depth: object, width: object) -> tuple[int, ...]:
    """Validated (m_x, m_y, depth, width) of a deep baseline; width defaults to m_x."""
    m_x = check_int("m_x", m_x, min_value=1)
    m_y = check_int("m_y", m_y, min_value=1)
    depth = check_int("depth", depth, min_value=1)
    width = m_x if width is None else check_int("width", width, min_value=1)
    return m_x, m_y, depth, width


class LinearModel(nn.Module):
    """f(x) = W φ(x) with trainable W (m_y, m) and a fixed feature map φ (Eq. 2)."""

    def __init__(self, W: torch.Tensor, *, feature_map: FeatureMap | None = None) -> None:
        super().__init__()
        check_tensor("W", W, ndim=2)
        self.W = nn.Parameter(W.detach().clone())
        self.feature_map = identity_features if feature_map is None else feature_map

    @classmethod
    def from_delm(cls, delm: DELM) -> LinearModel:
        """The linear model W₀ = B₀ U₀⁻¹ equal to ``delm`` as a function (Appendix D.1)."""
        if not isinstance(delm, DELM):
            raise TypeError(f"`delm` must be a DELM; got {type(delm).__name__}")
        with torch.no_grad():
            return cls(delm.linear_weight(), feature_map=delm.feature_map)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        check_tensor("X", X, ndim=2)
        Phi = self.feature_map(X)
        _check_input(Phi, self.W.shape[1])
        return self.W @ Phi


class ReLUMLP(nn.Module):
    """x ↦ W⁽ᴴ⁾ relu(⋯ relu(W⁽¹⁾x + b⁽¹⁾) ⋯) + b⁽ᴴ⁾, H weight matrices (Appendix D.1).

    W⁽¹⁾ is (width, m_x), W⁽ˡ⁾ (width, width) for 1 < l < H, W⁽ᴴ⁾ (m_y, width); every entry
    is N(0, 1/width) as in the paper (δ/√m with m = width); biases start at zero.
    """

    def __init__(
        self,
        m_x: int,
        m_y: int,
        *,
        depth: int,
        width: int | None = None,
        bias: bool = True,
        generator: torch.Generator | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.m_x, m_y, depth, width = _check_sizes(m_x, m_y, depth, width)
        if not isinstance(bias, bool):
            raise TypeError(f"`bias` must be a bool; got {type(bias).__name__}")
        dims = [self.m_x] + [width] * (depth - 1) + [m_y]
        std = 1.0 / math.sqrt(width)
        factory = {"dtype": dtype, "device": device}
        gen_device = None if generator is None else generator.device  # draw there, then move
        self.weights = nn.ParameterList(
            nn.Parameter(
                (
                    torch.randn(d_out, d_in, generator=generator, dtype=dtype, device=gen_device)
                    * std
                ).to(device)
            )
            for d_in, d_out in itertools.pairwise(dims)
        )
        self.biases = nn.ParameterList(
            nn.Parameter(torch.zeros(d_out, 1, **factory)) for d_out in dims[1:] if bias
        )

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        H = _check_input(X, self.m_x)  # (m_x, n)
        for layer, W in enumerate(self.weights):
            H = W @ H  # (d_out, n)
            if len(self.biases):
                H = H + self.biases[layer]
            if layer < len(self.weights) - 1:
                H = torch.relu(H)
        return H


class LinearResNet(nn.Module):
    """f(x) = B (I + W_L) ⋯ (I + W_1) A x with identity initialization W_l = 0.

    A (width, m_x) and B (m_y, width) are fixed rectangular identities (Zou et al. 2020 fix
    the input and output layers; with m_x = width = m_y this is the residual network of
    Bartlett et al. 2019), so f₀(x) = x on the shared coordinates; only W_1..W_L train.
    """

    def __init__(
        self,
        m_x: int,
        m_y: int,
        *,
        depth: int,
        width: int | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.m_x, m_y, depth, width = _check_sizes(m_x, m_y, depth, width)
        factory = {"dtype": dtype, "device": device}
        self.register_buffer("input_layer", torch.eye(width, self.m_x, **factory))
        self.register_buffer("output_layer", torch.eye(m_y, width, **factory))
        self.blocks = nn.ParameterList(
            nn.Parameter(torch.zeros(width, width, **factory)) for _ in range(depth)
        )

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        H = self.input_layer @ _check_input(X, self.m_x)  # (width, n)
        for W in self.blocks:
            H = H + W @ H
        return self.output_layer @ H
