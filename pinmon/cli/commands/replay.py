"""``pinmon replay FILE``: play a recording in the terminal app.

Without a terminal (or with ``TERM`` dumb or unset), the check report of the recording's last snapshot (advised over the snapshots
before it, as the app would); ``--json`` prints every snapshot with its findings as JSON lines.
Exit 0 from the app; where a report or JSON lines are printed, the exit code is the last snapshot's,
as ``pinmon check`` gives it (0 ok, 1 warning, 2 critical); 2 also for a recording that cannot be
read, with one line on stderr.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...advise.history import AdvisorHistory
from ..common import UsageError, advise, dumps, no_app_here, open_replay, plural, print_notices, run_app, speed_arg
from ..options import Settings, shared
from ..parser import Commands

if TYPE_CHECKING:
    from ...model import Finding
    from ...recording.replay import ReplaySource
    from ..config import Config

# --json prints JSON lines without a schema id; an error is printed as a JSON object all the same.
JSON_SCHEMA = None


def add_parser(sub: Commands) -> None:
    rp = sub.add_parser("replay", parents=shared("config"),
                        help="play a recording in the terminal app",
                        description="Play a recording in the terminal app. When stdout is not a terminal,"
                                    " print the check report of the recording's last snapshot instead.")
    rp.add_argument("file", metavar="FILE", help="a recording made by pinmon record (.jsonl or .jsonl.gz)")
    rp.add_argument("--speed", type=speed_arg, default=1.0, metavar="X",
                    help="playback speed factor: 2 plays twice as fast (default 1)")
    rp.add_argument("--json", action="store_true", help="print the recording's snapshots with findings as JSON lines instead")


def run(args: argparse.Namespace, settings: Settings, path: str | None = None) -> int:
    """Play ``path`` (default: the FILE argument)."""
    config = settings.config
    source = open_replay(path or args.file)
    try:
        if getattr(args, "json", False):
            return _print_json(source, config)
        why = no_app_here()
        if why is not None:
            return _print_report(source, config, why)
        return run_app(source, settings, speed=args.speed)
    finally:
        source.close()


def _exit_code(findings: Sequence[Finding]) -> int:
    """The exit code ``pinmon check`` gives these findings."""
    from ...model import SEVERITY_RANK, worst_severity

    return SEVERITY_RANK[worst_severity(findings)]


def _print_json(source: ReplaySource, config: Config) -> int:
    history = AdvisorHistory.for_thresholds(config.thresholds)
    findings: list[Finding] = []
    while True:
        snap = source.snapshot()
        if snap is None:
            break
        history.append(snap)
        findings = advise(history.snapshots(), config)
        print(dumps({"snapshot": snap.to_dict(), "findings": [f.to_dict() for f in findings]}))
    print_notices(source)
    return _exit_code(findings)


def _print_report(source: ReplaySource, config: Config, why: str) -> int:
    """Without a terminal: the check report of the recording's last snapshot, advised over the
    snapshots before it as the terminal app would, instead of drawing the app into a file or pipe."""
    from ...outputs.text import format_check

    history = AdvisorHistory.for_thresholds(config.thresholds)
    while (snap := source.snapshot()) is not None:
        history.append(snap)
    findings = advise(history.snapshots(), config)
    last = history.latest
    if last is None:  # pragma: no cover - a ReplaySource reads its first snapshot when it opens
        raise UsageError(f"{source.path}: empty recording (no snapshots)")
    print(f"pinmon: {why}: the report of the last of"
          f" {plural(history.taken, 'snapshot')} in {source.path}", file=sys.stderr)
    sys.stdout.write(format_check(last, findings))
    print_notices(source)
    return _exit_code(findings)
