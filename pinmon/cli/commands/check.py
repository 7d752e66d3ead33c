"""``pinmon check``: one snapshot (live, or read from a file), the advisor's findings, a report.

Exit 0 ok, 1 warning, 2 critical, 3 unknown (could not assess, bad arguments included): the Nagios
convention, so a monitoring system can run it as it is. ``--json`` prints ``pinmon.check/1``.
Without a command and without a terminal, ``pinmon`` prints this report too (``report``).
``--attach`` counts every CUDA process's copies and pinned allocations through uprobes over the window
(``cli/attaching.py``); where nothing can be attached the check goes on, with a notice saying why.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...limits import DEFAULT_OOM_LOOKBACK_S, MAX_WINDOW_S
from ...model import CHECK_SCHEMA, ProbeResult, Snapshot
from ...units import fmt_seconds
from ..attaching import ATTACH_HELP
from ..common import EXIT_CHECK_UNKNOWN, UsageError, advise, dumps, window_arg
from ..options import Settings, shared
from ..parser import Commands

if TYPE_CHECKING:
    from ...collect.attached import LatestOutcome
    from ...collect.live import LiveCollector
    from ..config import Config

JSON_SCHEMA = CHECK_SCHEMA


def add_parser(sub: Commands) -> None:
    c = sub.add_parser("check", parents=shared("config", "max_pinned", "oom_lookback"),
                       help="one snapshot, the advisor's findings; exit 0 ok, 1 warning, 2 critical, 3 unknown",
                       description="Take one snapshot (or read a saved one), run the advisor, print a report. "
                                   "Exit 0 ok, 1 warning, 2 critical, 3 unknown (could not assess).")
    c.bad_input_code = EXIT_CHECK_UNKNOWN
    c.add_argument("--json", action="store_true", help='print {"schema": "pinmon.check/1", "status", "snapshot", "findings"}')
    c.add_argument("--snapshot", metavar="FILE", help="assess a saved snapshot (--json output or a recording's last line)")
    c.add_argument("--window", type=window_arg, default=1.0, metavar="S",
                   help=f"seconds of PCIe counting before the snapshot, up to {MAX_WINDOW_S:g} (default 1)")
    c.add_argument("--probe", action="store_true", help="include a quick pinned-vs-pageable probe (needs CuPy and a GPU)")
    c.add_argument("--attach", action="store_true", help=ATTACH_HELP + ", over the --window")


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.snapshot:
        if args.attach:
            raise UsageError("--attach counts this machine's processes; it does not combine with --snapshot")
        snap = _saved_snapshot(args.snapshot)
    else:
        snap = measure(args.window, args.probe, settings.max_pinned_bytes, settings.oom_lookback_s, args.attach)
    return report(snap, settings.config, as_json=args.json)


def _saved_snapshot(path: str) -> Snapshot:
    """The snapshot in a saved file, marked as read from one; UsageError when it cannot be read."""
    from ...recording import RecordingError, read_snapshot_file

    try:
        snap = read_snapshot_file(path)
    except RecordingError as e:
        raise UsageError(str(e)) from None
    return dataclasses.replace(snap, source="snapshot")


def measure(window_s: float, probe: bool = False, max_pinned: int | None = None,
            oom_lookback: float = DEFAULT_OOM_LOOKBACK_S, attach: bool = False) -> Snapshot:
    """A live snapshot after ``window_s`` of counting, with a quick probe's result when ``probe``, the
    memory cgroup OOM kills of the last ``oom_lookback`` seconds in the kernel's log, and with
    ``attach`` every CUDA process's copies and allocations over the window."""
    from ...collect.attached import LatestOutcome
    from ...collect.live import LiveCollector

    held = LatestOutcome() if attach else None
    wait = _attach_window(held) if held is not None else None
    # The kernel's pinned count is read fresh: a one-shot check has no earlier reading to reuse.
    with LiveCollector(interval_s=window_s, kernel_read_every_s=0.0, oom_lookback_s=oom_lookback,
                       attached=held) as col:
        snap = live_snapshot(col, window_s) if wait is None else live_snapshot(col, window_s, wait)
        if probe:
            from ...model.probe_join import with_probe

            snap = with_probe(snap, _quick_probe(max_pinned, snap))
    return snap


def _attach_window(held: LatestOutcome) -> Callable[[float], bool]:
    """A wait that spends the window attached to every CUDA process, its outcome left in ``held``."""
    from ..attaching import window_or_wait

    def wait(seconds: float) -> bool:
        outcome, cut = window_or_wait(seconds)
        held.set(outcome)
        return cut
    return wait


def live_snapshot(collector: LiveCollector, window_s: float,
                  wait: Callable[[float], bool] | None = None) -> Snapshot:
    """A snapshot after ``window_s`` of counting, so PCIe rates cover a real interval; ``wait(window_s)``
    (an attach's window) spends it where given, and says whether it was cut short. Ctrl-C during the
    wait ends it early: the report covers what was counted, and a notice says so."""
    collector.snapshot()  # starts the counting interval and the churn baseline
    start = time.monotonic()
    try:
        if wait is not None:
            cut = wait(window_s)
        else:
            time.sleep(window_s)
            cut = False
    except KeyboardInterrupt:
        cut = True
    if cut:
        waited = time.monotonic() - start
        snap = collector.snapshot()
        by = "Ctrl-C" if wait is None else "Ctrl-C or a signal"
        note = f"check: window cut to {fmt_seconds(waited)} of {fmt_seconds(window_s)} by {by}"
        return dataclasses.replace(snap, notices=snap.notices + (note,))
    return collector.snapshot()


def _quick_probe(max_pinned: int | None, snapshot: Snapshot | None = None) -> ProbeResult:
    """A quick probe on CUDA device 0, its share of the link taken from the snapshot's GPU 0."""
    from ...probe import run_probe

    link = None
    if snapshot is not None and snapshot.gpus:
        link = snapshot.gpus[0].link.theoretical_bytes_per_s
    return run_probe("quick", gpu_index=0, max_pinned_bytes=max_pinned, link_theoretical_bytes_per_s=link)


def report(snap: Snapshot, config: Config, as_json: bool = False) -> int:
    """Advise on ``snap``, print the report (text or ``pinmon.check/1``), return the exit code."""
    from ...model import SEVERITY_RANK, worst_severity
    from ...outputs.text import format_check

    if config.notices:  # a default config that was ignored: part of the report
        snap = dataclasses.replace(snap, notices=snap.notices + config.notices)
    findings = advise([snap], config)
    if as_json:
        print(dumps({"schema": CHECK_SCHEMA, "status": worst_severity(findings),
                     "snapshot": snap.to_dict(), "findings": [f.to_dict() for f in findings]}, indent=1))
    else:
        sys.stdout.write(format_check(snap, findings))
    return SEVERITY_RANK[worst_severity(findings)]
