"""Per-process pinned and write-combined memory with bounded cardinality.

The top N processes by pinned bytes get a series each (labels pid, name, user, source, and where the
process is in one, its group's pod, namespace, container and slurm_job); every other
process is summed into one ``pid="other"`` series, so a box running thousands of short CUDA jobs
cannot flood Prometheus with series. The "other" series is always present (0 when empty), so sums
and shares over it are stable. A pid listed twice (a damaged recording) counts once: its first row.
"""
from __future__ import annotations

from ..state import StateView, unique_processes
from .base import Gauge, emit

LABELS = ("pid", "name", "user", "source", "pod", "namespace", "container", "slurm_job")
DEFAULT_TOP = 10


def _held(p) -> int:
    return (p.pinned_bytes or 0) + (p.vm_pinned_bytes or 0)


def split_top(processes, top: int):
    """(top ``top`` rows by pinned bytes and VmPin, the rest); rows with neither known go to the rest."""
    known = [p for p in processes if p.pinned_bytes is not None or p.vm_pinned_bytes is not None]
    # Ties broken by pid, so the chosen set does not flicker between scrapes of equal data.
    known.sort(key=lambda p: (-_held(p), p.pid))
    chosen = known[:max(0, top)]
    ids = {id(p) for p in chosen}
    return chosen, [p for p in processes if id(p) not in ids]


def families(view: StateView, top: int = DEFAULT_TOP) -> list:
    snap = view.snapshot
    if snap is None:
        return []
    pinned = Gauge("process_pinned_bytes", "CUDA pinned host memory of a process (source est.: from "
                   "/proc/PID/maps; traced: from an in-process tracer); pid=\"other\" sums the rest", LABELS)
    wc = Gauge("process_write_combined_bytes", "write-combined pinned memory of a process; pid=\"other\" "
               "sums the rest", LABELS)
    vmpin = Gauge("process_vm_pinned_bytes", "VmPin of a process: pages pinned through the kernel's own"
                  " accounting (io_uring, RDMA); pid=\"other\" sums the rest", LABELS)
    count = Gauge("processes", "processes holding pinned memory in the last scan (all, not only the exported top N)")
    rows = unique_processes(snap.processes)  # a repeated pid would give duplicate series: first kept
    groups = {g.key: g for g in snap.cgroups}
    chosen, rest = split_top(rows, top)
    for p in chosen:
        g = groups.get(p.cgroup) if p.cgroup else None
        lab = (p.pid, p.name, p.user, p.source, *(("", "", "", "") if g is None else
                                                   (g.pod or "", g.namespace or "", g.container or "", g.job or "")))
        pinned.add(lab, p.pinned_bytes)
        wc.add(lab, p.write_combined_bytes)
        vmpin.add(lab, p.vm_pinned_bytes)
    other = ("other", "", "", "", "", "", "", "")
    pinned.add(other, sum(p.pinned_bytes or 0 for p in rest))
    wc.add(other, sum(p.write_combined_bytes or 0 for p in rest))
    vmpin.add(other, sum(p.vm_pinned_bytes or 0 for p in rest))
    count.add((), len(rows))
    return emit(pinned, wc, vmpin, count)
