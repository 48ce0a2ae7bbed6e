"""Weight and spectral normalisation of a cell's layers, recomputed once per training step.

A DEQ evaluates its cell tens of times per step with the same weights, so a normalised weight
is computed once per step (:func:`reset_norm`, called before the forward) rather than at
every call, as torchdeq's ``apply_norm`` / ``reset_norm`` do (Bai et al. 2019 train their DEQs
with weight normalisation). Each normalised parameter ``w`` of a ``Linear`` / ``Conv`` layer
is replaced by new parameters and recomputed from them:

* ``"weight_norm"`` (Salimans & Kingma 2016): ``w = g ⊙ v / ‖v‖``, the norm taken per output
  unit (over every dim but ``dim``), ``g`` initialised to ``‖w‖`` (so ``w`` is unchanged);
* ``"spectral_norm"`` (Miyato et al. 2018): ``w = g · w₀ / σ̂(w₀)`` with ``σ̂ = uᵀ W₀ v``
  after ``power_iterations`` steps of the power method on the matrix ``W₀`` (``w₀`` with
  ``dim`` first, flattened after it), ``u, v`` carried from step to step; ``g`` starts at 1,
  so ``‖w‖₂ ≈ g`` — a cell whose other parts are 1-Lipschitz contracts for ``g < 1``.

``learn_scale=False`` keeps ``g`` fixed (a buffer): the norm is then exactly the target.
Gradients flow to ``v`` (or ``w₀``) and ``g`` through the step's normalised weight.
:class:`deqlab.DEQ` calls :func:`reset_norm` on its cell at every forward; call it yourself
for normalised layers outside the cell, and after moving a module to another device or dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from deqlab._checks import check_bool, check_choice, check_int

KINDS = ("weight_norm", "spectral_norm")
#: the layers normalised by default, with the dim of their output units
TARGETS: dict[type[nn.Module], int] = {
    nn.Linear: 0,
    nn.Conv1d: 0,
    nn.Conv2d: 0,
    nn.Conv3d: 0,
    nn.ConvTranspose1d: 1,
    nn.ConvTranspose2d: 1,
    nn.ConvTranspose3d: 1,
}


def _matrix(w: torch.Tensor, dim: int) -> torch.Tensor:
    """``w`` with ``dim`` first, flattened after it: ``(out, rest)``."""
    return w.movedim(dim, 0).reshape(w.shape[dim], -1)


def _unit_norms(v: torch.Tensor, dim: int) -> torch.Tensor:
    """``‖v‖`` per output unit, shaped to broadcast against ``v``."""
    shape = [1] * v.ndim
    shape[dim] = v.shape[dim]
    return torch.linalg.vector_norm(_matrix(v, dim), dim=1).reshape(shape)


@dataclass
class Normalization:
    """The normalisation of one parameter ``name`` of one module (kept on the module as
    ``_deqlab_norm``)."""

    kind: str
    name: str
    dim: int
    power_iterations: int

    def compute(self, module: nn.Module) -> torch.Tensor:
        """The normalised weight from the module's current parameters (one power step for
        spectral normalisation, in training mode)."""
        g = getattr(module, self.name + "_g")
        if self.kind == "weight_norm":
            v = getattr(module, self.name + "_v")
            return g * v / _unit_norms(v, self.dim)
        w0 = getattr(module, self.name + "_orig")
        W = _matrix(w0, self.dim)
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        if module.training:
            with torch.no_grad():  # σ̂'s singular vectors are constants of the step
                for _ in range(self.power_iterations):  # u ← W v / ‖·‖, v ← Wᵀ u / ‖·‖
                    u.copy_(nn.functional.normalize(W @ v, dim=0))
                    v.copy_(nn.functional.normalize(W.mT @ u, dim=0))
        # clones: the next step's power iteration writes u, v in place
        sigma = u.clone() @ (W @ v.clone())
        return g * w0 / sigma


def apply_norm(
    module: nn.Module,
    kind: str = "weight_norm",
    *,
    learn_scale: bool = True,
    exclude: tuple[str, ...] = (),
    power_iterations: int = 1,
) -> list[str]:
    """Normalise the weights of every ``Linear`` / ``Conv`` layer of ``module`` (itself
    included) whose name does not contain one of ``exclude``; returns the layers' names.

    The normalised weight is computed now and again at every :func:`reset_norm` (call it
    once per training step, before the forward). Raises ValueError for an unknown ``kind``
    or a layer normalised twice.
    """
    check_choice("kind", kind, KINDS)
    check_bool("learn_scale", learn_scale)
    check_int("power_iterations", power_iterations, min_value=1)
    done = []
    for name, layer in module.named_modules():
        dim = TARGETS.get(type(layer))
        if dim is None or any(part in name for part in exclude):
            continue
        if hasattr(layer, "_deqlab_norm"):
            raise ValueError(f"layer {name or type(layer).__name__!r} is already normalised")
        _attach(layer, Normalization(kind, "weight", dim, power_iterations), learn_scale)
        done.append(name)
    return done


def _attach(layer: nn.Module, norm: Normalization, learn_scale: bool) -> None:
    w = layer._parameters.pop(norm.name).detach()
    if norm.kind == "weight_norm":
        layer.register_parameter(norm.name + "_v", nn.Parameter(w.clone()))
        scale = _unit_norms(w, norm.dim)
    else:
        layer.register_parameter(norm.name + "_orig", nn.Parameter(w.clone()))
        W = _matrix(w, norm.dim)
        gen = torch.Generator(device=w.device).manual_seed(0)
        u = torch.randn(W.shape[0], generator=gen, dtype=w.dtype, device=w.device)
        v = torch.randn(W.shape[1], generator=gen, dtype=w.dtype, device=w.device)
        layer.register_buffer(norm.name + "_u", nn.functional.normalize(u, dim=0))
        layer.register_buffer(norm.name + "_v", nn.functional.normalize(v, dim=0))
        scale = torch.ones((), dtype=w.dtype, device=w.device)
    if learn_scale:
        layer.register_parameter(norm.name + "_g", nn.Parameter(scale))
    else:
        layer.register_buffer(norm.name + "_g", scale)
    layer._deqlab_norm = norm
    setattr(layer, norm.name, norm.compute(layer))


def reset_norm(module: nn.Module) -> None:
    """Recompute the normalised weight of every layer of ``module`` normalised by
    :func:`apply_norm` (once per training step, before the forward)."""
    for layer in module.modules():
        norm = getattr(layer, "_deqlab_norm", None)
        if norm is not None:
            setattr(layer, norm.name, norm.compute(layer))


def remove_norm(module: nn.Module) -> None:
    """Fold each normalised weight back into a plain parameter (its current value)."""
    for layer in module.modules():
        norm = getattr(layer, "_deqlab_norm", None)
        if norm is None:
            continue
        with torch.no_grad():
            w = norm.compute(layer).detach().clone()
        for suffix in ("_g", "_v", "_orig", "_u"):
            for table in (layer._parameters, layer._buffers):
                table.pop(norm.name + suffix, None)
        delattr(layer, norm.name)
        layer.register_parameter(norm.name, nn.Parameter(w))
        del layer._deqlab_norm
