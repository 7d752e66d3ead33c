"""The human report of ``pinmon attach``: per attached process its copies (by direction and host
memory kind: rate, count, sizes) and pinned allocations (registrations apart), then how much of each
GPU's link the copies explain, the processes that could not be attached, the findings and notices.

It reads snapshot rows (``ProcessPinned``: ``Copies``, ``Allocations``), as every view does; text from
outside (process names, reasons quoting paths, findings) goes through ``units.printable``.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..model import Allocations, Copies, Finding, ProcessPinned, Snapshot, worst_severity
from ..model.kinds import DIRECTIONS
from ..model.traffic import explain_traffic
from ..units import fmt_bytes, fmt_int, fmt_rate, fmt_seconds, printable
from .text import finding_lines, traffic_lines

MEMORY_WORDS = {"pinned": "pinned", "pageable": "pageable", "write_combined": "write-combined",
                "managed": "managed", "other": "other"}
# Where uprobes may have missed a registration: memory registered before the attach reads pageable.
PAGEABLE_OR_REGISTERED = "pageable, or registered before the attach"
_MAX_TEXT = 2000


@dataclass(frozen=True)
class AttachReport:
    """What the report says beyond the snapshot: the window, the attached pids, the ones that could not
    be, and the attach's own figures of processes whose rows keep a tracer's."""

    window_s: float
    pids: tuple[int, ...]
    failed: dict[int, str] = field(default_factory=dict)
    traced: dict[int, tuple[Copies, Allocations]] = field(default_factory=dict)
    attach_s: float | None = None
    detach_s: float | None = None


def memory_word(memory: str, copies: Copies) -> str:
    if memory == "pageable" and copies.pageable_may_be_registered:
        return PAGEABLE_OR_REGISTERED
    return MEMORY_WORDS.get(memory, printable(memory, 20))


def copy_lines(copies: Copies) -> list[str]:
    """One line per direction and host memory kind: rate, count, sizes (p50, p90, max)."""
    rows = []
    for d in DIRECTIONS:
        label = "H2D" if d == "h2d" else "D2H"
        stats = sorted((s for s in copies.stats if s.direction == d), key=lambda s: -(s.bytes_per_s or 0))
        for s in stats:
            rows.append(f"{label}  {memory_word(s.memory, copies):<42} {fmt_rate(s.bytes_per_s):>11}"
                        f"  {fmt_int(s.count):>9} copies  sizes p50 {fmt_bytes(s.size_p50_bytes)},"
                        f" p90 {fmt_bytes(s.size_p90_bytes)}, max {fmt_bytes(s.size_max_bytes)}")
            label = "   "
    if not rows:
        rows.append("no host<->device copies")
    if copies.peer_count:
        rows.append(f"peer (GPU to GPU, not on the host link): {fmt_rate(copies.peer_bytes_per_s)},"
                    f" {fmt_int(copies.peer_count)} copies")
    return rows


def _flags(flags: dict[str, int]) -> str:
    return ", ".join(f"{printable(k, 20)} {fmt_int(v)}" for k, v in sorted(flags.items())) or "none"


def allocation_lines(a: Allocations) -> list[str]:
    """Pinned allocations and frees (count, rate, sizes, flags), then registrations apart."""
    window = f" in {fmt_seconds(a.window_s)}" if a.window_s else ""
    if not a.count and not a.frees:
        out = [f"no pinned allocations or frees{window}"]
    else:
        out = [f"pinned allocations {fmt_int(a.count)}{window} ({_per_s(a.per_s)}), sizes median"
               f" {fmt_bytes(a.median_bytes)}, p90 {fmt_bytes(a.size_p90_bytes)}, max {fmt_bytes(a.size_max_bytes)};"
               f" flags: {_flags(a.flags)}; frees {fmt_int(a.frees)} ({_per_s(a.frees_per_s)})"]
    if a.registrations or a.unregistrations:
        out.append(f"registrations {fmt_int(a.registrations)} ({fmt_bytes(a.registered_bytes)}), sizes median"
                   f" {fmt_bytes(a.registration_median_bytes)}, max {fmt_bytes(a.registration_max_bytes)};"
                   f" flags: {_flags(a.registration_flags)}; unregistrations {fmt_int(a.unregistrations)}")
    return out


def _per_s(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.1f}/s"


def process_lines(p: ProcessPinned, uprobes: tuple[Copies, Allocations] | None = None) -> list[str]:
    """A process's block: who it is, its held memory (the maps' estimate), its copies and allocations;
    for a traced row the tracer's figures, and the attach's own below them."""
    who = p.identity
    held = p.held.bytes
    head = (f"pid {p.pid} ({printable(who.name, 40)}) user {printable(who.user, 20)}  source {p.source}"
            f"  holds {fmt_bytes(held)} pinned" + (" (traced)" if p.source == "traced" else " (est.)"))
    out = [head]
    if p.copies is not None:
        what = f"copies ({p.copies.instrument}" + (f", over {fmt_seconds(p.copies.window_s)})" if p.copies.window_s
                                                    else ")")
        out.append("  " + what)
        out += ["    " + line for line in copy_lines(p.copies)]
    if p.allocations is not None:
        out += ["  " + line for line in allocation_lines(p.allocations)]
    notes = p.copies.notes if p.copies is not None else ()
    out += [f"  note: {printable(n, 300)}" for n in notes]
    if uprobes is not None:
        out.append("  the attach's own figures (the row keeps the tracer's):")
        out += ["    " + line for line in copy_lines(uprobes[0])]
        out += ["    " + line for line in allocation_lines(uprobes[1])]
    return out


def format_attach(snapshot: Snapshot, findings: Sequence[Finding], report: AttachReport, width: int = 100) -> str:
    status = worst_severity(findings)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snapshot.time))
    n = len(report.pids)
    out = [f"pinmon attach: {status.upper()}   host {printable(snapshot.host.hostname, 80)}   {when}",
           f"  {n} process{'es' if n != 1 else ''} attached for {fmt_seconds(report.window_s)}"
           f" (uprobes on libcuda; attach {fmt_seconds(report.attach_s)}, detach {fmt_seconds(report.detach_s)})",
           ""]
    rows = {p.pid: p for p in snapshot.processes}
    for pid in report.pids:
        p = rows.get(pid)
        if p is None:
            continue
        out += process_lines(p, report.traced.get(pid)) + [""]
    explained = explain_traffic(snapshot)
    if explained.measured:
        out += ["Link traffic the copies explain"] + ["  " + line for line in traffic_lines(explained)]
        out.append("")
    if report.failed:
        out.append("Not attached")
        out += [f"  pid {pid}: {printable(why, 300)}" for pid, why in sorted(report.failed.items())[:20]]
        if len(report.failed) > 20:
            out.append(f"  ... and {len(report.failed) - 20} more")
        out.append("")
    out += [f"Findings ({len(findings)})"] + finding_lines(findings, width) + [""]
    if snapshot.notices:
        out += ["Notices"] + [f"  - {printable(x, _MAX_TEXT)}" for x in snapshot.notices]
    return "\n".join(out).rstrip() + "\n"
