"""Rules on groups (a pod's container, a container, a Slurm job step, a systemd unit): pinned memory
against the group's own memory limit, where the OOM killer acts, and OOM kills in a group that pins.

A group's held bytes (``Cgroup.held.bytes``: its processes' pinned pages and ``VmPin``, charged to the
group, and their write-combined bytes), against the tightest ``memory.max`` on its path. A group with
no limit is bounded by the host only (``pinned-ram-share``), so these rules stay silent there.
"""
from __future__ import annotations

from typing import Iterator, Sequence

from ..model import Cgroup, Snapshot
from ..model.kinds import Severity
from ..units import fmt_bytes, fmt_int, fmt_pct
from .rule import Found, rule
from .thresholds import Thresholds

_RECLAIM = ("Pinned pages are charged to the group of the process that pinned them and cannot be"
            " swapped out or reclaimed, so the group's limit binds long before the host's RAM does.")


def _largest_process(snap: Snapshot, g: Cgroup) -> str:
    rows = [p for p in snap.processes if p.identity.cgroup == g.key]
    best = max(rows, key=lambda p: p.held.bytes or 0, default=None)
    if best is None or not best.held.bytes:
        return ""
    return f" Largest holder: pid {best.pid} ({best.identity.name or 'n/a'}) with {fmt_bytes(best.held.bytes)}."


@rule("pinned-cgroup-share",
      "a container's, pod's or job's pinned memory vs its own memory limit: warning at"
      " {cgroup_pinned_warning_fraction}, critical above {cgroup_pinned_critical_fraction}",
      thresholds=("cgroup_pinned_warning_fraction", "cgroup_pinned_critical_fraction"),
      severities=("warning", "critical"))
def pinned_cgroup_share(snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    for g in snap.cgroups:
        held, limit = g.held.bytes, g.limit.limit_bytes
        if not held or not limit:
            continue
        fraction = held / limit
        severity: Severity
        if fraction > t.cgroup_pinned_critical_fraction:
            severity = "critical"
        elif fraction >= t.cgroup_pinned_warning_fraction:
            severity = "warning"
        else:
            continue
        parts = []
        if g.held.vm_pinned_bytes:
            parts.append(f"{fmt_bytes(g.held.vm_pinned_bytes)} VmPin")
        if g.held.write_combined_bytes:
            parts.append(f"{fmt_bytes(g.held.write_combined_bytes)} write-combined")
        of_which = f" (of which {', '.join(parts)})" if parts else ""
        message = (f"pinned {fmt_bytes(held)}{of_which} = {fmt_pct(fraction)} of its {fmt_bytes(limit)}"
                   f" memory limit, over {fmt_int(g.processes)} process{'es' if g.processes != 1 else ''}")
        advice = (f"{_RECLAIM} Past the limit the OOM killer ends a process in this group, whatever the host"
                  f" has free. Raise the group's memory limit (the pod's resources.limits.memory,"
                  f" docker --memory, Slurm --mem) or pin less: cap pinned pools, pin only staging buffers"
                  f" that are reused for transfers." + _largest_process(snap, g))
        yield Found(severity, message, advice, subject=g.subject, cgroup=g.key, kind=g.kind,
                    pinned_bytes=held, memory_limit_bytes=limit, fraction=fraction,
                    vm_pinned_bytes=g.held.vm_pinned_bytes, write_combined_bytes=g.held.write_combined_bytes,
                    memory_current_bytes=g.limit.current_bytes)


@rule("cgroup-oom-kills",
      "critical: a container, pod or job that held pinned memory had processes OOM-killed since pinmon started",
      over="history", severities=("critical",))
def cgroup_oom_kills(history: Sequence[Snapshot], t: Thresholds) -> Iterator[Found]:
    latest: dict[str, Cgroup] = {}
    held: dict[str, int] = {}
    for snap in history:
        for g in snap.cgroups:
            latest[g.key] = g
            h = g.held.bytes
            if h:
                held[g.key] = max(held.get(g.key, 0), h)
    for key, g in latest.items():
        kills = g.limit.oom_kills_since_start
        if key not in held or not kills:
            continue
        limit = f" at its {fmt_bytes(g.limit.limit_bytes)} memory limit" if g.limit.limit_bytes else ""
        message = (f"{fmt_int(kills)} process{'es' if kills != 1 else ''} OOM-killed{limit} since pinmon"
                   f" started, while the group held up to {fmt_bytes(held[key])} of pinned memory")
        advice = (f"{_RECLAIM} When the group's memory runs out, the kernel cannot take those pages back,"
                  f" so it kills a process instead. Raise the group's memory limit or pin less; check the"
                  f" group's pinned share (pinned-cgroup-share) before the job runs again.")
        yield Found("critical", message, advice, subject=g.subject, cgroup=key, kind=g.kind,
                    oom_kills=kills, held_pinned_bytes=held[key], memory_limit_bytes=g.limit.limit_bytes)
