"""Per-group series: each container's, pod's or job's pinned memory, memory limit, usage and OOM kills,
and the memory cgroup OOM kills in the kernel's log (whose groups may be gone).

A group's memory limit is where the OOM killer acts on its pinned pages, so alerts compare
``pinmon_cgroup_held_bytes`` (``HeldMemory.bytes``: its processes' pinned, write-combined and VmPin
bytes, the figure ``pinned-cgroup-share`` compares) with ``pinmon_cgroup_memory_limit_bytes``; the
parts are ``pinmon_cgroup_pinned_bytes``, ``..._write_combined_bytes`` and ``..._vm_pinned_bytes``, as
for a process. Labels: ``cgroup`` (the group's key, shortened: ``group_id``), ``kind``, and where the
node says them ``pod``, ``namespace``, ``container``, and ``slurm_job`` (not ``job``: Prometheus sets
``job`` on every series it scrapes). Cardinality is bounded as for processes: the top N groups by held
bytes get series; the rest are summed into ``cgroup="other"`` for the held and pinned bytes (limits and
OOM counts of a sum mean nothing).

OOM kills from the kernel's log (``Snapshot.oom_kills``, within the lookback) are served per group
with the same labels: ``pinmon_oom_kills_recent`` (how many, a gauge: a kill leaves it when it grows
older than the lookback), ``pinmon_oom_kill_last_time_seconds`` and ``pinmon_oom_kill_shmem_bytes``
(the latest kill's time and shared memory). The top N groups by kills get series, the rest are summed
into ``cgroup="other"``; a kill whose cgroup the log does not name is ``cgroup="unknown"``.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable

from prometheus_client.core import Metric

from ...model import Cgroup, GroupOwner, OomKill, summed
from ..state import StateView
from .base import Counter, Gauge, emit

LABELS = ("cgroup", "kind", "pod", "namespace", "container", "slurm_job")


LABEL_ID_CHARS = 64
SHORT_ID = 12  # as docker ps and crictl show container ids


def group_id(g: Cgroup) -> str:
    """The ``cgroup`` label: the group's key, short enough to survive the 64-character cut whole
    (container ids shortened as ``docker ps`` shows them; a long path keeps its head and its tail,
    where its leaf names it). A group in a user's delegated subtree starts with ``user/UID/``: it
    never takes the label of the pod or container its path names."""
    o = g.owner
    if o.delegated_uid is not None:
        user = f"user/{o.delegated_uid}/"
        if g.kind == "pod" and o.pod_uid:
            return f"{user}pod/{o.pod_uid[:8]}/{(o.container_id or '-')[:SHORT_ID]}"
    else:
        user = ""
        if g.kind == "pod" and o.pod_uid:
            return f"pod/{o.pod_uid}/{(o.container_id or '-')[:SHORT_ID]}"
    if g.kind in ("docker", "podman") and o.container_id:
        return f"{user}{g.kind}/{o.container_id[:SHORT_ID]}"
    if g.kind == "slurm" and o.job:
        return f"{user}slurm/{o.job}/{o.step or '-'}"
    if len(g.key) <= LABEL_ID_CHARS:
        return g.key
    return g.key[:20] + "…" + g.key[-(LABEL_ID_CHARS - 21):]


def group_ids(groups: Iterable[Cgroup]) -> dict[str, str]:
    """Each group's ``cgroup`` label, one label per group: two groups whose ids meet (one container's
    id in two cgroups, which only root can make) each get a digest of their key."""
    ids = {g.key: group_id(g) for g in groups}
    count: dict[str, int] = {}
    for v in ids.values():
        count[v] = count.get(v, 0) + 1
    for key, v in ids.items():
        if count[v] > 1:
            ids[key] = f"{v[:LABEL_ID_CHARS - 9]}#{hashlib.sha256(key.encode()).hexdigest()[:8]}"
    return ids


def group_labels(g: Cgroup, ids: dict[str, str] | None = None) -> tuple[str, str, str, str, str, str]:
    gid = ids.get(g.key, group_id(g)) if ids is not None else group_id(g)
    o = g.owner
    return (gid, g.kind, o.pod or "", o.namespace or "", o.container or "", o.job or "")


def oom_families(kills: Iterable[OomKill], top: int) -> list[Metric]:
    recent = Gauge("oom_kills_recent", "memory cgroup OOM kills in the kernel's log within the lookback"
                   " (default 24 h), by group; the group may be gone; cgroup=\"other\" sums the rest", LABELS)
    last = Gauge("oom_kill_last_time_seconds", "Unix time of the group's latest OOM kill in the kernel's log", LABELS)
    shmem = Gauge("oom_kill_shmem_bytes", "shared memory (where CUDA's pinned memory is) resident in the"
                  " process at the group's latest OOM kill", LABELS)
    by_group: dict[str, list[OomKill]] = {}
    for k in kills:
        by_group.setdefault(k.key or "unknown", []).append(k)
    ranked = sorted(by_group.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    chosen, rest = ranked[:max(0, top)], ranked[max(0, top):]
    ids = group_ids([Cgroup(key=key, kind=ks[0].kind, name=ks[0].name,
                            owner=GroupOwner(pod_uid=ks[0].pod_uid, container_id=ks[0].container_id, job=ks[0].job,
                                             step=ks[0].step, delegated_uid=ks[0].delegated_uid))
                     for key, ks in chosen if key != "unknown"])
    for key, ks in chosen:
        latest = max(ks, key=lambda k: (k.time, k.seq or 0))
        gid = ids.get(key, "unknown")
        lab = (gid, latest.kind, latest.pod or "", latest.namespace or "", latest.container or "", latest.job or "")
        recent.add(lab, len(ks))
        last.add(lab, latest.time)
        shmem.add(lab, latest.shmem_rss_bytes)
    if rest:
        recent.add(("other", "", "", "", "", ""), sum(len(ks) for _, ks in rest))
    return emit(recent, last, shmem)



def families(view: StateView, top: int) -> list[Metric]:
    snap = view.snapshot
    if snap is None:
        return []
    held = Gauge("cgroup_held_bytes", "pinned memory a container, pod or job holds in all: its processes'"
                 " pinned, write-combined and VmPin bytes, what pinned-cgroup-share compares with its limit;"
                 " cgroup=\"other\" sums the rest", LABELS)
    pinned = Gauge("cgroup_pinned_bytes", "CUDA pinned host memory of a group's processes (est. or traced;"
                   " VmPin apart); cgroup=\"other\" sums the rest", LABELS)
    wc = Gauge("cgroup_write_combined_bytes", "write-combined pinned memory of a group's processes", LABELS)
    vmpin = Gauge("cgroup_vm_pinned_bytes", "VmPin (io_uring, RDMA) of a group's processes", LABELS)
    limit = Gauge("cgroup_memory_limit_bytes", "the tightest memory limit on the group's cgroup path"
                  " (absent: none)", LABELS)
    current = Gauge("cgroup_memory_current_bytes", "the group's memory usage (memory.current / usage_in_bytes)", LABELS)
    ooms = Counter("cgroup_oom_kills_total", "OOM kills in the group, as the kernel counts them", LABELS)
    groups = sorted(snap.cgroups, key=lambda g: (-(g.held.bytes or 0), g.key))
    seen: set[str] = set()
    chosen: list[Cgroup] = []
    for g in groups:
        if g.key not in seen and len(chosen) < max(0, top):
            seen.add(g.key)
            chosen.append(g)
    ids = group_ids(chosen)
    for g in chosen:
        lab = group_labels(g, ids)
        held.add(lab, g.held.bytes)
        pinned.add(lab, g.held.pinned_bytes)
        wc.add(lab, g.held.write_combined_bytes)
        vmpin.add(lab, g.held.vm_pinned_bytes)
        limit.add(lab, g.limit.limit_bytes)
        current.add(lab, g.limit.current_bytes)
        ooms.add(lab, g.limit.oom_kills)
    others = summed(g.held for g in groups if g.key not in seen)
    held.add(("other", "", "", "", "", ""), others.bytes or 0)
    pinned.add(("other", "", "", "", "", ""), others.pinned_bytes or 0)
    count = Gauge("cgroups", "groups (containers, pods, jobs) of the processes in the last scan")
    count.add((), len(snap.cgroups))
    return emit(held, pinned, wc, vmpin, limit, current, ooms, count) + oom_families(snap.oom_kills, top)
