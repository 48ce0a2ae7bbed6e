"""The empirical NTK of a DEQ at its equilibrium, from exact implicit Jacobians.

Model: ``z*_i = f(z*_i, x_i; θ_f)`` (the cell, per sample) and ``ŷ_i = h(z*_i; θ_h)`` (the
head, k outputs). By the implicit function theorem (Hieu 2022, Eq. 2.3; Bai et al. 2019,
Theorem 1), ``dz*_i/dθ_f = (I − J_f,i)⁻¹ ∂f_i/∂θ_f``, so row ``(i, c)`` of the parameter
Jacobian is

    ∂ŷ_ic/∂θ_f = u_icᵀ ∂f_i/∂θ_f,   u_ic = g_ic + J_f,iᵀ u_ic,   g_ic = (∂ŷ_ic/∂z_i)ᵀ,
    ∂ŷ_ic/∂θ_h  (the head's own Jacobian),

and the empirical NTK on the batch is ``Θ = J Jᵀ`` of shape (n k, n k), rows ordered
sample-major ``(i, c)`` (Jacot et al. 2018; for DEQs Feng & Kolter 2020). Batched: the k·n
adjoints ``u_ic`` are one linear fixed-point solve on the batch repeated k times (the cell
is per sample, so its Jacobian is block diagonal), and the per-sample parameter VJPs
``u_icᵀ ∂f_i/∂θ`` are one ``torch.func.vmap`` over the k·n rows. Θ is accumulated
parameter by parameter in float64. A tuple/list state is packed per sample
(:mod:`.batch`): ``z_i`` is the concatenated state and ``J_f,i`` its Jacobian.

On Ling et al.'s ReLU DEQ (``f = relu(W z + U x)``, ``h = aᵀz``) the blocks are their
Section 2.3: training ``a`` alone gives ``Θ = ZᵀZ = G`` (λ_min = λ_0 at init), training
(W, U, a) gives ``H = H1 + H2 + H3`` of Eq. (4) (:func:`deqlab.theory.ntk.pl_gram`). On the
thesis's monotone DEQ, over θ = (A, B, U, u), it is the kernel ``K`` of Proposition 4
(:func:`deqlab.papers.hieu2022.mondeq_kernel.prediction_kernel`); on Kawaguchi's DELM with
φ(X) = I, over (A, B), the matrix ``D_t`` of Eq. (8)
(:func:`deqlab.papers.kawaguchi2021.theory.dynamics_matrix`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import jacrev, vjp, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel

from deqlab.diagnosis.batch import Inputs, PackedDEQ, repeat_inputs
from deqlab.solvers import Solution, Solver


@dataclass(frozen=True)
class Trainable:
    """The parameters the NTK differentiates, by module: ``{name: tensor}`` each."""

    cell: dict[str, torch.Tensor]
    head: dict[str, torch.Tensor]

    @classmethod
    def select(cls, cell: nn.Module, head: nn.Module | None, names: Iterable[str] | None):
        """All parameters that require grad (``names`` None), or those named
        ``"cell.<name>"`` / ``"head.<name>"``; ValueError naming ``params`` otherwise."""
        found = {f"cell.{k}": p for k, p in cell.named_parameters()}
        if head is not None:
            found |= {f"head.{k}": p for k, p in head.named_parameters()}
        if names is None:
            chosen = [k for k, p in found.items() if p.requires_grad]
        else:
            chosen = list(names)
            unknown = [k for k in chosen if k not in found]
            if unknown:
                raise ValueError(
                    f"`params` names unknown parameters {unknown}; expected some of {list(found)}"
                )
        if not chosen:
            raise ValueError("`params` selects no parameter: the NTK would be zero")
        pick = {k: found[k].detach() for k in chosen}
        return cls(
            {k[5:]: v for k, v in pick.items() if k.startswith("cell.")},
            {k[5:]: v for k, v in pick.items() if k.startswith("head.")},
        )

    @property
    def count(self) -> int:
        return sum(p.numel() for p in (*self.cell.values(), *self.head.values()))

    @property
    def counts(self) -> dict[str, int]:
        """Entries of each trained parameter, by ``"cell.<name>"`` / ``"head.<name>"``."""
        return {f"cell.{k}": p.numel() for k, p in self.cell.items()} | {
            f"head.{k}": p.numel() for k, p in self.head.items()
        }


@dataclass(frozen=True)
class ImplicitNTK:
    """Θ (n k, n k) float64, the outputs ŷ (n, k), the adjoint solve (None when only the
    head is trained) and, for the weights ``w`` passed as ``cotangent``, the float64
    gradient ``Jᵀw`` of ``Σ_ic w_ic ŷ_ic`` by ``"cell.<name>"`` / ``"head.<name>"`` (or None)."""

    matrix: torch.Tensor
    outputs: torch.Tensor
    adjoint: Solution | None
    n_params: int
    gradient: dict[str, torch.Tensor] | None


def _output_cotangents(model: PackedDEQ, z: torch.Tensor, k: int) -> torch.Tensor:
    """``g_ic = (∂ŷ_ic/∂z_i)ᵀ`` stacked output-major: (k, n, *S)."""
    z_leaf = z.detach().requires_grad_()
    with torch.enable_grad():
        out = model.outputs(z_leaf)
    rows = []
    for c in range(k):
        (g,) = torch.autograd.grad(out[:, c].sum(), z_leaf, retain_graph=c + 1 < k)
        rows.append(g)
    return torch.stack(rows)


def _adjoints(model: PackedDEQ, x: Inputs, z, cot, solver: Solver) -> Solution:
    """Solve ``u = g + J_fᵀ u`` for the k·n stacked cotangents (k n, *S) in one batched run."""
    k = cot.shape[0]
    z_rep = z.detach().repeat(k, *([1] * (z.ndim - 1))).requires_grad_()
    with torch.enable_grad():
        f_z = model.f(repeat_inputs(x, k))(z_rep)
    g = cot.reshape(z_rep.shape)

    def adjoint_map(u: torch.Tensor) -> torch.Tensor:  # u ↦ g + J_fᵀ u
        (vjp_u,) = torch.autograd.grad(f_z, z_rep, u, retain_graph=True)
        return g + vjp_u

    with torch.no_grad():
        return solver(adjoint_map, torch.zeros_like(g))


def _cell_rows(model: PackedDEQ, params, x: Inputs, z, u, chunk: int | None) -> dict:
    """Per-row ``u_icᵀ ∂f_i/∂θ_f`` for every (repeated) sample, ``{name: (k n, *p)}``."""
    k = u.shape[0] // z.shape[0]
    z_rep = z.detach().repeat(k, *([1] * (z.ndim - 1)))

    def one(zi: torch.Tensor, xi: Inputs, ui: torch.Tensor) -> dict[str, torch.Tensor]:
        return vjp(lambda p: model.cell_one(p, zi, xi), params)[1](ui)[0]

    with sdpa_kernel(SDPBackend.MATH):  # the fused attention kernels have no batching rule
        return vmap(one, chunk_size=chunk)(z_rep, repeat_inputs(x, k), u)


def _head_rows(model: PackedDEQ, params, z, chunk: int | None) -> dict[str, torch.Tensor]:
    """Per-sample ``∂ŷ_i/∂θ_h``, ``{name: (n, k, *p)}``."""

    def one(zi: torch.Tensor) -> dict[str, torch.Tensor]:
        return jacrev(lambda p: model.head_one(p, zi))(params)

    with sdpa_kernel(SDPBackend.MATH):
        return vmap(one, chunk_size=chunk)(z.detach())


def implicit_ntk(
    model: PackedDEQ,
    x: Inputs,
    z_star: torch.Tensor,
    trainable: Trainable,
    solver: Solver,
    *,
    cotangent: torch.Tensor | None = None,
    chunk: int | None = None,
) -> ImplicitNTK:
    """Θ = J Jᵀ at the packed ``z_star`` (module docstring); ``solver`` solves the adjoints.

    ``cotangent`` (n, k), if given, also returns ``Jᵀ w`` per parameter (the gradient of
    ``Σ w_ic ŷ_ic``, e.g. a loss's gradient from its output gradient ``w``).
    """
    with torch.no_grad():
        outputs = model.outputs(z_star)
    n, k = outputs.shape
    blocks: list[torch.Tensor] = []  # each (n, k, P_name), later (n k, P_name)
    adjoint = None  # no cell parameter trained: no adjoint solve
    if trainable.cell:
        adjoint = _adjoints(model, x, z_star, _output_cotangents(model, z_star, k), solver)
        rows = _cell_rows(model, trainable.cell, x, z_star, adjoint.z, chunk)
        blocks += [r.reshape(k, n, -1).transpose(0, 1) for r in rows.values()]
    if trainable.head:
        rows = _head_rows(model, trainable.head, z_star, chunk)
        blocks += [r.reshape(n, k, -1) for r in rows.values()]
    names = [f"cell.{p}" for p in trainable.cell] + [f"head.{p}" for p in trainable.head]
    shapes = [p.shape for p in (*trainable.cell.values(), *trainable.head.values())]
    theta = torch.zeros(n * k, n * k, dtype=torch.float64, device=z_star.device)
    gradient = {} if cotangent is not None else None
    for name, shape, block in zip(names, shapes, blocks, strict=True):
        jac = block.reshape(n * k, -1).detach().to(torch.float64)  # (n k, P_name)
        theta += jac @ jac.T
        if gradient is not None:
            gradient[name] = (cotangent.reshape(-1).to(jac) @ jac).reshape(shape)
    return ImplicitNTK(theta, outputs, adjoint, trainable.count, gradient)
