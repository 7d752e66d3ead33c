"""Attach sessions run for a monitor: one window for given processes, or every CUDA process kept
attached window after window within a budget, off the caller's thread; the latest window's outcome
kept for the live collector (``collect/attached.py`` merges it into each snapshot).

    attacher = Attacher(policy=AttachPolicy(window_s=5.0)).start()   # every CUDA process
    attacher.latest()     # -> AttachOutcome: the last window's result, or why there is none
    attacher.stop()       # detached

    outcome = Attacher([pid]).run_once(seconds=5.0)   # one window, in the caller's thread
    attacher = Attacher([pid]).start_once(5.0)         # one window on a thread; latest() when it ends

The budget (``AttachPolicy``): at most ``max_processes`` processes (the lowest pids; the outcome says
how many were left out), the session's event budget (``Budget``: above it the probes are sampled), one
outcome kept. Between windows the probes stay in place (``AttachSession.run_window``); when the set of
CUDA processes changes (one started, one ended) the session is detached and a new one attached at the
end of the window. Where nothing can be attached the outcome says why: a fatal reason (not root, no
uprobes, a locked-down kernel) is tried again after ``retry_s``, a passing one (no CUDA process yet)
after a window.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..limits import MAX_ATTACH_EVERY
from ..units import printable
from .results import AttachOutcome
from .session import AttachError, AttachSession, Budget, SignalReceived
from .targets import cuda_pids

ERROR_CHARS = 300
NO_TARGETS = "no process that maps libcuda to attach to"


@dataclass(frozen=True)
class AttachPolicy:
    window_s: float = 5.0
    max_processes: int = MAX_ATTACH_EVERY
    budget: Budget = field(default_factory=Budget)
    retry_s: float = 60.0         # after a fatal reason
    proc_root: str = "/proc"


class Attacher:
    """Attaches ``pids`` (None: every process that maps libcuda, up to the budget's count)."""

    def __init__(self, pids: list[int] | None = None, policy: AttachPolicy = AttachPolicy(),
                 session_factory: Callable[..., AttachSession] = AttachSession,
                 clock: Callable[[], float] = time.monotonic, **session_kwargs: Any) -> None:
        self.pids = None if pids is None else list(dict.fromkeys(pids))
        self.policy = policy
        self._factory = session_factory
        self._session_kwargs = session_kwargs
        self.clock = clock
        self._latest: AttachOutcome | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Set while a session's probes are enabled in the targets (a view may say "attached").
        self.attached = threading.Event()

    # --- what a window attaches to ---------------------------------------------------------------

    def targets(self) -> tuple[list[int], tuple[str, ...]]:
        """The pids to attach now and the attacher's notices (processes left out by the budget)."""
        if self.pids is not None:
            return list(self.pids), ()
        pids = cuda_pids(self.policy.proc_root)
        cap = self.policy.max_processes
        if len(pids) <= cap:
            return pids, ()
        return pids[:cap], (f"attached to {cap} of {len(pids)} CUDA processes (the lowest pids): the"
                            f" others' copies are not counted",)

    def _session(self, pids: list[int]) -> AttachSession:
        kwargs = dict(self._session_kwargs)
        kwargs.setdefault("proc_root", self.policy.proc_root)
        return self._factory(pids, budget=self.policy.budget, **kwargs)

    def _failed(self, e: BaseException, fatal: bool = False) -> AttachOutcome:
        return AttachOutcome(None, printable(str(e) or type(e).__name__, ERROR_CHARS), self.clock(), fatal=fatal)

    # --- one window, in the caller's thread ------------------------------------------------------

    def run_once(self, seconds: float | None = None, stop: threading.Event | None = None) -> AttachOutcome:
        """Attach, count for ``seconds`` (the policy's window by default) or until ``stop``, detach.
        Ctrl-C or SIGTERM/SIGHUP during the window end it early: the outcome holds what was counted
        (``interrupted``)."""
        seconds = self.policy.window_s if seconds is None else seconds
        pids, notes = self.targets()
        if not pids:
            return AttachOutcome(None, NO_TARGETS, self.clock())
        session = self._session(pids)
        try:
            session.attach()
        except AttachError as e:
            return self._failed(e, e.fatal)
        interrupted = False
        self.attached.set()
        try:
            try:
                result = session.run(seconds, stop)
            except (KeyboardInterrupt, SignalReceived):
                interrupted = True
                result = session.finish()
        finally:
            session.detach()
            self.attached.clear()
        outcome = AttachOutcome(result, None, self.clock(), interrupted=interrupted, detach_s=session.detach_s,
                                notices=notes)
        self._publish(outcome)
        return outcome

    # --- window after window, on a thread of its own -----------------------------------------------

    def start(self) -> Attacher:
        """Window after window on a thread of its own, until ``stop``."""
        return self._start(self._run)

    def start_once(self, seconds: float | None = None) -> Attacher:
        """One window on a thread of its own (an app attaching a process it was asked to look at);
        ``latest()`` holds its outcome once it ends, ``stop`` ends it early."""
        return self._start(lambda: self.run_once(seconds, self._stop))

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _start(self, target: Callable[[], object]) -> Attacher:
        self._stop.clear()
        self._thread = threading.Thread(target=target, name="pinmon-attach", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """End the window now and detach (the thread's session is removed before this returns)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def latest(self) -> AttachOutcome | None:
        with self._lock:
            return self._latest

    def _publish(self, outcome: AttachOutcome) -> None:
        with self._lock:
            self._latest = outcome

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                wait = self._attached_windows()
            except Exception as e:  # a bug or a vanished file: say it, try again after a window
                self._publish(self._failed(e))
                wait = self.policy.window_s
            if wait:
                self._stop.wait(wait)

    def _attached_windows(self) -> float:
        """Attach, publish a window's outcome after each window until the targets change or ``stop``,
        detach; the seconds to wait before the next try (0 for at once)."""
        pids, notes = self.targets()
        if not pids:
            self._publish(AttachOutcome(None, NO_TARGETS, self.clock()))
            return self.policy.window_s
        session = self._session(pids)
        try:
            session.attach()
        except AttachError as e:
            self._publish(self._failed(e, e.fatal))
            return self.policy.retry_s if e.fatal else self.policy.window_s
        self.attached.set()
        try:
            while not self._stop.is_set():
                result = session.run_window(self.policy.window_s, self._stop)
                now_pids, notes_now = self.targets()
                self._publish(AttachOutcome(result, None, self.clock(), notices=notes))
                if sorted(now_pids) != sorted(pids):
                    break
                notes = notes_now
        finally:
            session.detach()
            self.attached.clear()
        return 0.0
