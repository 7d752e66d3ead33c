"""Rules on groups (a pod's container, a container, a Slurm job step, a systemd unit): pinned memory
against the group's own memory limit, where the OOM killer acts, and OOM kills in a group that pins.

A group's held bytes (``Cgroup.held.bytes``: its processes' pinned pages and ``VmPin``, charged to the
group, and their write-combined bytes), against the tightest ``memory.max`` on its path. A group with
no limit is bounded by the host only (``pinned-ram-share``), so these rules stay silent there.

OOM kills come two ways: a live group's count (``cgroup-oom-kills``: kills since pinmon started, and
the kernel's lifetime count of a group pinmon first sees), and the kernel's log (``oom-killed``:
``Snapshot.oom_kills``, whose groups may be gone, each kill with its process and its memory at the
kill). A kill in a live group that pinmon watched shows in both: the first says the group's count
rose, the second who was killed and how much of it was shared (pinned) memory.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..model import Cgroup, OomKill, Snapshot
from ..model.kinds import Severity
from ..units import fmt_bytes, fmt_int, fmt_pct, fmt_seconds
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
      "a container, pod or job that held pinned memory had processes OOM-killed: critical since pinmon"
      " started, warning for kills the kernel counted before pinmon first saw the group",
      over="history", severities=("warning", "critical"))
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
        if key not in held:
            continue
        lim = g.limit
        if lim.oom_kills is None or lim.oom_kills_at_start is None:
            continue
        kills, before = lim.oom_kills - lim.oom_kills_at_start, lim.oom_kills_at_start
        if kills <= 0 and before <= 0:
            continue
        limit = f" at its {fmt_bytes(lim.limit_bytes)} memory limit" if lim.limit_bytes else ""
        severity: Severity
        if kills > 0:
            severity = "critical"
            earlier = f" ({fmt_int(before)} more before)" if before > 0 else ""
            message = (f"{fmt_int(kills)} process{'es' if kills != 1 else ''} OOM-killed{limit} since pinmon"
                       f" started{earlier}, while the group held up to {fmt_bytes(held[key])} of pinned memory")
        else:
            severity = "warning"
            message = (f"the kernel counts {fmt_int(before)} OOM kill{'s' if before != 1 else ''}{limit} in this"
                       f" group before pinmon first saw it (its lifetime count), and the group holds up to"
                       f" {fmt_bytes(held[key])} of pinned memory")
        advice = (f"{_RECLAIM} When the group's memory runs out, the kernel cannot take those pages back,"
                  f" so it kills a process instead. Raise the group's memory limit or pin less; check the"
                  f" group's pinned share (pinned-cgroup-share) before the job runs again.")
        yield Found(severity, message, advice, subject=g.subject, cgroup=key, kind=g.kind,
                    oom_kills=kills, oom_kills_before=before, held_pinned_bytes=held[key],
                    memory_limit_bytes=lim.limit_bytes)


def _kill_sentence(k: OomKill, now: float) -> str:
    ago = f" {fmt_seconds(max(0.0, now - k.time), 0)} before this snapshot" if now >= k.time else ""
    limit = (f" at the {fmt_bytes(k.memory_limit_bytes)} memory limit of its group" if k.memory_limit_bytes is not None
             else " at its group's memory limit")
    text = f"{k.process} (pid {k.pid}) was OOM-killed{ago}{limit}"
    rss, share = k.rss_bytes, k.shmem_fraction
    if rss and share is not None:
        text += (f": {fmt_bytes(k.shmem_rss_bytes)} of its {fmt_bytes(rss)} resident memory was shared memory"
                 f" ({fmt_pct(share)}), where CUDA's pinned memory is")
    return text


@rule("oom-killed",
      "a process OOM-killed at a container's, pod's or job's memory limit, from the kernel's log (its group"
      " may be gone): critical when shared memory, where pinned memory is, was at least"
      " {oom_shmem_critical_fraction} of its resident memory, else warning",
      thresholds=("oom_shmem_critical_fraction",), severities=("warning", "critical"))
def oom_killed(snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    groups: dict[str, list[OomKill]] = {}
    for k in snap.oom_kills:
        groups.setdefault(k.key or "unknown", []).append(k)
    for kills in groups.values():
        latest = max(kills, key=lambda k: (k.time, k.seq or 0))
        shares = [k.shmem_fraction for k in kills if k.shmem_fraction is not None]
        worst = max(shares, default=None)
        pinned = worst is not None and worst >= t.oom_shmem_critical_fraction
        message = _kill_sentence(latest, snap.time)
        if len(kills) > 1:
            message += f"; {fmt_int(len(kills))} OOM kills in this group in the kernel's log"
        if latest.delegated_uid is not None:
            message += f" (a cgroup of user {latest.delegated_uid}: its name is that user's word)"
        if pinned:
            advice = (f"{_RECLAIM} The killed process held mostly shared memory, where CUDA's pinned memory"
                      f" is: its pinned buffers most likely filled the group. Raise the group's memory limit"
                      f" (the pod's resources.limits.memory, docker --memory, Slurm --mem) or pin less: cap"
                      f" pinned pools, pin only staging buffers that are reused for transfers; watch the"
                      f" group's pinned share (pinned-cgroup-share) when the job runs again.")
        else:
            advice = ("The group's memory ran out and the kernel killed a process in it. Shared memory (where"
                      " pinned memory is) was a small part of the killed process, so pinned memory was"
                      " likely not the main consumer; raise the group's memory limit or find what grew.")
        yield Found("critical" if pinned else "warning", message, advice, subject=latest.subject,
                    cgroup=latest.key, kind=latest.kind, oom_kills=len(kills), pid=latest.pid,
                    time=latest.time, memory_limit_bytes=latest.memory_limit_bytes,
                    limit_source=latest.limit_source, shmem_rss_bytes=latest.shmem_rss_bytes,
                    rss_bytes=latest.rss_bytes, shmem_fraction=worst, job=latest.job, step=latest.step,
                    delegated_uid=latest.delegated_uid)
