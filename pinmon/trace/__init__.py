"""pinmon's in-process tracer for CuPy and PyTorch programs.

``import pinmon.trace; pinmon.trace.install()`` (idempotent) wraps CuPy's and PyTorch's pinned
memory and host<->device copy functions as soon as the program imports them (installing imports
neither), and starts a daemon thread that writes this process's figures every 0.5 s to
``<runtime dir>/<pid>.json`` (see ``report_file.py``), where ``pinmon`` picks them up and shows the
process as "traced". ``pinmon trace -- CMD`` and ``python -P -m pinmon.trace prog.py args...`` run a
program with the tracer started at its first import of a CUDA library (``start_on_cuda_import``):
a Python process that never imports one is left untouched. The report thread is ended before a
fork and started again after it, so the tracer never makes a process fork with threads of its own.

Engines (``PINMON_TRACE_ENGINE`` or ``install(engine=...)``): ``hooks`` is the CuPy/PyTorch wrappers
alone; ``cupti`` and ``auto`` (the default) also arm CUPTI (``engine_cupti.py``) when the program
first imports a CUDA library, and fall back to the hooks alone, with a notice in the report, when
CUPTI cannot run. The hooks stay installed beside CUPTI for the Python call sites; ``merge.py`` makes
one report of both.
"""
from __future__ import annotations

import itertools
import os
import sys


def _python_m_cwd_entry() -> str | None:
    """Under ``python -m pinmon.trace``, Python put the working directory first on ``sys.path``; take
    it off before this package imports anything (``threading``, ``json``...), so that a module there
    cannot stand in for one of them. Returns the entry taken off, else None."""
    if sys.argv[:1] != ["-m"]:  # what it is while python -m locates its module
        return None
    argv = getattr(sys, "orig_argv", None) or []
    if not any(a == "-m" and b in ("pinmon.trace", "pinmon.trace.__main__") for a, b in itertools.pairwise(argv)):
        return None
    if sys.path and sys.path[0] in ("", os.getcwd()):
        return sys.path.pop(0)
    return None


PYTHON_M_CWD_ENTRY = _python_m_cwd_entry()

import atexit  # noqa: E402  (after the working directory left sys.path, on purpose)
import threading  # noqa: E402
from collections.abc import Callable, Mapping  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

from .report_file import ReportWriter  # noqa: E402
from .state import TracerState, get_state  # noqa: E402

if TYPE_CHECKING:  # imported when CUPTI is armed, not with the package
    from .engine_cupti import CuptiEngine
    from .importhook import OnImport

__all__ = ["ENGINES", "engine", "install", "installed", "writer"]

ENGINES = ("auto", "cupti", "hooks")
_lock = threading.Lock()
_writer: ReportWriter | None = None
_engine: CuptiEngine | None = None  # when the engine is not "hooks"


def installed() -> bool:
    return _writer is not None


def writer() -> ReportWriter | None:
    return _writer


def engine() -> CuptiEngine | None:
    """The CUPTI engine of this process (None with the hooks engine)."""
    return _engine


def engine_mode(value: str | None = None) -> str:
    """``value``, else $PINMON_TRACE_ENGINE, as one of ENGINES ("auto" for anything else)."""
    v = (value if value is not None else os.environ.get("PINMON_TRACE_ENGINE", "")).strip().lower()
    return v if v in ENGINES else "auto"


def start_on_cuda_import() -> None:
    """Install the tracer when the program first imports a CUDA library (``CUDA_MODULES`` of
    ``engine_cupti``), not before: a program that never does stays untouched (``python -m pinmon.trace``;
    ``pinmon trace``'s bootstrap does the same without importing pinmon first)."""
    from .engine_cupti import CUDA_MODULES
    from .importhook import when_imported

    for name in CUDA_MODULES:
        when_imported(name, lambda _module: install())


def bad_engine_env(environ: Mapping[str, str] | None = None) -> str | None:
    """One line when $PINMON_TRACE_ENGINE is set to something that is no engine, else None. The
    traced process takes such a value as "auto" (it must not fail); the commands refuse it."""
    value = (os.environ if environ is None else environ).get("PINMON_TRACE_ENGINE")
    if value is None or not value.strip() or value.strip().lower() in ENGINES:
        return None
    from ..units import printable

    return f"PINMON_TRACE_ENGINE={printable(value, 40)} is not an engine ({', '.join(ENGINES)})"


def install(directory: str | None = None, interval_s: float | None = None,
            engine: str | None = None) -> bool:
    """Install the hooks, the CUPTI engine (unless ``engine`` is "hooks") and the report thread once
    per process; True when tracing is on."""
    global _writer, _engine
    with _lock:
        if _writer is not None:
            return True
        try:
            state = get_state()
            from . import hooks_cupy, hooks_torch
            from .importhook import when_imported

            when_imported("cupy", lambda m: hooks_cupy.hook(m, state))
            when_imported("torch", lambda m: hooks_torch.hook(m, state))
            mode = engine_mode(engine)
            if mode != "hooks":
                _engine = _start_cupti(mode, when_imported)
            directory = directory or os.environ.get("PINMON_TRACE_DIR") or None
            if interval_s is None:
                interval_s = _env_interval()
            _writer = ReportWriter(_builder(state), directory=directory, interval_s=interval_s)
            _writer.write_once()
            _writer.start()
            if _engine is not None:
                # atexit runs last-registered first: CUPTI's last records land before the final report.
                atexit.register(_engine.close)
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                                    after_in_child=_after_fork)
            return True
        except Exception:
            return False


def _start_cupti(mode: str, when_imported: Callable[[str, OnImport], None]) -> CuptiEngine | None:
    """A CuptiEngine armed on the first import of a CUDA library; None if even that fails."""
    try:
        from .engine_cupti import CUDA_MODULES, CuptiEngine, announce, watch_profilers

        eng = CuptiEngine()

        def arm(_module: object) -> None:
            if eng.state != "idle":
                return
            if eng.arm():
                if mode == "auto":
                    announce(f"engine cupti (cupti-python {eng.version or '?'}), pid {os.getpid()}", "cupti")
            else:
                announce(f"engine hooks, pid {os.getpid()}: {eng.notice}", "hooks")

        watch_profilers(eng, when_imported)
        for name in CUDA_MODULES:
            when_imported(name, arm)
        return eng
    except Exception:
        return None


def _builder(state: TracerState) -> Callable[[], dict]:
    """The report body: the hooks' figures merged with CUPTI's (flushed first)."""
    from .merge import merged

    def build() -> dict:
        eng = _engine
        if eng is None:
            return merged(state.report(), None)
        eng.flush()
        cupti = eng.report()
        notice = eng.notice
        if notice is None and eng.state == "paused":
            notice = f"CUPTI paused while {eng.paused_by} runs"
        return merged(state.report(), cupti, eng.state, notice)
    return build


def _env_interval() -> float:
    from .report_file import INTERVAL_S

    try:
        v = float(os.environ.get("PINMON_TRACE_INTERVAL", INTERVAL_S))
        return v if v > 0 else INTERVAL_S
    except ValueError:
        return INTERVAL_S


def _before_fork() -> None:
    """The process forks with no thread of the tracer's (see ``ReportWriter.pause``)."""
    w = _writer
    if w is not None:
        try:
            w.pause()
        except Exception:
            pass


def _after_fork_in_parent() -> None:
    w = _writer
    if w is not None:
        try:
            w.resume()
        except Exception:
            pass


def _after_fork() -> None:
    """A forked child (a DataLoader worker) is its own process: fresh figures, its own report."""
    global _writer
    try:
        old = _writer
        state = get_state()
        state.reset()
        if _engine is not None:
            _engine.after_fork()
        _writer = ReportWriter(_builder(state), directory=old.directory if old else None,
                               interval_s=old.interval_s if old else _env_interval())
        _writer.start()
    except Exception:
        pass
