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

With ``batch=P`` the grid is walked row by row instead, ``P`` points of a row at a time
(:mod:`deqlab.landscape_batch`: one vmapped evaluation of the cell for all of them), each
DEQ solve warm-started from the equilibrium of the point above it in the previous row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import torch
from rich.progress import Progress
from torch import nn

from deqlab._checks import check_bool, check_int, check_positive, check_real
from deqlab.implicit import DEQ
from deqlab.landscape_batch import batched_logits, check_batchable, stacked_parameters

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
        have larger areas at the same threshold (thesis, Fig. 4.4). NaN where a grid point
        is not finite: it may or may not be in the set.
        """
        threshold = check_real("threshold", threshold)
        if not bool(torch.isfinite(self.losses).all()):
            return math.nan
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
    batch: int | None = None,
    progress: bool = True,
) -> LossSurface:
    """Evaluate ``L(θ* + α d₁ + β d₂)`` on a ``steps × steps`` grid over ``[−span, span]²``.

    ``directions`` defaults to two independent :func:`filter_normalized_direction` draws.
    ``batch=None``: point by point in :func:`snake_order`; with ``warm_start`` each DEQ
    solve starts from the previous (adjacent) point's equilibrium (:class:`WarmStarts`),
    else from the DEQ's default ``z0``; the parameters are moved in place under
    ``torch.no_grad`` and restored exactly afterwards (also when ``loss_fn`` raises).
    ``batch=P``: ``P`` points of a grid row at a time (:mod:`deqlab.landscape_batch`), the
    parameters left untouched; needs ``loss_fn`` from :func:`dataset_loss` and a module
    :func:`~deqlab.landscape_batch.check_batchable` accepts. ``progress``: a rich bar.
    """
    module = _check_module(module)
    if not callable(loss_fn):
        raise TypeError(f"`loss_fn` must be callable as loss_fn(module); got {loss_fn!r}")
    steps = check_int("steps", steps, min_value=2)
    span = check_positive("span", span)
    if batch is not None:
        _check_batch(module, loss_fn, batch)
    pair = _pair(module, directions, generator)
    grid = torch.linspace(-span, span, steps, dtype=torch.float64)
    with torch.no_grad(), Progress(transient=True, disable=not progress) as bar:
        task = bar.add_task("loss surface", total=steps * steps)
        advance = lambda n: bar.advance(task, n)  # noqa: E731
        if batch is None:
            losses, counts = _pointwise_grid(module, loss_fn, grid, pair, warm_start, advance)
        else:
            losses, counts = _batched_grid(module, loss_fn, grid, pair, batch, advance)
    return LossSurface(grid, grid.clone(), losses, pair, counts)


def _check_batch(module: nn.Module, loss_fn: object, batch: object) -> None:
    check_int("batch", batch, min_value=1)
    if not isinstance(loss_fn, DatasetLoss):
        raise TypeError(
            f"`loss_fn` must come from dataset_loss(criterion, batches) when `batch` is given; "
            f"got {type(loss_fn).__name__}"
        )
    check_batchable(module)


def _pointwise_grid(module, loss_fn, grid, pair, warm_start, advance):
    """Losses and solver evaluations ``(s, s)``, one point at a time in snake order."""
    (d1, d2), params = pair, dict(module.named_parameters())
    center = {k: p.detach().clone() for k, p in params.items()}
    losses = torch.empty(len(grid), len(grid), dtype=torch.float64)
    counts = torch.zeros(len(grid), len(grid), dtype=torch.int64)
    try:
        with WarmStarts(module, enabled=warm_start) as starts:
            for i, j in snake_order(len(grid)):
                for k, p in params.items():
                    p.copy_(center[k] + float(grid[i]) * d1[k] + float(grid[j]) * d2[k])
                starts.next_point()
                losses[i, j] = float(loss_fn(module))
                counts[i, j] = starts.steps
                advance(1)
    finally:
        for k, p in params.items():
            p.copy_(center[k])
    return losses, counts


def _batched_grid(module, loss_fn, grid, pair, batch, advance):
    """Losses and solver evaluations ``(s, s)``, ``batch`` points of a row at a time; each
    DEQ solve starts from the equilibrium of the same column in the previous row."""
    center = {k: p.detach() for k, p in module.named_parameters()}
    losses = torch.empty(len(grid), len(grid), dtype=torch.float64)
    counts = torch.zeros(len(grid), len(grid), dtype=torch.int64)
    starts: dict[int, list] = {}  # first column of a chunk -> equilibria per data batch
    for i in range(len(grid)):
        for j in range(0, len(grid), batch):
            cols = slice(j, j + batch)
            params = stacked_parameters(center, *pair, float(grid[i]), grid[cols])
            losses[i, cols], counts[i, cols], starts[j] = loss_fn.batched(
                module, params, starts.get(j)
            )
            advance(len(grid[cols]))
    return losses, counts


class DatasetLoss:
    """``loss(module)``: the mean of ``criterion(module(x), y)`` over all samples of ``data``
    (batches weighted by their size); :meth:`batched` does the same at stacked parameters."""

    def __init__(self, criterion: Callable, data: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.criterion, self.data = criterion, data
        self.total = sum(len(x) for x, _ in data)

    def __call__(self, module: nn.Module) -> float:
        with torch.no_grad():
            return (
                sum(float(self.criterion(module(x), y)) * len(x) for x, y in self.data) / self.total
            )

    def batched(self, module: nn.Module, params: dict, starts: list | None) -> tuple:
        """Losses ``(P,)``, solver evaluations ``(P,)`` and the equilibria per data batch
        at the stacked ``params`` ``(P, …)``; ``starts``: the DEQ's first iterates per batch."""
        points = next(iter(params.values())).shape[0]
        losses = torch.zeros(points, dtype=torch.float64)
        counts = torch.zeros(points, dtype=torch.int64)
        ends = []
        for k, (x, y) in enumerate(self.data):
            out, z, steps = batched_logits(module, params, x, None if starts is None else starts[k])
            losses += torch.tensor([float(self.criterion(o, y)) for o in out]) * len(x)
            counts += steps
            ends.append(z)
        return losses / self.total, counts, ends


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
    return DatasetLoss(criterion, data)
