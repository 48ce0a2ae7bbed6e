"""Training loop shared by the thesis's Chapter 4 experiments (Sections 4.1.2 and 4.2.1).

Adam with cosine annealing of the learning rate over all steps, mini-batches of a fixed
size in a seeded random order, cross-entropy: a :class:`~deqlab.train.sgd.MinibatchTrainer`
run by :func:`~deqlab.train.resumable.run_resumable`, so an interrupted task resumes with
the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from deqlab.experiments.base import Row, TaskContext
from deqlab.experiments.blocks import MinibatchTraining
from deqlab.train.protocol import Record
from deqlab.train.resumable import run_resumable
from deqlab.train.sgd import MinibatchTrainer

EpochHook = Callable[[int, nn.Module], list[Row]]


def train_classifier(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    training: MinibatchTraining,
    ctx: TaskContext,
    *,
    base: Row,
    on_epoch: EpochHook | None = None,
) -> list[Row]:
    """Train ``model`` in place with ``training``'s epochs, batch size, lr and seed; return
    one row per epoch plus the rows of ``on_epoch``.

    Epoch rows: ``base`` and ``epoch``, ``train_loss`` (mean cross-entropy), ``train_acc``
    and, for a model with a ``deq`` (:class:`deqlab.DEQ`), ``solver_steps`` (mean forward
    solver steps). ``on_epoch(e, model)`` runs before training (``e = 0``) and after each
    epoch ``e``; its rows are appended.
    """
    epochs, batch_size = training.epochs, training.batch_size
    optimizer = torch.optim.Adam(model.parameters(), lr=training.lr)
    batches = math.ceil(len(labels) / batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs * batches)
    deq = getattr(model, "deq", None)
    hook = on_epoch or (lambda epoch, net: [])

    def batch_loss(index: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        logits = model(images[index])
        counts = {"correct": int((logits.argmax(1) == labels[index]).sum())}
        if deq is not None:
            counts["solver_steps"] = deq.last_forward.n_steps
        return F.cross_entropy(logits, labels[index]), counts

    trainer = MinibatchTrainer(
        model,
        batch_loss,
        optimizer,
        n=len(labels),
        batch_size=batch_size,
        seed=training.seed,
        schedule=schedule,
    )
    rows: list[Row] = []

    def before_step(epoch: int) -> None:
        if epoch == 0:
            rows.extend(hook(0, model))

    def after_step(record: Record) -> None:
        row: Row = {**base, "epoch": record["step"] + 1, "train_loss": record["loss"]}
        row["train_acc"] = record["correct"] / len(labels)
        if deq is not None:
            row["solver_steps"] = record["solver_steps"] / record["batches"]
        rows.append(row)
        rows.extend(hook(row["epoch"], model))

    run_resumable(trainer, epochs, ctx, before_step=before_step, after_step=after_step, rows=rows)
    return rows
