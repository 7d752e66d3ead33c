"""The app's attach key, without Textual: one window on one process at a time, what the status line
says while it runs, and what the app says when it ends or cannot start.

The window runs on a thread of the app (``AttachRunner``, injected: ``cli/attaching.py`` attaches
through uprobes on the process's libcuda, a test's runner pretends). Its figures reach the process's
row the way every figure does: the live collector merges the window into its snapshots (source
``attached``), so a recording holds them too; here is only the key's own state. With ``--attach`` the
collector keeps every CUDA process attached already, and the key has nothing to add.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from ...limits import DEFAULT_ATTACH_WINDOW_S
from ...units import fmt_seconds, printable
from .note import Note

# A reason (it may quote a path another user named) is one line of this many characters at most.
REASON_CHARS = 200


class AttachEnd(NamedTuple):
    """How a window ended, as the runner tells the app: ``error`` None means the process was
    attached and its figures are in the snapshots from now on; else the one line that says why not."""

    pid: int
    error: str | None = None
    window_s: float | None = None     # the seconds it counted
    interrupted: bool = False            # stopped before its time (pinmon quitting)


# (pid, seconds, stop, attached) -> how it ended. It runs one window in the calling thread, sets
# ``attached`` once the probes are in the process (the countdown starts there) and ends early when
# ``stop`` is set; it does not raise (an exception is a bug the app reports as the reason).
AttachRunner = Callable[[int, float, threading.Event, threading.Event], AttachEnd]


@dataclass
class AttachWindow:
    """The window running now: its process, its length, when it was asked for and when the probes
    went in (None until then), on the session's clock."""

    pid: int
    seconds: float
    asked_at: float
    attached_at: float | None = None

    def seconds_left(self, now: float) -> float | None:
        if self.attached_at is None:
            return None
        return max(0.0, self.seconds - (now - self.attached_at))


class AttachKey:
    """What the key may do here and the window it runs.

    ``unavailable_reason``: why attaching cannot work at all on this machine (not root, a locked-down
    kernel: known before trying), None where a runner is wired in; ``every_process``: ``--attach``
    keeps every CUDA process attached; ``live``: False for a replay (a recording's processes are not
    this machine's)."""

    def __init__(self, *, live: bool = True, unavailable_reason: str | None = "attach is not available here",
                 every_process: bool = False, window_s: float = DEFAULT_ATTACH_WINDOW_S,
                 clock: Callable[[], float]) -> None:
        self.live = live
        self.unavailable_reason = unavailable_reason
        self.every_process = every_process
        self.window_s = float(window_s)
        self.clock = clock
        self.window: AttachWindow | None = None

    @property
    def usable(self) -> bool:
        """Whether the key can start a window here (the footer offers it only then)."""
        return self.live and self.unavailable_reason is None and not self.every_process

    def refusal(self, pid: int | None) -> Note | None:
        """Why a window on ``pid`` (None: no process highlighted) cannot start now; None: it can."""
        if not self.live:
            return Note("attach works on this machine's processes, not on a recording's", "warning")
        if self.every_process:
            return Note("--attach keeps every CUDA process attached already: their rows show source attached")
        if self.unavailable_reason is not None:
            return Note(f"no attach: {printable(self.unavailable_reason, REASON_CHARS)}", "warning", 8)
        if self.window is not None:
            return Note(f"one attach at a time: {self.status()}")
        if pid is None:
            return Note("no process highlighted: a attaches the highlighted row of the Processes tab (4)")
        return None

    def begin(self, pid: int) -> AttachWindow:
        self.window = AttachWindow(pid, self.window_s, self.clock())
        return self.window

    def mark_attached(self) -> bool:
        """The probes are in: the countdown starts now. False when it had started already."""
        w = self.window
        if w is None or w.attached_at is not None:
            return False
        w.attached_at = self.clock()
        return True

    def status(self) -> str | None:
        """What the status line says while a window runs: "attaching pid 4242…", then "attaching
        pid 4242: 7 s left"; None without one."""
        w = self.window
        if w is None:
            return None
        left = w.seconds_left(self.clock())
        if left is None:
            return f"attaching pid {w.pid}…"
        return f"attaching pid {w.pid}: {math.ceil(left - 1e-9):d} s left"

    def finish(self, end: AttachEnd) -> Note | None:
        """The window has ended: what to tell the user (None for a window stopped by quitting)."""
        self.window = None
        if end.interrupted and end.error is None:
            return None
        if end.error is not None:
            return Note(f"pid {end.pid} not attached: {printable(end.error, REASON_CHARS)}", "warning", 8)
        return Note(f"pid {end.pid} attached for {fmt_seconds(end.window_s)}: its row shows its copies"
                    " (source attached; Enter: in full)")
