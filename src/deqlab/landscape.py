"""Filter-normalised 2-D loss surfaces (Li et al. 2018; thesis, Section 4.2).

Around trained parameters θ* the surface is ``Φ(α, β) = L(θ* + α d₁ + β d₂)`` on a grid over
``[−span, span]²`` (51 × 51 over [−1, 1]² in the thesis). The directions are random Gaussian
and *filter-normalised*: every row (filter: slice along dim 0) of every weight of rank ≥ 2
is rescaled to the norm of the same row of θ*, so the plot is invariant to the per-filter
rescalings of ReLU networks (Dinh et al. 2017). Parameters of rank ≤ 1 — biases,
normalisation scales and shifts, vectors — get zero directions (Li et al.'s
``ignore="biasbn"``). Works for any ``nn.Module`` and any loss ``loss_fn(module) -> scalar``;
:func:`dataset_loss` builds one that averages a criterion over data batches.

The grid is walked in snake order (row 0 left to right, row 1 right to left, …), so each
point is a neighbour of the previous one; every :class:`deqlab.DEQ` inside the module then
starts its fixed-point solve from the equilibrium it reached on the same data at that
neighbour (ours: ``z*(θ)`` is continuous in θ where the solve is stable, so the start is
already close; the fixed point, hence the loss, is the same within the solver tolerance).
A solve that stops at its ``max_iter`` without converging returns an iterate that depends
on its start, so its loss then depends on the walk: check ``LossSurface.solver_steps``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import torch
from rich.progress import Progress
from torch import nn

from deqlab._checks import check_bool, check_int, check_positive, check_real
from deqlab.implicit import DEQ

Directions = dict[str, torch.Tensor]
LossFn = Callable[[nn.Module], torch.Tensor | float]


def _check_module(module: object) -> nn.Module:
    if not isinstance(module, nn.Module):
        raise TypeError(f"`module` must be a torch.nn.Module; got {type(module).__name__}")
    return module


def filter_normalized_direction(
    module: nn.Module, *, generator: torch.Generator | None = None
) -> Directions:
    """A random direction with ``‖d[i]‖ = ‖θ[i]‖`` for every filter ``i`` of every weight.

    Returns a dict keyed like ``module.named_parameters()``; entries of rank ≤ 1 are zero.
    ``generator`` (a CPU ``torch.Generator``) makes the direction reproducible.
    """
    module = _check_module(module)
    directions: Directions = {}
    for name, p in module.named_parameters():
        theta = p.detach()
        if theta.ndim <= 1:
            directions[name] = torch.zeros_like(theta)
            continue
        d = torch.randn(theta.shape, generator=generator, dtype=theta.dtype).to(theta.device)
        rows_d = d.reshape(d.shape[0], -1)  # (filters, fan_in)
        rows_theta = theta.reshape(theta.shape[0], -1)
        norms_d = torch.linalg.vector_norm(rows_d, dim=1, keepdim=True)
        norms_theta = torch.linalg.vector_norm(rows_theta, dim=1, keepdim=True)
        directions[name] = (rows_d * (norms_theta / norms_d)).reshape(theta.shape)
    return directions


def _check_directions(module: nn.Module, directions: object, name: str) -> Directions:
    if not isinstance(directions, Mapping):
        raise TypeError(
            f"`{name}` must be a mapping name -> tensor; got {type(directions).__name__}"
        )
    params = dict(module.named_parameters())
    if set(directions) != set(params):
        missing = sorted(set(params) - set(directions))
        extra = sorted(set(directions) - set(params))
        raise ValueError(
            f"`{name}` must have one entry per parameter of `module`; missing {missing}, "
            f"unexpected {extra}"
        )
    for key, d in directions.items():
        if not isinstance(d, torch.Tensor) or d.shape != params[key].shape:
            got = tuple(d.shape) if isinstance(d, torch.Tensor) else type(d).__name__
            raise ValueError(
                f"`{name}[{key!r}]` must be a tensor of shape {tuple(params[key].shape)}; got {got}"
            )
    return dict(directions)


@dataclass(frozen=True)
class LossSurface:
    """A sampled loss surface: ``losses[i, j] = L(θ* + alphas[i] d₁ + betas[j] d₂)``."""

    alphas: torch.Tensor
    betas: torch.Tensor
    losses: torch.Tensor
    directions: tuple[Directions, Directions]
    #: ``solver_steps[i, j]``: evaluations of ``f`` by the forward solves of every DEQ in
    #: the module at that point (zeros for a module without a DEQ).
    solver_steps: torch.Tensor | None = None

    def flat_area(self, threshold: float) -> float:
        """Area of ``{(α, β): Φ(α, β) ≤ threshold}`` in direction units (cells × cell area).

        A grid point counts for one cell of size ``Δα · Δβ``; the whole grid of ``s × s``
        points has area ``s² Δα Δβ`` (≈ ``(2 span)²``). A flatness measure: wider basins
        have larger areas at the same threshold (thesis, Fig. 4.4).
        """
        threshold = check_real("threshold", threshold)
        cell = float((self.alphas[1] - self.alphas[0]) * (self.betas[1] - self.betas[0]))
        return float((self.losses <= threshold).sum()) * cell


def _shapes(state: object) -> tuple:
    """The shapes of a tensor or of a tuple/list of tensors (a DEQ's input or state)."""
    if isinstance(state, torch.Tensor):
        return (tuple(state.shape),)
    return tuple(tuple(t.shape) for t in state)


class WarmStarts:
    """Warm-starts every :class:`deqlab.DEQ` inside a module from its previous equilibrium.

    Inside ``with WarmStarts(module):`` the ``k``-th call of each DEQ since the last
    :meth:`next_point` starts from the equilibrium of its ``k``-th call before it, when the
    inputs have the same shapes (the same data batch); otherwise from its default ``z0``.
    ``steps`` counts the forward solvers' evaluations of ``f`` since :meth:`next_point`.
    ``enabled=False`` only counts (every solve from the default ``z0``).
    """

    def __init__(self, module: nn.Module, *, enabled: bool = True) -> None:
        self.deqs = [m for m in _check_module(module).modules() if isinstance(m, DEQ)]
        self.enabled = check_bool("enabled", enabled)
        self.previous: dict[tuple[int, int], tuple[tuple, object]] = {}
        self.calls = [0] * len(self.deqs)
        self.steps = 0

    def next_point(self) -> None:
        """Start a new evaluation: call counters and ``steps`` back to zero."""
        self.calls = [0] * len(self.deqs)
        self.steps = 0

    def _forward(self, index: int, deq: DEQ) -> Callable:
        solve = type(deq).forward.__get__(deq)

        def forward(x: object, z0: object = None) -> object:
            key = (index, self.calls[index])
            self.calls[index] += 1
            shapes, start = self.previous.get(key, (None, None))
            if z0 is None and self.enabled and shapes == _shapes(x):
                z0 = start
            z = solve(x, z0)
            detached = z.detach() if isinstance(z, torch.Tensor) else type(z)(t.detach() for t in z)
            self.previous[key] = (_shapes(x), detached)
            self.steps += deq.last_forward.n_steps
            return z

        return forward

    def __enter__(self) -> WarmStarts:
        for index, deq in enumerate(self.deqs):
            deq.forward = self._forward(index, deq)
        return self

    def __exit__(self, *exc: object) -> None:
        for deq in self.deqs:
            del deq.forward


def snake_order(steps: int) -> list[tuple[int, int]]:
    """Grid indices ``(i, j)`` row by row, odd rows reversed: consecutive points are adjacent."""
    steps = check_int("steps", steps, min_value=1)
    row = list(range(steps))
    return [(i, j) for i in row for j in (row if i % 2 == 0 else row[::-1])]


def _pair(module: nn.Module, directions, generator) -> tuple[Directions, Directions]:
    if directions is None:
        directions = (
            filter_normalized_direction(module, generator=generator),
            filter_normalized_direction(module, generator=generator),
        )
    if not isinstance(directions, tuple | list) or len(directions) != 2:
        raise TypeError("`directions` must be a pair (d1, d2) of mappings name -> tensor")
    d1 = _check_directions(module, directions[0], "directions[0]")
    return d1, _check_directions(module, directions[1], "directions[1]")


def loss_surface(
    module: nn.Module,
    loss_fn: LossFn,
    *,
    directions: tuple[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor]] | None = None,
    steps: int = 51,
    span: float = 1.0,
    generator: torch.Generator | None = None,
    warm_start: bool = True,
    progress: bool = True,
) -> LossSurface:
    """Evaluate ``L(θ* + α d₁ + β d₂)`` on a ``steps × steps`` grid over ``[−span, span]²``.

    ``directions`` defaults to two independent :func:`filter_normalized_direction` draws.
    The grid is walked in :func:`snake_order`; with ``warm_start`` each DEQ solve starts
    from the previous (adjacent) point's equilibrium (:class:`WarmStarts`), else from the
    DEQ's default ``z0``. The parameters are moved in place under ``torch.no_grad`` and
    restored exactly afterwards (also when ``loss_fn`` raises). ``progress``: a rich bar.
    """
    module = _check_module(module)
    if not callable(loss_fn):
        raise TypeError(f"`loss_fn` must be callable as loss_fn(module); got {loss_fn!r}")
    steps = check_int("steps", steps, min_value=2)
    span = check_positive("span", span)
    d1, d2 = _pair(module, directions, generator)
    params = dict(module.named_parameters())
    center = {k: p.detach().clone() for k, p in params.items()}
    grid = torch.linspace(-span, span, steps, dtype=torch.float64)
    losses = torch.empty(steps, steps, dtype=torch.float64)
    counts = torch.zeros(steps, steps, dtype=torch.int64)
    try:
        with (
            torch.no_grad(),
            WarmStarts(module, enabled=warm_start) as starts,
            Progress(transient=True, disable=not progress) as bar,
        ):
            task = bar.add_task("loss surface", total=steps * steps)
            for i, j in snake_order(steps):
                for k, p in params.items():
                    p.copy_(center[k] + float(grid[i]) * d1[k] + float(grid[j]) * d2[k])
                starts.next_point()
                losses[i, j] = float(loss_fn(module))
                counts[i, j] = starts.steps
                bar.advance(task)
    finally:
        with torch.no_grad():
            for k, p in params.items():
                p.copy_(center[k])
    return LossSurface(grid, grid.clone(), losses, (d1, d2), counts)


def dataset_loss(
    criterion: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
) -> LossFn:
    """``loss_fn(module)``: the mean of ``criterion(module(x), y)`` over all samples.

    ``criterion`` returns the batch mean (e.g. ``nn.functional.cross_entropy``); batches
    are weighted by their size. ``batches`` is materialised once, so it may be a generator.
    """
    if not callable(criterion):
        raise TypeError(f"`criterion` must be callable; got {type(criterion).__name__}")
    data = list(batches)
    if not data:
        raise ValueError("`batches` must hold at least one (x, y) batch; got none")
    total = sum(len(x) for x, _ in data)

    def loss_fn(module: nn.Module) -> float:
        with torch.no_grad():
            return sum(float(criterion(module(x), y)) * len(x) for x, y in data) / total

    return loss_fn
