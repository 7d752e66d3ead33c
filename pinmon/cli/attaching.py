"""What the commands with an attach share (``pinmon attach``, ``check --attach``, ``record --attach``,
``export --attach``): one window in the caller's thread, or an attacher kept running beside a live
collector, and the ``--attach`` option's help.

The engine is ``pinmon.attach``; the snapshot rows come from ``collect/attached.py``. An attach that
cannot attach at all is a notice in the snapshot (``check``, ``record``, ``export``), or exit 3
(``pinmon attach``, as ``check`` answers what it could not assess).
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ..attach import Attacher, AttachOutcome

# A continuous attach cuts a window at most this often: a window is a second of calls at least.
MIN_CONTINUOUS_WINDOW_S = 1.0

ATTACH_HELP = ("also count each CUDA process's copies and pinned allocations through uprobes on its"
               " libcuda (root; no restart): rows with source \"attached\"")


def one_window(pids: Optional[list[int]], seconds: float) -> AttachOutcome:
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
