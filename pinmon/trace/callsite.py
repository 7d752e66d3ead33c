"""Cheap call-site capture for the tracer: the first frame outside CuPy, PyTorch and pinmon itself.

Only allocations and slow (pageable or write-combined) copies ask for a call site; a fast pinned
copy never walks the stack. The walk follows ``f_back`` pointers from ``sys._getframe`` (no
``inspect``, no source lines read), and file names are shortened once per code object.
"""
from __future__ import annotations

import os
import sys
from typing import Optional

_PINMON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# "<frozen runpy>" and friends are the interpreter's own frames (python -m, runpy).
_skip: tuple[str, ...] = (_PINMON_DIR, "<frozen ")
_names: dict = {}


def skip_package(module) -> None:
    """Treat frames in ``module``'s package directory as library frames (e.g. cupy, torch)."""
    global _skip
    try:
        path = os.path.dirname(os.path.abspath(module.__file__)) + os.sep
    except Exception:
        return
    if path not in _skip:
        _skip = _skip + (path,)


def _display(code) -> str:
    name = _names.get(code)
    if name is None:
        name = code.co_filename
        try:
            rel = os.path.relpath(name)
            if not rel.startswith(".." + os.sep):
                name = rel
        except ValueError:
            pass
        if len(_names) < 10000:  # bounded: a program that generates code forever must not grow it
            _names[code] = name
    return name


def call_site(depth: int = 2) -> Optional[str]:
    """``file:line`` of the nearest caller outside the skipped packages, or None."""
    try:
        f = sys._getframe(depth)
    except (ValueError, AttributeError):
        return None
    skip = _skip
    while f is not None and f.f_code.co_filename.startswith(skip):
        f = f.f_back
    if f is None:
        return None
    return f"{_display(f.f_code)}:{f.f_lineno}"
