"""Training loop shared by the thesis's Chapter 4 experiments (Sections 4.1.2 and 4.2.1).

Adam with cosine annealing of the learning rate over all steps, mini-batches of a fixed
size in a seeded random order, cross-entropy; one checkpoint per epoch (model, optimiser,
schedule, sampler state and the rows so far), so an interrupted task resumes with the same
numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from deqlab.experiments.base import Row, TaskContext

EpochHook = Callable[[int, nn.Module], list[Row]]


def train_classifier(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
    ctx: TaskContext,
    base: Row,
    on_epoch: EpochHook | None = None,
) -> list[Row]:
    """Train ``model`` in place; return one row per epoch plus the rows of ``on_epoch``.

    Epoch rows: ``base`` and ``epoch``, ``train_loss`` (mean cross-entropy), ``train_acc``
    and, for a model with a ``deq`` (:class:`deqlab.DEQ`), ``solver_steps`` (mean forward
    solver steps). ``on_epoch(e, model)`` runs before training (``e = 0``) and after each
    epoch ``e``; its rows are appended.
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    batches = math.ceil(len(labels) / batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs * batches)
    generator = torch.Generator().manual_seed(seed)
    hook = on_epoch or (lambda epoch, net: [])
    resumed = ctx.resume()
    if resumed is not None:
        state, rows = resumed[0], list(resumed[1])
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        generator.set_state(state["generator"])
        epoch = state["epoch"]
    else:
        rows, epoch = hook(0, model), 0
    deq = getattr(model, "deq", None)
    while epoch < epochs:
        model.train()
        order = torch.randperm(len(labels), generator=generator).to(labels.device)
        loss_sum, correct, steps = 0.0, 0, 0
        for start in range(0, len(labels), batch_size):
            index = order[start : start + batch_size]
            logits = model(images[index])
            loss = F.cross_entropy(logits, labels[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            loss_sum += float(loss.detach()) * len(index)
            correct += int((logits.argmax(1) == labels[index]).sum())
            steps += deq.last_forward.n_steps if deq is not None else 0
        epoch += 1
        row: Row = {**base, "epoch": epoch, "train_loss": loss_sum / len(labels)}
        row["train_acc"] = correct / len(labels)
        if deq is not None:
            row["solver_steps"] = steps / batches
        rows.append(row)
        rows += hook(epoch, model)
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "schedule": schedule.state_dict(),
            "generator": generator.get_state(),
            "epoch": epoch,
        }
        ctx.checkpoint(state, rows)
        ctx.progress(epoch, epochs)
    return rows
