"""Cheap call-site capture for the tracer: the first frame outside CuPy, PyTorch and pinmon itself.

Only allocations and slow (pageable or write-combined) copies ask for a call site; a fast pinned
copy never walks the stack. The walk follows ``f_back`` pointers from ``sys._getframe`` (no
``inspect``, no source lines read). Each code file name is classified once (library or program)
and a program file's ``file:line`` strings are built once per line, so a repeated call site costs
a few dictionary lookups and no string formatting.
"""
from __future__ import annotations

import os
import sys
from types import FrameType

_PINMON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# "<frozen runpy>" and friends are the interpreter's own frames (python -m, runpy).
_skip: tuple[str, ...] = (_PINMON_DIR, "<frozen ")
MAX_FILES = 10000  # bounded: a program that generates code forever must not grow the caches
MAX_LINES = 1000   # per file


class _File:
    """A program (not library) source file: its display name and its ``file:line`` strings."""

    __slots__ = ("lines", "name")

    def __init__(self, name: str):
        self.name = name
        self.lines: dict[int | None, str] = {}


_LIBRARY = _File("")  # the marker for a file whose frames are skipped
# co_filename -> _File or _LIBRARY. Rebound (not cleared) when a package is added to the skip list,
# so a walk in another thread keeps a consistent table.
_files: dict[str, _File] = {}


def skip_package(module: object) -> None:
    """Treat frames in ``module``'s package directory as library frames (e.g. cupy, torch)."""
    global _skip, _files
    filename = getattr(module, "__file__", None)  # None: a namespace package, a stand-in
    if not isinstance(filename, str):
        return
    path = os.path.dirname(os.path.abspath(filename)) + os.sep
    if path not in _skip:
        _skip = _skip + (path,)
        _files = {}  # earlier verdicts may name a file of this package a program file


def _display(filename: str) -> str:
    """``filename`` relative to the working directory when it lies below it."""
    try:
        rel = os.path.relpath(filename)
        if not rel.startswith(".." + os.sep):
            return rel
    except ValueError:
        pass
    return filename


def _classify(filename: str) -> _File:
    files = _files
    info = _LIBRARY if filename.startswith(_skip) else _File(_display(filename))
    if len(files) < MAX_FILES:
        files[filename] = info
    return info


def call_site(depth: int = 2) -> str | None:
    """``file:line`` of the nearest caller outside the skipped packages, or None."""
    try:
        f: FrameType | None = sys._getframe(depth)
    except (ValueError, AttributeError):
        return None
    files = _files
    while f is not None:
        filename = f.f_code.co_filename
        info = files.get(filename)
        if info is None:
            info = _classify(filename)
        if info is not _LIBRARY:
            return _line(info, f.f_lineno)
        f = f.f_back
    return None


def _line(info: _File, lineno: int | None) -> str:
    site = info.lines.get(lineno)
    if site is None:
        site = f"{info.name}:{lineno}"
        if len(info.lines) < MAX_LINES:
            info.lines[lineno] = site
    return site
