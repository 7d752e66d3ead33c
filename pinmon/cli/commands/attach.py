"""``pinmon attach [PID ...] [--seconds S] [--json]``: the copies and pinned allocations of running
processes, seen through uprobes on their libcuda (root; no restart, no code in them), and the findings
they feed.

With no PID: every process that maps a libcuda (the lowest 64 pids). For S seconds (default 5) the
attach counts each process's host-to-device and device-to-host copies by host memory kind and its
pinned allocations; then a live snapshot, with those figures in the attached processes' rows (source
``attached``; a traced process keeps the tracer's figures, the attach's own shown beside them), goes
through the advisor, and the findings about the attached processes are reported.

Exit codes as ``pinmon check``'s: 0 ok, 1 warning, 2 critical, 3 unknown: nothing could be attached
(not root, no uprobes, a locked-down kernel, no process that maps libcuda) or bad arguments, one line
on stderr (with ``--json`` also a JSON object). ``--json`` prints ``pinmon.attach/1``.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...limits import MAX_ATTACH_PIDS, MAX_ATTACH_S, MIN_ATTACH_S
from ...units import printable
from ..common import EXIT_CHECK_UNKNOWN, UsageError, advise, dumps, pid_arg, seconds_arg
from ..options import Settings, shared
from ..parser import Commands

if TYPE_CHECKING:
    from ...attach import AttachOutcome
    from ...model import Finding, Snapshot
    from ...outputs.attach_text import AttachReport

JSON_SCHEMA = "pinmon.attach/1"
REASON_CHARS = 300
# One window over the given pids (None: every CUDA process) -> its outcome; tests pass their own.
Window = Callable[[list[int] | None, float], "AttachOutcome"]

seconds_arg_attach = seconds_arg(MIN_ATTACH_S, MAX_ATTACH_S, "the attach window")


def add_parser(sub: Commands) -> None:
    a = sub.add_parser(
        "attach", parents=shared("config"),
        help="count running processes' copies and pinned allocations through uprobes on libcuda (root)",
        description="Attach uprobes to the libcuda of running processes (root; no restart), count each one's "
                    "host-to-device and device-to-host copies by host memory kind (pinned, write-combined, "
                    "pageable) and its pinned allocations for S seconds, then report them with the advisor's "
                    "findings about them. Exit 0 ok, 1 warning, 2 critical, 3 unknown (nothing attached).")
    a.bad_input_code = EXIT_CHECK_UNKNOWN
    a.add_argument("pids", nargs="*", type=pid_arg, metavar="PID",
                   help=f"processes to attach to, at most {MAX_ATTACH_PIDS} (default: every process that maps"
                        " a libcuda, the lowest 64)")
    a.add_argument("--seconds", type=seconds_arg_attach, default=5.0, metavar="S",
                   help=f"how long to count, {MIN_ATTACH_S:g} to {MAX_ATTACH_S:g} (default 5)")
    a.add_argument("--json", action="store_true",
                   help='print {"schema": "pinmon.attach/1", "status", "processes", "findings", ...}')


def measure(pids: list[int] | None, seconds: float, window: Window | None = None,
            **collector: Any) -> tuple[Snapshot, AttachOutcome]:
    """A live snapshot taken after one attach window of ``seconds`` (PCIe counted over the same time),
    with the window's rows in it; and the window's outcome."""
    from ...collect.attached import LatestOutcome
    from ...collect.live import LiveCollector
    from ..attaching import one_window

    held = LatestOutcome()
    collector.setdefault("kernel_read_every_s", 0.0)
    collector.setdefault("oom_lookback_s", 0.0)
    with LiveCollector(interval_s=seconds, pids=pids, attached=held, **collector) as col:
        col.snapshot()  # starts the PCIe counting interval
        outcome = (window or one_window)(pids, seconds)
        held.set(outcome)
        snap = col.snapshot()
    return snap, outcome


def report_of(snap: Snapshot, outcome: AttachOutcome) -> AttachReport:
    """What the report adds to the snapshot: the window, who was attached, who not, and the attach's own
    figures of traced processes."""
    from ...collect.attached import allocations_of, copies_of
    from ...outputs.attach_text import AttachReport

    r = outcome.result
    assert r is not None
    sources = {p.pid: p.source for p in snap.processes}
    traced = {pid: (copies_of(pc), allocations_of(pc)) for pid, pc in r.processes.items()
              if sources.get(pid) == "traced"}
    return AttachReport(window_s=r.window_s, pids=tuple(sorted(r.processes)), failed=dict(r.failed), traced=traced,
                        attach_s=r.attach_s, detach_s=outcome.detach_s)


def attached_findings(findings: list[Finding], pids: tuple[int, ...]) -> list[Finding]:
    """The findings about the attached processes (those a process rule made)."""
    wanted = set(pids)
    return [f for f in findings if f.values.get("pid") in wanted]


def json_doc(snap: Snapshot, outcome: AttachOutcome, report: AttachReport, findings: list[Finding]) -> dict:
    from ...model import worst_severity
    from ...model.traffic import explain_traffic

    r = outcome.result
    assert r is not None
    wanted = set(report.pids)
    return {
        "schema": JSON_SCHEMA, "status": worst_severity(findings),
        "window_s": r.window_s, "enabled_s": r.enabled_s, "sampled": r.sampled, "stopped_early": r.stopped_early,
        "interrupted": outcome.interrupted, "attach_s": r.attach_s, "detach_s": outcome.detach_s,
        "events": r.events, "lost_events": r.lost_events,
        "processes": [p.to_dict() for p in snap.processes if p.pid in wanted],
        "traced": [{"pid": pid, "copies": c.to_dict(), "allocations": a.to_dict()}
                   for pid, (c, a) in sorted(report.traced.items())],
        "failed": [{"pid": pid, "reason": printable(why, REASON_CHARS)} for pid, why in sorted(r.failed.items())],
        "files": [{"path": printable(f.path, REASON_CHARS), "probes": f.probes, "pids": list(f.pids),
                   "refused": None if f.refused is None else printable(f.refused, REASON_CHARS)} for f in r.files],
        "traffic": explain_traffic(snap).to_dict(),
        "findings": [f.to_dict() for f in findings],
        "notices": list(snap.notices),
    }


def run(args: argparse.Namespace, settings: Settings) -> int:
    pids = list(dict.fromkeys(args.pids)) or None
    if pids is not None and len(pids) > MAX_ATTACH_PIDS:
        raise UsageError(f"at most {MAX_ATTACH_PIDS} processes at once, got {len(pids)}")
    snap, outcome = measure(pids, args.seconds)
    return answer(snap, outcome, settings, args.json)


def answer(snap: Snapshot, outcome: AttachOutcome, settings: Settings, as_json: bool) -> int:
    """Print the report (or the one line of why nothing was attached); the exit code."""
    from ...model import SEVERITY_RANK, worst_severity
    from ...outputs.attach_text import format_attach

    if outcome.result is None:
        reason = printable(outcome.error or "nothing could be attached", REASON_CHARS)
        print(f"pinmon attach: {reason}", file=sys.stderr)
        if as_json:
            print(dumps({"schema": JSON_SCHEMA, "status": "unknown", "reason": reason}, indent=1))
        return EXIT_CHECK_UNKNOWN
    report = report_of(snap, outcome)
    findings = attached_findings(advise([snap], settings.config), report.pids)
    if as_json:
        print(dumps(json_doc(snap, outcome, report, findings), indent=1))
    else:
        sys.stdout.write(format_attach(snap, findings, report))
    return SEVERITY_RANK[worst_severity(findings)]
