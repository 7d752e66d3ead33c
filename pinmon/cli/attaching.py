"""What the commands with an attach share (``pinmon attach``, ``check --attach``, ``record --attach``,
``export --attach``, the live app's ``--attach`` and attach key): one window in the caller's thread, an
attacher kept running beside a live collector, the app key's window on one process, and the
``--attach`` option's help.

The engine is ``pinmon.attach``; the snapshot rows come from ``collect/attached.py``. An attach that
cannot attach at all is a notice in the snapshot (``check``, ``record``, ``export``), or exit 3
(``pinmon attach``, as ``check`` answers what it could not assess).
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..attach import Attacher, AttachOutcome
    from ..collect.attached import RequestedWindows
    from ..tui.view.attach import AttachEnd, AttachRunner

# A continuous attach cuts a window at most this often: a window is a second of calls at least.
MIN_CONTINUOUS_WINDOW_S = 1.0

ATTACH_HELP = ("also count each CUDA process's copies and pinned allocations through uprobes on its"
               " libcuda (root; no restart): rows with source \"attached\"")


def one_window(pids: list[int] | None, seconds: float) -> AttachOutcome:
    """Attach ``pids`` (None: every CUDA process, the lowest 64) for ``seconds`` in this thread, then
    detach; Ctrl-C or SIGTERM ends the window early with what it counted."""
    from ..attach import Attacher, AttachPolicy

    return Attacher(pids, AttachPolicy(window_s=seconds)).run_once()


def window_or_wait(seconds: float) -> tuple[AttachOutcome, bool]:
    """One window over every CUDA process, taking ``seconds`` however it goes: where nothing can be
    attached, the rest of the window is waited out (the caller counts PCIe bytes meanwhile). (outcome,
    whether the window was cut short by Ctrl-C or a signal)."""
    start = time.monotonic()
    outcome = one_window(None, seconds)
    if outcome.result is None:
        rest = seconds - (time.monotonic() - start)
        if rest > 0:
            try:
                time.sleep(rest)
            except KeyboardInterrupt:
                return outcome, True
    return outcome, outcome.interrupted


def continuous(interval_s: float) -> Attacher:
    """Every CUDA process kept attached, a window per snapshot interval (at least a second)."""
    from ..attach import Attacher, AttachPolicy

    return Attacher(None, AttachPolicy(window_s=max(MIN_CONTINUOUS_WINDOW_S, interval_s))).start()


def key_window(requested: RequestedWindows, **session_kwargs: Any) -> AttachRunner:
    """What the app's attach key runs: one window on one process, in the app's attach thread; its
    outcome goes to ``requested`` (the live collector's attached source), so the process's row shows
    its copies from the next snapshot on. The app gets how it ended (``AttachEnd``).
    ``session_kwargs``: ``AttachSession``'s (tests: ``is_cuda``, ``euid``)."""
    def run(pid: int, seconds: float, stop: threading.Event, attached: threading.Event) -> AttachEnd:
        from ..attach import Attacher, AttachPolicy
        from ..tui.view.attach import AttachEnd

        attacher = Attacher([pid], AttachPolicy(window_s=seconds), **session_kwargs)
        attacher.attached = attached  # set while the probes are in: the app's countdown starts there
        outcome = attacher.run_once(seconds, stop)
        requested.set(outcome)
        return end_of(pid, outcome, AttachEnd)
    return run


def end_of(pid: int, outcome: AttachOutcome, make: type[AttachEnd]) -> AttachEnd:
    """How the window on ``pid`` ended: attached (its window), or the one line that says why not."""
    r = outcome.result
    if r is None:
        return make(pid, outcome.error or "nothing could be attached")
    if pid not in r.processes:
        return make(pid, r.failed.get(pid) or "it was not attached")
    return make(pid, None, r.window_s, outcome.interrupted)
