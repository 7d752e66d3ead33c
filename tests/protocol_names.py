"""What a typing Protocol lists, for the tests that check a library (or its stand-in) has it: mypy
trusts the Protocols that type an untyped library, so a name they list that the library lacks would
only fail where the library runs."""
from __future__ import annotations

import inspect
import re
from collections.abc import Callable

SPECIAL = ("__call__", "__enter__", "__exit__", "__iter__", "__int__")


def members(protocol: type) -> list[str]:
    """The names a Protocol class lists: its methods, properties and attributes."""
    names = set(getattr(protocol, "__annotations__", {}))
    for name, value in vars(protocol).items():
        if (callable(value) or isinstance(value, property)) and (
                not name.startswith("_") or name in SPECIAL or (name.startswith("_") and not name.startswith("__"))):
            names.add(name)
    return sorted(names)


def missing(pairs: list[tuple[type, object]]) -> list[str]:
    """``Protocol.name`` for every name a Protocol lists that its object lacks."""
    return [f"{protocol.__name__}.{name}" for protocol, obj in pairs
            for name in members(protocol) if not hasattr(obj, name)]


def methods(protocol: type) -> dict[str, list[str]]:
    """{method: its parameter names, self left out} of a Protocol's plain methods."""
    out = {}
    for name, value in vars(protocol).items():
        if inspect.isfunction(value) and not name.startswith("__"):
            out[name] = list(inspect.signature(value).parameters)[1:]
    return out


def parameter_names(fn: Callable) -> list[str] | None:
    """A (compiled) function's parameter names: from its signature, else from the first line of its
    docstring, as Cython writes it (``name(int length, dev)``, ``name(kind: int)``); None if neither says."""
    try:
        return [p for p in inspect.signature(fn).parameters if p not in ("args", "kwargs")]
    except (TypeError, ValueError):
        pass
    m = re.match(r"\s*\w+\((.*?)\)", (fn.__doc__ or "").splitlines()[0] if fn.__doc__ else "")
    if m is None:
        return None
    params = [p.split(":")[0].split("=")[0].strip() for p in m.group(1).split(",") if p.strip()]
    return [p.split()[-1] for p in params if p not in ("*", "/")]
