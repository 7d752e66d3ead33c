"""``pinmon replay FILE``: play a recording in the terminal app.

Without a terminal (or with ``TERM`` dumb or unset), the check report of the recording's last snapshot (advised over the snapshots
before it, as the app would); ``--json`` prints every snapshot with its findings as JSON lines.
Exit 0 from the app; where a report or JSON lines are printed, the exit code is the last snapshot's,
as ``pinmon check`` gives it (0 ok, 1 warning, 2 critical); 2 also for a recording that cannot be
read, with one line on stderr.
"""
from __future__ import annotations

import sys
from collections import deque
from typing import Optional

from ..common import (
    ADVISOR_WINDOW,
    advise,
    dumps,
    load_config,
    no_app_here,
    open_replay,
    plural,
    print_notices,
    run_app,
    speed_arg,
)

# --json prints JSON lines without a schema id; an error is printed as a JSON object all the same.
JSON_SCHEMA = None


def add_parser(sub) -> None:
    rp = sub.add_parser("replay", help="play a recording in the terminal app",
                        description="Play a recording in the terminal app. When stdout is not a terminal,"
                                    " print the check report of the recording's last snapshot instead.")
    rp.add_argument("file", metavar="FILE", help="a recording made by pinmon record (.jsonl or .jsonl.gz)")
    rp.add_argument("--speed", type=speed_arg, default=1.0, metavar="X",
                    help="playback speed factor: 2 plays twice as fast (default 1)")
    rp.add_argument("--json", action="store_true", help="print the recording's snapshots with findings as JSON lines instead")


def run(args, path: Optional[str] = None) -> int:
    """Play ``path`` (default: the FILE argument)."""
    config = load_config(args.config)
    source = open_replay(path or args.file)
    try:
        if getattr(args, "json", False):
            return _print_json(source, config)
        why = no_app_here()
        if why is not None:
            return _print_report(source, config, why)
        return run_app(source, config, args, speed=args.speed)
    finally:
        source.close()


def _exit_code(findings) -> int:
    """The exit code ``pinmon check`` gives these findings."""
    from ...model import SEVERITY_RANK, worst_severity

    return SEVERITY_RANK[worst_severity(findings)]


def _print_json(source, config) -> int:
    history: deque = deque(maxlen=ADVISOR_WINDOW)
    findings: list = []
    while True:
        snap = source.snapshot()
        if snap is None:
            break
        history.append(snap)
        findings = advise(list(history), config)
        print(dumps({"snapshot": snap.to_dict(), "findings": [f.to_dict() for f in findings]}))
    print_notices(source)
    return _exit_code(findings)


def _print_report(source, config, why: str) -> int:
    """Without a terminal: the check report of the recording's last snapshot, advised over the
    snapshots before it as the terminal app would, instead of drawing the app into a file or pipe."""
    from ...outputs.text import format_check

    history: deque = deque(maxlen=ADVISOR_WINDOW)
    while (snap := source.snapshot()) is not None:
        history.append(snap)
    findings = advise(list(history), config)
    last = history[-1]  # a source always yields its first snapshot: it was read when it opened
    print(f"pinmon: {why}: the report of the last of"
          f" {plural(len(history), 'snapshot')} in {source.path}", file=sys.stderr)
    sys.stdout.write(format_check(last, findings))
    print_notices(source)
    return _exit_code(findings)
