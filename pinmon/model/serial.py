"""Generic (de)serialisation of the snapshot's frozen dataclasses over their type hints.

``Serial`` gives a dataclass ``to_dict()`` (JSON-ready: a non-finite float becomes ``None``) and
``from_dict()``, which reads a document it cannot trust: unknown keys are ignored, and the first bad
value raises ``SchemaError`` with its path (a word outside its ``Literal`` set, numbers not finite or
below 0, byte figures over
``limits.MAX_SIZE_BYTES``, times outside 1970..9999, lists longer than ``pinmon.limits`` allows,
checked before their items are read).
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any

from ..limits import MAX_COUNT, MAX_EPOCH_S, MAX_GPUS, MAX_LIST_ITEMS, MAX_PROCESSES, MAX_SIZE_BYTES


class SchemaError(ValueError):
    """A dict does not match the snapshot schema; the message names the offending key."""


# --- generic (de)serialisation over dataclass type hints -------------------------------------

def to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN or Infinity
    return value


# Lists with their own cap (by field name); any other list holds at most MAX_LIST_ITEMS.
_MAX_ITEMS = {"gpus": (MAX_GPUS, "GPUs"), "processes": (MAX_PROCESSES, "processes")}


def _show(value: int | float) -> str:
    if isinstance(value, int) and value.bit_length() > 64:
        return f"a {value.bit_length()}-bit number"  # too long to print, or to turn into a float
    return f"{value:g}"


def _check_number(name: str, value: int | float, path: str) -> None:
    """Refuse a figure no collector can produce: not finite, negative, or beyond its range."""
    if isinstance(value, float) and not math.isfinite(value):
        raise SchemaError(f"{path}: {value} is not a finite number")
    if value < 0:
        raise SchemaError(f"{path}: must be 0 or more, got {_show(value)}")
    if name == "time" and value > MAX_EPOCH_S:
        raise SchemaError(f"{path}: {_show(value)} is not a time (after the year 9999)")
    if name.endswith(("_bytes", "_bytes_est")) and value > MAX_SIZE_BYTES:
        raise SchemaError(f"{path}: {_show(value)} bytes is more than any host holds (at most 1 EiB)")
    if isinstance(value, int) and value > MAX_COUNT:
        raise SchemaError(f"{path}: {_show(value)} is too large (at most {MAX_COUNT})")


def _check_length(name: str, value: list | tuple | dict, path: str) -> None:
    limit, what = _MAX_ITEMS.get(name, (MAX_LIST_ITEMS, "items"))
    if len(value) > limit:
        raise SchemaError(f"{path}: {len(value):,} {what}, more than the {limit:,} a snapshot may hold")


def convert(tp: Any, value: Any, path: str, name: str = "") -> Any:
    if tp is Any:
        return value  # free-form values (a finding's numbers) may hold null
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            if type(None) in args:
                return None
            raise SchemaError(f"{path}: null is not allowed")
        inner = [a for a in args if a is not type(None)]
        return convert(inner[0], value, path, name)
    if value is None:
        raise SchemaError(f"{path}: null is not allowed")
    if origin is typing.Literal:
        # A closed set of words (model/kinds.py): a word outside it is no value any writer makes.
        if isinstance(value, str) and value in args:
            return value
        shown = repr(value)[:60] if isinstance(value, str) else f"a {type(value).__name__}"
        raise SchemaError(f"{path}: {shown} is not one of {', '.join(repr(a) for a in args)}")
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):  # a class, never an instance, in type hints
        return from_dict_of(tp, value, path)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise SchemaError(f"{path}: expected a list, got {type(value).__name__}")
        _check_length(name, value, path)
        return tuple(convert(args[0], v, f"{path}[{i}]", name) for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise SchemaError(f"{path}: expected an object, got {type(value).__name__}")
        _check_length(name, value, path)
        return {str(k): convert(args[1], v, f"{path}.{k}", name) for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaError(f"{path}: expected a number, got {type(value).__name__}")
        if isinstance(value, int) and abs(value) > MAX_COUNT:
            raise SchemaError(f"{path}: {_show(value)} is too large")
        _check_number(name, float(value), path)
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise SchemaError(f"{path}: expected an integer, got {type(value).__name__}")
        _check_number(name, value, path)
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise SchemaError(f"{path}: expected true/false, got {type(value).__name__}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise SchemaError(f"{path}: expected a string, got {type(value).__name__}")
        return value
    raise SchemaError(f"{path}: unsupported type {tp!r}")  # pragma: no cover - model bug


_HINTS: dict[type, dict[str, Any]] = {}


def from_dict_of(cls: type, data: Any, path: str) -> Any:
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: expected an object, got {type(data).__name__}")
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = convert(hints[f.name], data[f.name], f"{path}.{f.name}", f.name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise SchemaError(f"{path}: missing key {f.name!r}")
    return cls(**kwargs)


class Serial:
    """Mixin: ``to_dict()`` and ``from_dict()`` for the frozen dataclasses below."""

    def to_dict(self) -> dict:
        return to_json(self)

    @classmethod
    def from_dict(cls, data: Any, path: str | None = None):
        return from_dict_of(cls, data, path or cls.__name__.lower())


def evolve(obj: Any, **changes: Any) -> Any:
    """A copy of a frozen dataclass instance with ``changes``: ``dataclasses.replace`` without running
    ``__init__`` again. ``replace`` of a record with many fields costs tens of microseconds against 1 us
    here, paid for every row of every snapshot; the changes are values the caller made,
    of the fields' own types, so nothing ``__init__`` does is skipped that matters."""
    fields = obj.__dataclass_fields__
    for name in changes:
        if name not in fields:
            raise TypeError(f"{type(obj).__name__} has no field {name!r}")
    values = obj.__dict__.copy()
    values.update(changes)
    new = object.__new__(type(obj))
    object.__setattr__(new, "__dict__", values)  # frozen: set through object, as dataclasses do
    return new
