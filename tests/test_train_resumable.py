"""run_resumable (deqlab/train/resumable.py): a task killed right after a checkpoint resumes
to the records and rows of an uninterrupted run, on FullBatchGD on least squares."""

import pytest

from deqlab.experiments.base import TaskContext
from deqlab.train.resumable import run_resumable
from helpers import least_squares_gd


def _context(store, every, crash_after=None):
    def save(state, rows):
        store["saved"] = (state, list(rows))
        store["saves"] = store.get("saves", 0) + 1
        if store["saves"] == crash_after:
            raise KeyboardInterrupt  # the task dies right after a checkpoint

    return TaskContext(device="cpu", checkpoint_every=every, load=lambda: store.get("saved"),
                       save=save)  # fmt: skip


def test_run_resumable_resumes_with_the_records_and_rows_of_an_uninterrupted_run():
    def run(store, crash_after=None):
        trainer, _, _ = least_squares_gd(lr=0.01)
        rows = []
        w0 = lambda: float(trainer.model.weight[0, 0].detach())  # noqa: E731
        before = lambda k: rows.append({"before": k, "w0": w0()})  # noqa: E731
        after = lambda record: rows.append({"after": record["step"], "w0": w0()})  # noqa: E731
        ctx = _context(store, 3, crash_after)
        run_resumable(trainer, 7, ctx, before_step=before, after_step=after, rows=rows)
        return trainer.records, rows

    full = run({})
    store = {}
    with pytest.raises(KeyboardInterrupt):
        run(store, crash_after=1)
    assert store["saved"][0]["step_count"] == 3 and len(store["saved"][1]) == 6
    assert run(store) == full and len(full[0]) == 7
    order = [(k, tag) for k in range(7) for tag in ("before", "after")]
    assert [(r.get("before", r.get("after")), next(iter(r))) for r in full[1]] == order
    # after_step sees θ(k+1): the next before_step measures the same parameters
    assert all(a["w0"] == b["w0"] for a, b in zip(full[1][1::2], full[1][2::2], strict=False))
