"""Per-group series: each container's, pod's or job's pinned memory, memory limit, usage and OOM kills.

A group's memory limit is where the OOM killer acts on its pinned pages, so alerts compare
``pinmon_cgroup_held_bytes`` (``HeldMemory.bytes``: its processes' pinned, write-combined and VmPin
bytes, the figure ``pinned-cgroup-share`` compares) with ``pinmon_cgroup_memory_limit_bytes``; the
parts are ``pinmon_cgroup_pinned_bytes``, ``..._write_combined_bytes`` and ``..._vm_pinned_bytes``, as
for a process. Labels: ``cgroup`` (the group's key, shortened: ``group_id``), ``kind``, and where the
node says them ``pod``, ``namespace``, ``container``, and ``slurm_job`` (not ``job``: Prometheus sets
``job`` on every series it scrapes). Cardinality is bounded as for processes: the top N groups by held
bytes get series; the rest are summed into ``cgroup="other"`` for the held and pinned bytes (limits and
OOM counts of a sum mean nothing).
"""
from __future__ import annotations

from ...model import Cgroup, summed
from ..state import StateView
from .base import Counter, Gauge, emit

LABELS = ("cgroup", "kind", "pod", "namespace", "container", "slurm_job")


LABEL_ID_CHARS = 64
SHORT_ID = 12  # as docker ps and crictl show container ids


def group_id(g: Cgroup) -> str:
    """The ``cgroup`` label: the group's key, short enough to survive the 64-character cut whole
    (container ids shortened as ``docker ps`` shows them; a long path keeps its head and its tail,
    where its leaf names it)."""
    o = g.owner
    if g.kind == "pod" and o.pod_uid:
        return f"pod/{o.pod_uid}/{(o.container_id or '-')[:SHORT_ID]}"
    if g.kind in ("docker", "podman") and o.container_id:
        return f"{g.kind}/{o.container_id[:SHORT_ID]}"
    if len(g.key) <= LABEL_ID_CHARS:
        return g.key
    return g.key[:20] + "…" + g.key[-(LABEL_ID_CHARS - 21):]


def group_labels(g: Cgroup) -> tuple:
    o = g.owner
    return (group_id(g), g.kind, o.pod or "", o.namespace or "", o.container or "", o.job or "")


def families(view: StateView, top: int) -> list:
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
    seen: set = set()
    chosen = []
    for g in groups:
        if g.key not in seen and len(chosen) < max(0, top):
            seen.add(g.key)
            chosen.append(g)
    for g in chosen:
        lab = group_labels(g)
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
    return emit(held, pinned, wc, vmpin, limit, current, ooms, count)
