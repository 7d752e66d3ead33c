"""Writing report files: the directory made safe, each report written atomically, the writer thread.

The format and the directory rules that the reader shares (schema, names, where reports live, the
start-time field) are ``pinmon.report_format``'s. The directory is created 0700 and refused (no report
written) when it is a symlink, belongs to someone else or is open to others: another user must not be
able to plant or read reports. Files are 0600, written to a temporary file in the same directory and
renamed over the old one, so a reader sees a whole report or the previous one, never half of one.

``dir_problem`` says, in one line, why a directory cannot take reports (missing parent, a symlink,
another user's, open to others), so ``pinmon trace`` can warn before the program starts instead of
the tracer failing silently.
"""
from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from collections.abc import Callable

from ..report_format import (
    TRACE_SCHEMA,
    UnsafeDirError,
    check_dir,
    proc_start_ticks,
    report_name,
    runtime_dir,
    temp_name,
)

INTERVAL_S = 0.5


def ensure_dir(path: str) -> str:
    """Create ``path`` 0700 if missing; raise UnsafeDirError if it exists and is unsafe."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    check_dir(path)
    return path


def dir_problem(path: str, uid: int | None = None) -> str | None:
    """Why reports cannot be written to ``path`` (creating it 0700 when missing), or None when they can."""
    uid = os.getuid() if uid is None else uid
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        return f"cannot create {path}: {e.strerror or e}"
    try:
        check_dir(path, uid)
    except UnsafeDirError as e:
        hint = " (another user may have made it: remove it, or choose a directory with --dir)" \
            if "belongs to uid" in str(e) else ""
        return f"{e}{hint}"
    except OSError as e:
        return f"cannot use {path}: {e.strerror or e}"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{path} is not writable"
    return None


def warn_if_unusable(directory: str | None = None, prefix: str = "pinmon: trace") -> bool:
    """One warning line on stderr when reports could not be written to ``directory`` (default: the
    per-user runtime directory); True when it warned."""
    from ..units import printable

    problem = dir_problem(directory or runtime_dir())
    if problem is None:
        return False
    print(f"{prefix}: warning: no reports will be written: {printable(problem, 300)}", file=sys.stderr)
    return True


def write_report(directory: str, pid: int, payload: dict) -> str:
    """Atomically replace ``<directory>/<pid>.json`` with ``payload``; returns the path."""
    final = os.path.join(directory, report_name(pid))
    data = json.dumps(payload, separators=(",", ":")).encode()
    fd, tmp = _open_temp(directory, pid)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, final)  # a symlink at ``final`` is replaced, never followed
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return final


def _open_temp(directory: str, pid: int) -> tuple[int, str]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _attempt in range(100):
        tmp = os.path.join(directory, temp_name(pid, os.urandom(4).hex()))
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {directory}")


class ReportWriter:
    """Daemon thread: writes this process's report every ``interval_s`` and once more at exit; the
    thread is ended before a fork and started again after it (``pause``/``resume``)."""

    def __init__(self, build: Callable[[], dict], directory: str | None = None,
                 interval_s: float = INTERVAL_S):
        self.build = build
        self.directory = directory
        self.interval_s = interval_s
        self.pid = os.getpid()
        self.start_ticks = proc_start_ticks(self.pid)
        self.writes = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = False   # start() ran: the thread runs, or is paused across a fork
        self._stopped = False   # stop() ran: the final report is written, no thread again
        self._lock = threading.Lock()

    def payload(self, final: bool = False) -> dict:
        body = self.build()
        return {"schema": TRACE_SCHEMA, "pid": self.pid, "start_ticks": self.start_ticks,
                "uid": os.getuid(), "time": time.time(), "final": final,
                "argv": list(sys.argv[:20]), **body}

    def write_once(self, final: bool = False) -> bool:
        with self._lock:
            try:
                if os.getpid() != self.pid:  # a fork: the child is another process
                    return False
                directory = self.directory or runtime_dir()
                ensure_dir(directory)
                write_report(directory, self.pid, self.payload(final))
                self.writes += 1
                self.error = None
                return True
            except Exception as e:  # never let reporting disturb the program
                self.error = f"{type(e).__name__}: {e}"
                return False

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval_s):
            self.write_once()

    def start(self) -> None:
        if self._thread is not None or self._started:
            return
        self._started = True
        self._spawn()
        atexit.register(self.stop)

    def _spawn(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._stop,), name="pinmon-trace-report",
                                        daemon=True)
        self._thread.start()

    def pause(self) -> None:
        """Before a fork: end the thread, so that the process forks with no thread of the tracer's.
        Python 3.12 warns at a fork of a multi-threaded process (an error under ``-W error``), and a
        lock the thread held would stay held in the child. Waits for the OS thread to be gone, which
        is what that warning counts, at most ``PAUSE_WAIT_S``."""
        thread = self._thread
        if thread is None:
            return
        self._stop.set()
        thread.join(PAUSE_WAIT_S)
        if thread.is_alive():
            return  # busy past the bound (a write stuck in the file system): fork with it
        self._thread = None
        _wait_thread_gone(thread.native_id, PAUSE_WAIT_S)

    def resume(self) -> None:
        """After a fork, in the parent: the thread again (unless the writer has stopped for good)."""
        if self._thread is None and self._started and not self._stopped and os.getpid() == self.pid:
            self._spawn()

    def stop(self) -> None:
        self._stopped = True
        self._stop.set()
        self.write_once(final=True)


PAUSE_WAIT_S = 1.0


def _wait_thread_gone(native_id: int | None, timeout_s: float) -> None:
    """Until the kernel no longer lists thread ``native_id`` of this process (Linux), at most
    ``timeout_s``: a joined Python thread ends a few microseconds after ``join`` returns."""
    if not native_id:
        return
    task = f"/proc/self/task/{native_id}"
    deadline = time.monotonic() + timeout_s
    while os.path.exists(task) and time.monotonic() < deadline:
        time.sleep(0.0001)
