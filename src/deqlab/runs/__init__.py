"""Run store (run directories + SQLite index, atomic writes, resume) and sweep executors."""

from deqlab.runs.executors import LocalExecutor, RayExecutor, make_executor
from deqlab.runs.run import Run
from deqlab.runs.rundir import RunDir, RunStoreError
from deqlab.runs.runner import reproduce
from deqlab.runs.store import RunStore
from deqlab.runs.tables import read_rows_csv

__all__ = [
    "LocalExecutor",
    "RayExecutor",
    "Run",
    "RunDir",
    "RunStore",
    "RunStoreError",
    "make_executor",
    "read_rows_csv",
    "reproduce",
]
