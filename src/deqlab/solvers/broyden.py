"""Limited-memory "good" Broyden on ``g(z) = f(z) - z`` (Broyden 1965; Bai et al. 2019).

``B ≈ J_g⁻¹`` starts at ``-I`` (so the first step is a Picard step) and is kept as
``B = -I + Σ_i u_i v_iᵀ``; when ``memory`` pairs are stored, ``B`` restarts from ``-I``
(each pair was built on the ones before it, so dropping only the oldest would leave an
inconsistent ``B``; in our tests that variant diverges on well-posed linear problems).
With ``Δz = z_k - z_{k-1}``, ``Δg = g_k - g_{k-1}``, the good-Broyden update of the
inverse (Sherman–Morrison form)

    B⁺ = B + (Δz - B Δg) (Δzᵀ B) / (Δzᵀ B Δg)

appends ``u = (Δz - BΔg) / (ΔzᵀBΔg)``, ``v = Bᵀ Δz``; the step is ``z⁺ = z - B g(z)``.
An update whose denominator vanishes (relative to ``‖v‖‖Δg‖``) or is not finite is
skipped for that sample. The best iterate seen is returned.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from deqlab._checks import check_int
from deqlab.solvers.base import Solver
from deqlab.solvers.history import History
from deqlab.solvers.solution import Solution, register


def _apply(us: History, vs: History, x: torch.Tensor) -> torch.Tensor:
    """``(-I + Σ u_i v_iᵀ) x`` for a batch: ``x`` is ``(B, N)``, the pairs ``(B, m, N)``."""
    if not len(us):
        return -x
    U, V = us.stacked(), vs.stacked()  # (B, m, N)
    return -x + ((V @ x[:, :, None]).transpose(1, 2) @ U)[:, 0]


@register("broyden")
@dataclass(frozen=True, kw_only=True)
class Broyden(Solver):
    """Limited-memory good Broyden.

    Args:
        memory: number of rank-one updates kept before restarting from ``B = -I``.
        (others: see :class:`deqlab.solvers.base.Solver`)

    With ``per_sample=True`` every sample has its own ``B`` (batched products, no Python
    loop over samples).
    """

    memory: int = 30

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("memory", self.memory, min_value=1)

    def stepper(self) -> BroydenState:
        """A fresh ``B = -I`` and no previous iterate, for one solve."""
        return BroydenState(self.memory)

    def finish(self, step: BroydenState, solution: Solution) -> Solution:  # type: ignore[override]
        """The Solution with the final estimate ``B ≈ (J_f − I)⁻¹`` (SHINE reuses it)."""
        estimate = BroydenInverse.of(step, solution.z.shape, self.per_sample)
        return dataclasses.replace(solution, inverse_jacobian=estimate)


@dataclass(frozen=True)
class BroydenInverse:
    """A solve's final ``B = -I + Σ_i u_i v_iᵀ ≈ J_g⁻¹ = (J_f − I)⁻¹``, per row.

    ``us``, ``vs``: the pairs ``(B, m, N)`` (detached; ``m = 0`` after a restart at the
    last step); ``rows``: ``B`` of the solver's ``(B, N)`` layout. SHINE (Ramzi et al.
    2022, Eq. 4) uses ``Bᵀ`` to approximate the adjoint ``u = (I − J_f)⁻ᵀ g ≈ −Bᵀ g``.
    """

    us: torch.Tensor | None
    vs: torch.Tensor | None
    rows: int

    @classmethod
    def of(cls, state: BroydenState, shape: torch.Size, per_sample: bool) -> BroydenInverse:
        rows = shape[0] if per_sample else 1
        if not len(state.us):
            return cls(None, None, rows)
        return cls(state.us.stacked().detach(), state.vs.stacked().detach(), rows)

    def rmatvec(self, x: torch.Tensor) -> torch.Tensor:
        """``Bᵀ x = -x + Σ_i v_i (u_iᵀ x)`` for ``x`` shaped like the solve's ``z``."""
        flat = x.reshape(self.rows, -1)  # (B, N)
        if self.us is None:
            return -x
        coeff = self.us @ flat[:, :, None]  # uᵢᵀx: (B, m, 1)
        return (-flat + (coeff.transpose(1, 2) @ self.vs)[:, 0]).reshape(x.shape)


class BroydenState:
    """What Broyden keeps between steps: the pairs of ``B = -I + Σ u_i v_iᵀ`` and the
    previous iterate and residual ``(z_{k-1}, g_{k-1})``."""

    def __init__(self, memory: int) -> None:
        self.memory = memory
        self.us, self.vs = History(memory), History(memory)
        self.previous: tuple[torch.Tensor, torch.Tensor] | None = None

    def residual_out(self, z: torch.Tensor) -> None:
        """None: the loop's residual is kept as the previous one, not in a buffer."""
        return None

    def __call__(
        self, z: torch.Tensor, fz: torch.Tensor, g: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Update ``B`` with ``(Δz, Δg)`` (when there is a previous step); ``z − B g(z)``."""
        g = fz - z if g is None else g  # (B, N)
        if self.previous is not None:
            self._update(z - self.previous[0], g - self.previous[1])
        self.previous = (z, g)
        return z - _apply(self.us, self.vs, g)

    def _update(self, dz: torch.Tensor, dg: torch.Tensor) -> None:
        """Append ``u = (Δz − BΔg)/(ΔzᵀBΔg)``, ``v = BᵀΔz`` (``u = 0`` where it vanishes)."""
        b_dg = _apply(self.us, self.vs, dg)  # (B, N)
        v = _apply(self.vs, self.us, dz)  # Bᵀ Δz, (B, N)
        denom = (v * dg).sum(dim=1, keepdim=True)  # (B, 1)
        scale = v.norm(dim=1, keepdim=True) * dg.norm(dim=1, keepdim=True)
        ok = (denom.abs() > torch.finfo(dz.dtype).eps * scale) & torch.isfinite(denom)
        u = torch.where(ok, (dz - b_dg) / torch.where(ok, denom, 1.0), 0.0)
        if len(self.us) == self.memory:  # restart: dropping only the oldest pair
            self.us.clear()  # leaves an inconsistent B and can diverge
            self.vs.clear()
        self.us.push(u)
        self.vs.push(v)
