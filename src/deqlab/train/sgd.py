"""Gradient descent on a loss given as a function of the parameters: full batch, or one
epoch of minibatches (a seeded random order) per step with a torch optimizer.

The experiments' training loops (a linear ResNet's GD, SGD with heavy-ball momentum, Adam
with cosine annealing) as :class:`~deqlab.train.protocol.Trainer` s, so that they resume
through :func:`deqlab.train.resumable.run_resumable` like every other trainer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from deqlab._checks import check_int, check_positive, check_real
from deqlab.train.divergence import diverged
from deqlab.train.protocol import Record, Trainer


class FullBatchGD(Trainer):
    """``θ(k+1) = θ(k) − η∇L(θ(k))`` on ``loss()``, the full-batch objective of ``model``.

    Step ``k`` records ``{"step": k, "loss": L(θ(k))}``; a non-finite loss stops the run
    (``stop_reason`` ``"loss_not_finite"``) without an update.
    """

    def __init__(self, model: nn.Module, loss: Callable[[], torch.Tensor], *, lr: float):
        super().__init__()
        self.model, self.loss, self.lr = model, loss, check_positive("lr", lr)
        self.params = list(model.parameters())

    def step(self) -> Record:
        """Record step ``k`` at θ(k), then move to θ(k+1) (not after a non-finite loss)."""
        record, loss = self._measure()
        if self.stopped:
            return record
        grads = torch.autograd.grad(loss, self.params)
        with torch.no_grad():
            for p, g in zip(self.params, grads, strict=True):
                p.sub_(self.lr * g)
        self.step_count += 1
        return record

    def evaluate(self) -> Record:
        """Record θ(k) without a step: the last record of a run of ``k`` steps."""
        return self._measure()[0]

    def _measure(self) -> tuple[Record, torch.Tensor]:
        self.check_running()
        loss = self.loss()
        record: Record = {"step": self.step_count, "loss": loss.item()}
        self.records.append(record)
        if not math.isfinite(record["loss"]):
            what = f"the loss is {record['loss']}"
            self.stop("loss_not_finite", diverged(self.step_count, self.lr, what, None))
        return record, loss

    def state_dict(self) -> dict[str, Any]:
        """The model's parameters and the protocol's state."""
        return {**self.protocol_state(), "model": self.model.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict`."""
        self.model.load_state_dict(state["model"])
        self.load_protocol_state(state)


class HeavyBall(torch.optim.Optimizer):
    """SGD with heavy-ball momentum μ, torch.optim.SGD's rule written out:
    ``v ← μv + g`` (``v₀ = g₀``), ``θ ← θ − η v``."""

    def __init__(self, params: Any, *, lr: float, momentum: float) -> None:
        check_positive("lr", lr)
        check_real("momentum", momentum, low=0.0, high=1.0, high_inclusive=False)
        super().__init__(params, {"lr": lr, "momentum": momentum})

    @torch.no_grad()
    def step(self, closure: None = None) -> None:  # type: ignore[override]
        """One update from the gradients in ``p.grad``."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "velocity" not in state:
                    state["velocity"] = p.grad.clone()
                else:
                    state["velocity"].mul_(group["momentum"]).add_(p.grad)
                p.sub_(group["lr"] * state["velocity"])


#: What ``batch_loss(index)`` returns: the batch's loss, or the loss and counts to sum.
BatchResult = torch.Tensor | tuple[torch.Tensor, dict[str, float]]


class MinibatchTrainer(Trainer):
    """One step is one epoch: the ``n`` samples in a seeded random order, cut into batches of
    ``batch_size``; on each, ``optimizer`` steps on the loss ``batch_loss(index)`` returns
    (then ``schedule``, if any, steps).

    Step ``k`` records ``{"step": k, "loss": Σ_b |b| L_b / n, "batches": B}`` (the epoch's
    sample-mean batch loss over its ``B`` batches) and, when ``batch_loss`` also returns a
    dict of counts (correct predictions, solver steps), each count summed over the epoch.
    A non-finite loss is recorded, not a stop: the caller decides.
    """

    def __init__(
        self,
        model: nn.Module,
        batch_loss: Callable[[torch.Tensor], BatchResult],
        optimizer: torch.optim.Optimizer,
        *,
        n: int,
        batch_size: int,
        seed: int,
        schedule: torch.optim.lr_scheduler.LRScheduler | None = None,
    ) -> None:
        super().__init__()
        self.model, self.batch_loss = model, batch_loss
        self.optimizer, self.schedule = optimizer, schedule
        self.n = check_int("n", n, min_value=1)
        self.batch_size = check_int("batch_size", batch_size, min_value=1)
        self.generator = torch.Generator().manual_seed(seed)
        self.device = next(model.parameters()).device

    def step(self) -> Record:
        """One epoch over the samples in a fresh random order."""
        self.check_running()
        self.model.train()
        order = torch.randperm(self.n, generator=self.generator).to(self.device)
        total, sums = 0.0, {}  # Σ_b |b| L_b and the counts' sums
        for start in range(0, self.n, self.batch_size):
            index = order[start : start + self.batch_size]  # (b,)
            loss, counts = self._batch(index)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if self.schedule is not None:
                self.schedule.step()
            total += float(loss.detach()) * len(index)
            for key, value in counts.items():
                sums[key] = sums.get(key, 0) + value
        batches = math.ceil(self.n / self.batch_size)
        record: Record = {"step": self.step_count, "loss": total / self.n, "batches": batches}
        record.update(sums)
        self.records.append(record)
        self.step_count += 1
        return record

    def _batch(self, index: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        result = self.batch_loss(index)
        return result if isinstance(result, tuple) else (result, {})

    def state_dict(self) -> dict[str, Any]:
        """Model, optimizer, schedule, the sampler's generator and the protocol's state."""
        schedule = None if self.schedule is None else self.schedule.state_dict()
        return {
            **self.protocol_state(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": schedule,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict`."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.schedule is not None:
            self.schedule.load_state_dict(state["schedule"])
        self.generator.set_state(state["generator"])
        self.load_protocol_state(state)
