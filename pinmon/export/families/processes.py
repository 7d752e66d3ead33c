"""Per-process pinned memory with bounded cardinality.

The top N processes by held bytes (``HeldMemory.bytes``: pinned, write-combined and VmPin, the figure
the views sort by) get a series each (labels pid, name, user, source, and where the process is in
one, its group's pod, namespace, container and slurm_job); every other process is summed into one
``pid="other"`` series, so a box running thousands of short CUDA jobs cannot flood Prometheus with
series. The "other" series is always present (0 when empty), so sums and shares over it are stable.
A pid listed twice (a damaged recording) counts once: its first row.
"""
from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.core import Metric

from ...limits import DEFAULT_TOP_PROCESSES
from ...model import ProcessPinned, summed
from ..state import StateView, unique_processes
from .base import Gauge, emit

LABELS = ("pid", "name", "user", "source", "pod", "namespace", "container", "slurm_job")
DEFAULT_TOP = DEFAULT_TOP_PROCESSES


def split_top(processes: Sequence[ProcessPinned], top: int) -> tuple[list[ProcessPinned], list[ProcessPinned]]:
    """(top ``top`` rows by held bytes, the rest); rows holding nothing known go to the rest."""
    known = [p for p in processes if p.held.bytes is not None]
    # Ties broken by pid, so the chosen set does not flicker between scrapes of equal data.
    known.sort(key=lambda p: (-(p.held.bytes or 0), p.pid))
    chosen = known[:max(0, top)]
    ids = {id(p) for p in chosen}
    return chosen, [p for p in processes if id(p) not in ids]


def families(view: StateView, top: int = DEFAULT_TOP) -> list[Metric]:
    snap = view.snapshot
    if snap is None:
        return []
    held = Gauge("process_held_bytes", "pinned memory a process holds in all: pinned, write-combined and VmPin"
                 " (the figure pinmon's tables show and sort by); pid=\"other\" sums the rest", LABELS)
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
        who = p.identity
        g = groups.get(who.cgroup) if who.cgroup else None
        o = g.owner if g is not None else None
        lab = (p.pid, who.name, who.user, p.source, *(("", "", "", "") if o is None else
                                                      (o.pod or "", o.namespace or "", o.container or "", o.job or "")))
        held.add(lab, p.held.bytes)
        pinned.add(lab, p.held.pinned_bytes)
        wc.add(lab, p.held.write_combined_bytes)
        vmpin.add(lab, p.held.vm_pinned_bytes)
    other = ("other", "", "", "", "", "", "", "")
    others = summed(p.held for p in rest)
    held.add(other, others.bytes or 0)
    pinned.add(other, others.pinned_bytes or 0)
    wc.add(other, others.write_combined_bytes or 0)
    vmpin.add(other, others.vm_pinned_bytes or 0)
    count.add((), len(rows))
    return emit(held, pinned, wc, vmpin, count)
