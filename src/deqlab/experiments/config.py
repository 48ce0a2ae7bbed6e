"""Experiment configuration: a frozen dataclass resolved from preset, TOML file and overrides.

Resolution order (later wins): the dataclass defaults (the paper's settings), the preset's
values, a TOML file (flat keys, or a ``[config]`` table such as the ``config.toml`` saved in a
run directory), then ``--set key=value`` overrides. Every value is type-checked against the
field's annotation; an unknown key is an error that lists the valid keys (no option is
ever silently dropped). The overrides may also be a mapping (the Python API's
``overrides={"steps": 100}``): its values are checked the same way.

Supported field types: ``int``, ``float``, ``bool``, ``str``, ``tuple[T, ...]`` of those, and
``T | None`` (``none`` on the command line; omit the key in TOML).

What each field may hold beside its type is declared on the config class
(:mod:`deqlab.experiments.constraints`) and checked when the config is built. Every value
read is also checked for what its type alone requires (:func:`check_generic`), before any
run is created: an ``int`` fits in a signed 64-bit integer (torch's and numpy's C
``long``) and a ``float`` is finite. An error in a TOML file names the file as well as
the key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


class ConfigError(ValueError):
    """A configuration value or key is invalid; the message is one line, fit for a CLI.
    ``key``: the field it is about, when there is one."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class ConfigFile(dict):
    """The key/values of a TOML config file, with the ``path`` it was read from (so that
    an error in one of its values names the file)."""

    def __init__(self, path: Path, values: Mapping[str, object]) -> None:
        super().__init__(values)
        self.path = path


#: The range of a signed 64-bit integer (a C ``long`` in torch and numpy).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def check_generic(key: str, value: object) -> None:
    """The checks every config value gets (module docstring); raises :class:`ConfigError`."""
    if isinstance(value, tuple):
        for i, item in enumerate(value):
            check_generic(f"{key}[{i}]", item)
        return
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        raise ConfigError(
            f"`{key}` must fit in a signed 64-bit integer ({INT64_MIN} to {INT64_MAX}); got {value}"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"`{key}` must be a finite number; got {value!r}")


def field_types(config_cls: type) -> dict[str, Any]:
    """Map each field name of the dataclass ``config_cls`` to its resolved annotation."""
    if not (isinstance(config_cls, type) and dataclasses.is_dataclass(config_cls)):
        raise TypeError(f"`config_cls` must be a dataclass type; got {config_cls!r}")
    hints = typing.get_type_hints(config_cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(config_cls)}


def type_name(tp: Any) -> str:
    """A field annotation as the error messages and ``deqlab show`` write it."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in typing.get_args(tp))
    if origin is tuple:
        return f"tuple[{type_name(typing.get_args(tp)[0])}, ...]"
    return "None" if tp is type(None) else getattr(tp, "__name__", str(tp))


def coerce_value(key: str, value: object, tp: Any) -> object:
    """Return ``value`` converted to the field type ``tp``, or raise :class:`ConfigError`.

    Conversions are the lossless ones only: an int for a float field, a list for a tuple
    field. A bool is never accepted as a number, nor a float as an int.
    """
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce_value(key, value, arg)
            except ConfigError:
                continue
        raise ConfigError(f"`{key}` must be {type_name(tp)}; got {type(value).__name__} {value!r}")
    if origin is tuple:
        (elem,) = (a for a in typing.get_args(tp) if a is not Ellipsis)
        if not isinstance(value, list | tuple):
            value = [value]  # a single value is a one-element tuple
        return tuple(coerce_value(f"{key}[{i}]", v, elem) for i, v in enumerate(value))
    ok = (
        (tp is bool and isinstance(value, bool))
        or (tp is int and isinstance(value, int) and not isinstance(value, bool))
        or (tp is float and isinstance(value, int | float) and not isinstance(value, bool))
        or (tp is str and isinstance(value, str))
    )
    if not ok:
        raise ConfigError(f"`{key}` must be {type_name(tp)}; got {type(value).__name__} {value!r}")
    return float(value) if tp is float else value


def parse_override(text: str) -> tuple[str, object]:
    """Split ``key=value`` and parse the value as a TOML value, else keep it as a string.

    ``widths=[64,128]``, ``widths=64,128`` (a comma list), ``lr=0.5``, ``eta=none`` and
    ``dataset=sphere`` all work; the field type then decides whether the value is valid.
    """
    if not isinstance(text, str) or "=" not in text:
        raise ConfigError(f"override must look like key=value; got {text!r}")
    key, raw = (part.strip() for part in text.split("=", 1))
    if not key:
        raise ConfigError(f"override must look like key=value; got {text!r}")
    if raw.lower() in ("none", "null"):
        return key, None
    for candidate in (raw, f"[{raw}]"):
        try:
            return key, tomllib.loads(f"v = {candidate}")["v"]
        except tomllib.TOMLDecodeError:
            continue
    if "," in raw:
        return key, [parse_override(f"v={part}")[1] for part in raw.split(",")]
    return key, raw


def read_config_file(path: Path | str) -> ConfigFile:
    """Read the key/values of a TOML config file (flat, or under a ``[config]`` table)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {err}") from None
    if isinstance(data.get("config"), dict):
        return ConfigFile(path, data["config"])
    return ConfigFile(path, data)


def resolve_config(
    config_cls: type,
    *layers: Mapping[str, object],
    overrides: Sequence[str] = (),
) -> Any:
    """Build ``config_cls`` from defaults, then each mapping in ``layers``, then ``overrides``.

    Raises :class:`ConfigError` naming the offending key (and the valid keys if unknown),
    and the file when the key's value came from a :class:`ConfigFile` layer.
    """
    types_by_name = field_types(config_cls)
    values: dict[str, object] = {}
    origin: dict[str, Mapping[str, object]] = {}
    parsed = [dict([parse_override(o)]) for o in overrides]
    for layer in (*layers, *parsed):
        for key, value in layer.items():
            try:
                if key not in types_by_name:
                    valid = ", ".join(types_by_name)
                    raise ConfigError(f"unknown config key {key!r}; valid keys: {valid}", key=key)
                values[key] = coerce_value(key, value, types_by_name[key])
                check_generic(key, values[key])
            except ConfigError as err:
                raise _in_file(err, layer) from None
            origin[key] = layer
    try:
        return config_cls(**values)
    except (TypeError, ValueError) as err:  # the declared constraints (or __post_init__)
        key = getattr(err, "key", None) or _key_named(str(err))
        raise _in_file(ConfigError(str(err), key=key), origin.get(key or "", {})) from None


def _key_named(message: str) -> str | None:
    """The field a constraint message is about: its first `name` in backticks."""
    found = re.match(r"`([A-Za-z_]\w*)", message)
    return found.group(1) if found else None


def _in_file(err: ConfigError, layer: Mapping[str, object]) -> ConfigError:
    if not isinstance(layer, ConfigFile):
        return err
    return ConfigError(f"config file {str(layer.path)!r}: {err}", key=err.key)


def config_to_dict(config: Any) -> dict[str, object]:
    """The fields of a config dataclass as plain TOML/JSON values (tuples become lists)."""
    return {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in dataclasses.asdict(config).items()
    }


def describe_fields(config_cls: type, config: Any = None) -> list[dict[str, object]]:
    """Each field of ``config_cls``: ``name``, ``type`` (as ``--set`` checks it), ``default``
    and, with a resolved ``config``, its ``value`` there (JSON values: tuples as lists)."""
    types_by_name = field_types(config_cls)
    out = []
    for f in dataclasses.fields(config_cls):
        if f.default is not dataclasses.MISSING:
            default: object = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        entry = {"name": f.name, "type": type_name(types_by_name[f.name]), "default": default}
        if config is not None:
            entry["value"] = getattr(config, f.name)
        out.append({k: list(v) if isinstance(v, tuple) else v for k, v in entry.items()})
    return out


def config_hash(experiment: str, config: Any, *, device: str) -> str:
    """First 12 hex digits of the SHA-256 of the canonical JSON of (experiment, config, device).

    The device is part of a run's identity: CPU and CUDA round differently.
    """
    payload = {"experiment": experiment, "config": config_to_dict(config), "device": device}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]
