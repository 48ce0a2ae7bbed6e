"""What ``deqlab show`` and ``deqlab list`` say about an experiment before it runs.

:func:`describe_experiment` gathers, as plain JSON values: the config fields (type,
default, the preset's value), the data sets the preset reads and whether each is on this
machine, the metric columns and their meanings, the paper setting and the deviations
from it, and an estimated run time (from earlier finished runs in a run store, else a
generic statement per preset, said to be generic).
"""

from __future__ import annotations

import os
import statistics
from typing import Any

from deqlab._format import format_seconds
from deqlab.experiments.base import Experiment
from deqlab.experiments.config import config_hash, describe_fields
from deqlab.experiments.deviations import one_line

#: Run time of a preset when no earlier run says better (the presets' contract).
GENERIC_RUN_TIME = {
    "tiny": "seconds",
    "quick": "minutes on 2 CPU cores",
    "paper": "hours; a GPU is advised",
}


def dataset_status(
    name: str, data_dir: str | os.PathLike[str] | None = None, cache: dict | None = None
) -> dict[str, Any]:
    """Whether data set ``name`` is on this machine, from :func:`deqlab.data.check_split`.

    ``present``: every split of it can be read (``sphere`` is generated and ``digits``
    ships with scikit-learn: both always present); ``status``: ``generated``, ``present``
    or the worst split's (``corrupt``, ``incomplete``, ``missing``); ``splits``: each
    split's catalog entry; ``location``; ``fetch``: the command that fetches (resumes,
    replaces) it, ``None`` when present. ``cache`` (a dict) avoids checking a name twice.
    """
    if cache is not None and name in cache:
        return cache[name]
    from deqlab.data import DATASETS, check_split, dataset_splits
    from deqlab.data.registry import MANUAL_DATASETS

    if name in MANUAL_DATASETS:
        status = _manual_status(name, data_dir)
    elif name not in DATASETS:
        status: dict[str, Any] = {
            "name": name, "present": False, "status": "unknown", "splits": {},
            "location": None, "fetch": None,
            "detail": f"not a data set of deqlab ({', '.join(DATASETS)})",
        }  # fmt: skip
    else:
        splits = (None,) if name == "sphere" else dataset_splits(name)
        entries = [check_split(name, split or "train", data_dir) for split in splits]
        bad = [e for e in entries if e.status not in ("present", "generated")]
        worst = next(
            (s for s in ("corrupt", "incomplete", "missing") if any(e.status == s for e in bad)),
            entries[0].status,
        )
        status = {
            "name": name,
            "present": not bad,
            "status": worst,
            "splits": {e.split or "-": e.as_dict() for e in entries},
            "location": next((e.location for e in entries if e.location), None),
            "fetch": bad[0].fetch if bad else None,
            "detail": "; ".join(e.detail for e in entries if e.detail) or None,
        }
    if cache is not None:
        cache[name] = status
    return status


def _manual_status(name: str, data_dir: str | os.PathLike[str] | None) -> dict[str, Any]:
    """:func:`dataset_status` of a data set deqlab cannot download (``fetch`` is None)."""
    from deqlab.data import DatasetNotFoundError
    from deqlab.data.registry import MANUAL_DATASETS, locate_manual

    entry = MANUAL_DATASETS[name]
    try:
        location, present = str(locate_manual(name, data_dir)), True
    except DatasetNotFoundError:
        location, present = None, False
    return {
        "name": name, "present": present, "status": "present" if present else "missing",
        "splits": {}, "location": location, "fetch": None,
        "detail": f"not downloadable: get {entry.source}; expected {name}/ holding {entry.layout}; "
        f"{entry.needs}",
    }  # fmt: skip


def preset_datasets(
    experiment: Experiment,
    data_dir: str | os.PathLike[str] | None = None,
    cache: dict | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """For each preset, the data sets it reads with their :func:`dataset_status`."""
    out = {}
    for preset in experiment.presets:
        try:
            names = experiment.datasets(experiment.resolve(preset))
        except (ValueError, TypeError) as err:  # a broken preset is reported, not fatal
            out[preset] = [{"name": "?", "present": False, "note": f"preset invalid: {err}"}]
            continue
        out[preset] = [dataset_status(n, data_dir, cache) for n in names]
    return out


def finished_runs(out: str | os.PathLike[str] | None, experiment: str) -> list[dict[str, Any]]:
    """The finished runs of ``experiment`` in the run store ``out`` (none if it has no index)."""
    from deqlab.runs.rundir import RunStoreError
    from deqlab.runs.store import RunStore

    if out is None:
        return []
    try:
        rows = RunStore.open_existing(out).runs()
    except RunStoreError:  # no index, or an unreadable one: nothing to time the estimate
        return []
    return [
        r
        for r in rows
        if r["experiment"] == experiment and r["status"] == "finished" and r["wall_s"] is not None
    ]


def estimate_run_time(
    experiment: str,
    preset: str,
    digest: str | None = None,
    out: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """An estimated wall time for ``experiment`` at ``preset``, and where it comes from.

    ``source``: ``"this config"`` (a finished run of this very config in ``out``: it would
    be reused), ``"earlier runs"`` (the median of the finished runs of this preset in
    ``out``, whatever their overrides) or ``"generic"`` (:data:`GENERIC_RUN_TIME`).
    """
    runs = finished_runs(out, experiment)
    exact = [r for r in runs if digest is not None and r["config_hash"] == digest]
    same = [r for r in runs if r["preset"] == preset]
    if exact:
        r = exact[0]
        return {
            "source": "this config",
            "seconds": r["wall_s"],
            "runs": 1,
            "text": f"{format_seconds(r['wall_s'])}: this config already finished in {out} "
            f"on {r['device']} (run {r['config_hash']}); `reproduce` reuses it "
            "(--force recomputes it)",
        }
    if same:
        walls = [r["wall_s"] for r in same]
        median = statistics.median(walls)
        devices = ", ".join(sorted({r["device"] for r in same}))
        spread = (
            f", {format_seconds(min(walls))} to {format_seconds(max(walls))}"
            if len(walls) > 1
            else ""
        )
        return {
            "source": "earlier runs",
            "seconds": median,
            "runs": len(walls),
            "text": f"about {format_seconds(median)} (median of {len(walls)} finished "
            f"run(s) of the {preset!r} preset in {out} on {devices}{spread})",
        }
    generic = GENERIC_RUN_TIME.get(preset, "unknown (not a standard preset)")
    where = f" in {out}" if out is not None else ""
    return {
        "source": "generic",
        "seconds": None,
        "runs": 0,
        "text": f"{generic} (a generic estimate for the {preset!r} preset: no finished run "
        f"of it{where} to time; `--measure 30` times it here)",
    }


def _run_time(
    experiment: Experiment,
    preset: str,
    config: Any,
    digest: str,
    out: str | os.PathLike[str] | None,
    measure: float | None,
    startup_s: float | None,
) -> dict[str, Any]:
    """The estimate from earlier runs, or with ``measure`` seconds one timed now."""
    estimate = estimate_run_time(experiment.name, preset, digest, out)
    if measure is None or estimate["source"] == "this config":
        return estimate
    from deqlab.runs.costs import measure_run_time

    return measure_run_time(experiment, config, measure, startup_s=startup_s)


def describe_experiment(
    experiment: Experiment,
    preset: str,
    *,
    config: Any = None,
    out: str | os.PathLike[str] | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    measure: float | None = None,
    startup_s: float | None = None,
) -> dict[str, Any]:
    """Everything ``deqlab show NAME --preset P`` prints, as JSON values.

    ``config``: the resolved config (default: the preset's); ``out``: a run store whose
    finished runs time the estimate; ``measure``: seconds to spend timing the preset's
    first steps here (:func:`deqlab.runs.costs.measure_run_time`), unless this very config
    has finished in ``out``; ``startup_s``: this process's start-up when it is the
    ``deqlab`` command (a ``reproduce`` pays the same before its first task).
    """
    if config is None:
        config = experiment.resolve(preset)
    digest = config_hash(experiment.name, config, device="cpu")
    datasets = [dataset_status(n, data_dir) for n in experiment.datasets(config)]
    deviations = experiment.deviations(config)
    return {
        "name": experiment.name,
        "title": experiment.title,
        "paper": experiment.citation,
        "preset": preset,
        "presets": list(experiment.presets),
        "config_hash_cpu": digest,
        "config": describe_fields(experiment.Config, config),
        "datasets": datasets,
        "metric_columns": dict(experiment.metric_columns),
        "figures": dict(experiment.figure_captions),
        "paper_setting": {
            key: {
                "role": v.role,
                "value": list(v.value) if isinstance(v.value, tuple) else v.value,
                "where": v.where,
                "substitute": v.substitute,
            }
            for key, v in experiment.paper_setting.items()
        },
        "deviations": [d.as_dict() for d in deviations],
        "deviations_sentence": one_line(deviations),
        "run_time": _run_time(experiment, preset, config, digest, out, measure, startup_s),
        "command": f"deqlab reproduce {experiment.name} --preset {preset}",
    }
