"""``pinmon record -o FILE``: live snapshots written as a recording (``pinmon.recording``'s format).

Never overwrites a file (``-o -`` writes to standard output). Runs until Ctrl-C, SIGTERM or SIGHUP,
or for ``--duration`` seconds; either way a last snapshot covers the time since the one before, so a
stop after ten minutes of a one-hour interval still records those ten minutes. Every snapshot
written before a stop stays readable. ``--attach`` keeps every CUDA process attached (uprobes, a
window per interval): their copies and allocations are recorded in their rows and replay as they were.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

from ..attaching import ATTACH_HELP
from ..common import UsageError, duration_arg, plural
from ..options import Settings, shared
from ..parser import Commands


def add_parser(sub: Commands) -> None:
    r = sub.add_parser("record", parents=shared("config", "interval", "oom_lookback"),
                       help="write snapshots as JSON lines (gzip for .gz) for replay",
                       description="Record snapshots as JSON lines (gzip when FILE ends in .gz). Never overwrites a file.")
    r.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the new file to write (an existing file is never overwritten; - for standard output); gzip when it ends in .gz")
    r.add_argument("--duration", type=duration_arg, default=None, metavar="S",
                   help="stop after S seconds, with a last snapshot then (default: until Ctrl-C)")
    r.add_argument("--attach", action="store_true", help=ATTACH_HELP + ", a window each interval")


def _install_stop_signals(stop: threading.Event) -> dict[int, Any]:
    """Ctrl-C, SIGTERM and SIGHUP set ``stop``: the wait for the next snapshot ends at once, and no
    snapshot or write is cut in the middle. Returns the handlers they replaced."""
    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous: dict[int, Any] = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
    return previous


def _restore_signals(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError, TypeError):
            pass


def wait_for_stop(stop: threading.Event, seconds: float) -> None:
    stop.wait(seconds)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from ...collect.live import LiveCollector
    from ...recording import Recorder, RecordingError
    from ..attaching import continuous

    interval = settings.interval_s
    try:
        rec = Recorder(args.output)
    except RecordingError as e:
        raise UsageError(str(e)) from None
    stop = threading.Event()
    previous = _install_stop_signals(stop)
    start = time.monotonic()
    deadline = None if args.duration is None else start + args.duration
    attacher = continuous(interval) if args.attach else None
    try:
        with rec, LiveCollector(interval_s=interval, oom_lookback_s=settings.oom_lookback_s,
                                attached=attacher) as col:
            col.snapshot()  # the first one only starts the rates
            next_t = start + interval
            while True:
                # Wait for the next snapshot, but never past the end of --duration or a stop, where
                # a last snapshot covers the time since the one before (so a --duration shorter than
                # the interval, or a stop before the first interval ends, still records one).
                wake = next_t if deadline is None else min(next_t, deadline)
                wait_for_stop(stop, max(0.0, wake - time.monotonic()))
                now = time.monotonic()
                ended = stop.is_set() or (deadline is not None and now >= deadline)
                if now >= next_t or ended:
                    next_t += interval
                    rec.write(col.snapshot())
                if ended:
                    break
    except RecordingError as e:
        raise UsageError(str(e)) from None
    finally:
        if attacher is not None:
            attacher.stop()  # the probes out of the targets before pinmon exits
        _restore_signals(previous)  # the recording is closed: a signal now does what it did before
    where = "standard output" if args.output == "-" else args.output
    print(f"recorded {plural(rec.count, 'snapshot')} to {where}", file=sys.stderr)
    return 0
