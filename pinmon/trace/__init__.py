"""pinmon's in-process tracer for CuPy and PyTorch programs.

``import pinmon.trace; pinmon.trace.install()`` (idempotent) wraps CuPy's and PyTorch's pinned
memory and host<->device copy functions as soon as the program imports them (installing imports
neither), and starts a daemon thread that writes this process's figures every 0.5 s to
``<runtime dir>/<pid>.json`` (see ``report.py``), where ``pinmon`` picks them up and shows the
process as "traced". ``python -m pinmon.trace prog.py args...`` and ``pinmon trace -- CMD`` run a
program with the tracer installed.
"""
from __future__ import annotations

import os
import threading
from typing import Optional

from .report import ReportWriter
from .state import get_state

__all__ = ["install", "installed", "writer"]

_lock = threading.Lock()
_writer: Optional[ReportWriter] = None


def installed() -> bool:
    return _writer is not None


def writer() -> Optional[ReportWriter]:
    return _writer


def install(directory: Optional[str] = None, interval_s: Optional[float] = None) -> bool:
    """Install the hooks and the report thread once per process; True when tracing is on."""
    global _writer
    with _lock:
        if _writer is not None:
            return True
        try:
            state = get_state()
            from . import hooks_cupy, hooks_torch
            from .importhook import when_imported

            when_imported("cupy", lambda m: hooks_cupy.hook(m, state))
            when_imported("torch", lambda m: hooks_torch.hook(m, state))
            directory = directory or os.environ.get("PINMON_TRACE_DIR") or None
            if interval_s is None:
                interval_s = _env_interval()
            _writer = ReportWriter(state.report, directory=directory, interval_s=interval_s)
            _writer.write_once()
            _writer.start()
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=_after_fork)
            return True
        except Exception:
            return False


def _env_interval() -> float:
    from .report import INTERVAL_S

    try:
        v = float(os.environ.get("PINMON_TRACE_INTERVAL", INTERVAL_S))
        return v if v > 0 else INTERVAL_S
    except ValueError:
        return INTERVAL_S


def _after_fork() -> None:
    """A forked child (a DataLoader worker) is its own process: fresh figures, its own report."""
    global _writer
    try:
        old = _writer
        state = get_state()
        state.__init__(clock=state.clock)  # hooks keep this object: reset it in place
        _writer = ReportWriter(state.report, directory=old.directory if old else None,
                               interval_s=old.interval_s if old else _env_interval())
        _writer.start()
    except Exception:
        pass
