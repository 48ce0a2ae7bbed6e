"""The data sets a run reads, checked before anything of the run is created: a run refused
here leaves nothing behind (:func:`deqlab.runs.runner.reproduce`)."""

from __future__ import annotations

from typing import Any

from deqlab.experiments.base import Experiment
from deqlab.experiments.config import ConfigError


class DataError(ConfigError):
    """A data set the run reads is missing, incomplete or corrupt (found before any task)."""


def check_datasets(experiment: Experiment, config: Any) -> None:
    """Raise :class:`DataError` (the reader's whole message: where it looked, how to fetch,
    or for a data set deqlab cannot download where to get it and what its runs need)
    unless every split of every data set ``config`` reads is on this machine and sound."""
    names = [n for n in experiment.datasets(config) if n != "sphere"]
    if not names:
        return
    from deqlab.data import DATASETS, DatasetNotFoundError, check_split, dataset_splits, locate
    from deqlab.data.registry import MANUAL_DATASETS, locate_manual

    for name in names:
        if name in MANUAL_DATASETS:
            try:
                locate_manual(name)
            except DatasetNotFoundError as err:
                raise DataError(str(err)) from None
        if name not in DATASETS:
            continue  # present, or the config's own validation names unknown data sets
        for split in dataset_splits(name):
            entry = check_split(name, split)
            if entry.status in ("present", "generated"):
                continue
            if entry.status == "missing":
                try:
                    locate(name, split)
                except DatasetNotFoundError as err:
                    raise DataError(str(err)) from None
            detail = f": {entry.detail}" if entry.detail else ""
            fetch = f". Fetch it with: {entry.fetch}" if entry.fetch else ""
            raise DataError(f"data set {name!r} ({split} split) is {entry.status}{detail}{fetch}")
