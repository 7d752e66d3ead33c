"""``pinmon record -o FILE``: live snapshots written as a recording (``pinmon.recording``'s format).

Never overwrites a file. Runs until Ctrl-C, SIGTERM or SIGHUP, or for ``--duration`` seconds with a
last snapshot at its end; every snapshot written before a stop stays readable.
"""
from __future__ import annotations

import signal
import sys
import time

from ...limits import MAX_INTERVAL_S, MIN_INTERVAL_S
from ..common import UsageError, duration_arg, interval_arg, load_config, plural


def add_parser(sub) -> None:
    r = sub.add_parser("record", help="write snapshots as JSON lines (gzip for .gz) for replay",
                       description="Record snapshots as JSON lines (gzip when FILE ends in .gz). Never overwrites a file.")
    r.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the new file to write (an existing file is never overwritten); gzip when it ends in .gz")
    r.add_argument("--interval", type=interval_arg, default=None, metavar="S", dest="sub_interval",
                   help=f"seconds between snapshots, {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g}"
                        " (default 1, or the config file's)")
    r.add_argument("--duration", type=duration_arg, default=None, metavar="S",
                   help="stop after S seconds, with a last snapshot then (default: until Ctrl-C)")


class _Stop(Exception):
    pass


def _install_stop_signals() -> None:
    def handler(signum, frame):
        raise _Stop()

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):
            pass


def run(args) -> int:
    from ...collect.collector import LiveCollector
    from ...recording import Recorder, RecordingError

    config = load_config(args.config)
    interval = args.sub_interval or args.interval or config.interval_s
    try:
        rec = Recorder(args.output)
    except RecordingError as e:
        raise UsageError(str(e)) from None
    _install_stop_signals()
    start = time.monotonic()
    deadline = None if args.duration is None else start + args.duration
    try:
        with rec, LiveCollector(interval_s=interval) as col:
            col.snapshot()
            next_t = start + interval
            while True:
                # Sleep to the next snapshot, but never past the end of --duration, where a last
                # snapshot covers the time since the one before (so a --duration shorter than the
                # interval still records one).
                wake = next_t if deadline is None else min(next_t, deadline)
                time.sleep(max(0.0, wake - time.monotonic()))
                now = time.monotonic()
                ended = deadline is not None and now >= deadline
                if now >= next_t or ended:
                    next_t += interval
                    rec.write(col.snapshot())
                if ended:
                    break
    except (KeyboardInterrupt, _Stop):
        pass
    except RecordingError as e:
        raise UsageError(str(e)) from None
    print(f"recorded {plural(rec.count, 'snapshot')} to {args.output}", file=sys.stderr)
    return 0
