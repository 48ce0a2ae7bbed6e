"""Baselines the DELM is compared with (Kawaguchi 2021, Section 2.2, Section 4, Appendix D).

All models take inputs with samples as columns, X of shape (m_x, n), and return (m_y, n).

* ``LinearModel``: f(x) = W φ(x) (Eq. 2); ``LinearModel.from_delm`` gives W₀ = B₀ U₀⁻¹, the
  same function as a DELM at initialization (Appendix D.1).
* ``ReLUMLP``: fully connected ReLU network of depth H, entries of every weight drawn
  N(0, 1/width) (Appendix D.1), with or without bias terms (Appendix D.2).
* ``LinearResNet``: f(x) = B (I + W_L) ⋯ (I + W_1) A x with zero-initialized residual
  blocks W_l = 0 and fixed input/output transformations A, B (Zou, Long & Gu 2020).
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn

from deqlab._checks import check_choice, check_int, check_tensor
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


#: The fixed input/output transformations of :class:`LinearResNet` (``io``).
RESNET_IO = ("modified_identity", "gaussian", "identity")


def resnet_io_width(io: str, m_x: int, m_y: int) -> int:
    """The width each construction uses by default: d + k (modified identity, and the
    Gaussian transformations at the same width), d (identity layers, square when d = k)."""
    check_choice("io", io, RESNET_IO)
    return m_x if io == "identity" else m_x + m_y


class LinearResNet(nn.Module):
    """f(x) = B (I + W_L) ⋯ (I + W_1) A x, residual blocks W_l zero at initialization.

    Zou, Long & Gu, "On the global convergence of training deep linear ResNets" (ICLR 2020,
    arXiv:2003.01094), the linear ResNet Kawaguchi (2021, Section 4) compares with: an input
    transformation A (width, d) and an output transformation B (k, width) fixed during
    training, L hidden m×m weights W_l trained by GD from zero ("zero initialization on all
    hidden weights", their abstract: every block starts as the identity, Kawaguchi's
    "identity initialization").  The transformations (``io``), from the same abstract:

    * ``"modified_identity"``: A = [I_d; 0] (the first d coordinates), B = [0, I_k] (the
      last k), width ≥ d + k ("a (d+k)-wide neural network is sufficient").  BA = 0: the
      network starts at f₀ = 0 and A, B have all singular values 1.
    * ``"gaussian"``: "Gaussian random linear transformations", entries of A drawn
      N(0, 1/width) and of B N(0, 1/k) (our reading of their scaling: ‖Ax‖ ≈ ‖x‖, and
      their GD step then scales as k/(L·width·‖X‖²)); wide enough for their theorem.
    * ``"identity"``: A, B rectangular identities (width = d = k gives Bartlett et al.'s
      residual network, f₀(x) = x): not Zou et al.'s; kept as the stand-in earlier runs used.

    Only the W_l are parameters; A and B are buffers.  (The body of Zou et al. was not
    available to us: the block placement of the modified identity and the Gaussian
    variances are our reading of its abstract, as stated above.)
    """

    def __init__(
        self,
        m_x: int,
        m_y: int,
        *,
        depth: int,
        io: str = "modified_identity",
        width: int | None = None,
        generator: torch.Generator | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        check_choice("io", io, RESNET_IO)
        m_x = check_int("m_x", m_x, min_value=1)
        m_y = check_int("m_y", m_y, min_value=1)
        width = resnet_io_width(io, m_x, m_y) if width is None else width
        self.m_x, m_y, depth, width = _check_sizes(m_x, m_y, depth, width)
        if io == "modified_identity" and width < m_x + m_y:
            raise ValueError(
                f"`width` must be >= m_x + m_y = {m_x + m_y} for the modified identity; got {width}"
            )
        self.io = io
        A, B = _io_layers(io, m_x, m_y, width, generator, dtype)
        factory = {"dtype": dtype, "device": device}
        self.register_buffer("input_layer", A.to(device))
        self.register_buffer("output_layer", B.to(device))
        self.blocks = nn.ParameterList(
            nn.Parameter(torch.zeros(width, width, **factory)) for _ in range(depth)
        )

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        H = self.input_layer @ _check_input(X, self.m_x)  # (width, n)
        for W in self.blocks:
            H = H + W @ H
        return self.output_layer @ H


def _io_layers(
    io: str, m_x: int, m_y: int, width: int, generator: torch.Generator | None, dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """A (width, m_x) and B (m_y, width) of the construction ``io`` (LinearResNet)."""
    if io == "gaussian":  # drawn where the generator lives (moved by the caller)
        where = {"generator": generator, "dtype": dtype,
                 "device": None if generator is None else generator.device}  # fmt: skip
        A = torch.randn(width, m_x, **where) / math.sqrt(width)
        B = torch.randn(m_y, width, **where) / math.sqrt(m_y)
        return A, B
    if io == "identity":
        return torch.eye(width, m_x, dtype=dtype), torch.eye(m_y, width, dtype=dtype)
    A = torch.zeros(width, m_x, dtype=dtype)
    B = torch.zeros(m_y, width, dtype=dtype)
    A[:m_x] = torch.eye(m_x, dtype=dtype)
    B[:, width - m_y :] = torch.eye(m_y, dtype=dtype)
    return A, B
