"""A DEQ layer's settings as plain data: a dict or a TOML file, and back.

So that an experiment's DEQ settings live in one file (torchdeq builds its layer from an
``args`` namespace, and silently drops a mistyped key — its issue #12; here an unknown key is
an error naming it and the valid ones). The layout, as TOML::

    on_failure = "warn"          # warn | raise | record
    row_compaction = true
    eval_factor = 2.0            # eval mode: max_iter × eval_factor evaluations
    eval_max_iter = 0            # > 0: this many instead (0: from eval_factor)

    [solver]                     # name and the solver's own options
    name = "anderson"
    tol = 1e-3
    max_iter = 40

    [backward]                   # name and the backward's own options
    name = "phantom"
    steps = 5
    damping = 0.5

A missing ``[solver]`` / ``[backward]`` keeps the layer's default; a ``[solver]`` without
``name`` changes only the listed options of the default solver. ``[backward.solver]`` is the
adjoint solver of ``name = "implicit"``. :func:`deq_config` writes a layer's settings in
this layout (every option spelt out), and ``deq_options(deq_config(deq))`` rebuilds them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomllib

from deqlab.backward import Backward, Implicit, JacobianFree, Phantom, Shine, Unrolled
from deqlab.solvers import Solver, get_solver
from deqlab.solvers.solution import registered_name

if TYPE_CHECKING:
    from deqlab.implicit import DEQ

BACKWARDS: dict[str, type[Backward]] = {
    "implicit": Implicit,
    "phantom": Phantom,
    "jacobian_free": JacobianFree,
    "shine": Shine,
    "unrolled": Unrolled,
}
LAYER_KEYS = ("solver", "backward", "on_failure", "row_compaction", "eval_factor")
LAYER_KEYS += ("eval_max_iter",)


def deq_options(config: Mapping[str, Any] | str | os.PathLike, default: Solver) -> dict:
    """The keyword arguments of ``DEQ(cell, ...)`` that ``config`` (a mapping, or the path of
    a TOML file) describes; ``default``: the solver a ``[solver]`` without name amends.

    Raises:
        TypeError: ``config`` neither a mapping nor a path; a table that is not a table.
        ValueError: an unknown key, solver or backward (named, with the valid ones); a TOML
            file that does not parse (with the file's name).
    """
    table = _load(config)
    _check_keys("the DEQ config", table, LAYER_KEYS)
    options = {k: v for k, v in table.items() if k not in ("solver", "backward")}
    if options.get("eval_max_iter") == 0:
        options["eval_max_iter"] = None
    if "solver" in table:
        options["solver"] = _solver(table["solver"], default, "[solver]")
    if "backward" in table:
        options["backward"] = _backward(table["backward"], default)
    return options


def deq_config(deq: DEQ) -> dict[str, Any]:
    """A layer's settings in the layout of :func:`deq_options` (plain data: TOML-able)."""
    return {
        "on_failure": deq.on_failure.value,
        "row_compaction": deq.row_compaction,
        "eval_factor": deq.eval_factor,
        "eval_max_iter": deq.eval_max_iter or 0,
        "solver": _solver_table(deq.solver),
        "backward": _backward_table(deq.backward),
    }


def _load(config: object) -> dict[str, Any]:
    if isinstance(config, Mapping):
        return dict(config)
    if not isinstance(config, str | os.PathLike):
        raise TypeError(
            f"`config` must be a mapping or the path of a TOML file; got {type(config).__name__}"
        )
    path = Path(config)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: not valid TOML: {err}") from err


def _check_keys(where: str, table: Mapping[str, Any], valid: tuple[str, ...]) -> None:
    unknown = [k for k in table if k not in valid]
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(map(repr, unknown))} in {where}; valid: {', '.join(valid)}"
        )


def _table(value: object, where: str) -> dict[str, Any]:
    if isinstance(value, str):
        return {"name": value}
    if not isinstance(value, Mapping):
        raise TypeError(f"{where} must be a table (or a name); got {type(value).__name__}")
    return dict(value)


def _solver(value: object, default: Solver, where: str) -> Solver:
    table = _table(value, where)
    name = table.pop("name", None)
    if name is None:
        _check_keys(where, table, tuple(default.option_names()))
        return dataclasses.replace(default, **table)
    try:
        return get_solver(name, **table)
    except TypeError as err:  # an unknown option: a value error of the config
        raise ValueError(f"{where}: {err}") from err


def _backward(value: object, default: Solver) -> Backward:
    table = _table(value, "[backward]")
    name = table.pop("name", None)
    if name not in BACKWARDS:
        raise ValueError(
            f"[backward] needs a name, one of {', '.join(map(repr, BACKWARDS))}; got {name!r}"
        )
    cls = BACKWARDS[name]
    _check_keys(f"[backward] {name!r}", table, tuple(f.name for f in dataclasses.fields(cls)))
    if "solver" in table:
        table["solver"] = _solver(table["solver"], default, "[backward.solver]")
    return cls(**table)


def _solver_table(solver: Solver) -> dict[str, Any]:
    fields = {f.name: getattr(solver, f.name) for f in dataclasses.fields(solver)}
    return {"name": registered_name(solver), **{k: v for k, v in fields.items() if v is not None}}


def _backward_table(backward: Backward) -> dict[str, Any]:
    name = next(key for key, cls in BACKWARDS.items() if cls is type(backward))
    table: dict[str, Any] = {"name": name}
    for field in dataclasses.fields(backward):
        value = getattr(backward, field.name)
        if isinstance(value, Solver):
            table[field.name] = _solver_table(value)
        elif value is not None:
            table[field.name] = value
    return table
