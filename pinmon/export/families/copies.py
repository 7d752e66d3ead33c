"""Copy rates: per process (traced or attached, ``pinmon export --attach``) and how much of each GPU's
link traffic they explain (``model/traffic.py``).

``process_copy_bytes_per_second`` has one series per process, direction and host memory kind for the
top N processes by copy rate (labels pid, name, user, source, instrument, direction, memory); the rest
are summed per direction and kind as ``pid="other"``, so a box of many CUDA processes cannot flood
Prometheus. A process's window is its instrument's (an attach's window, the tracer's last 5 s).
``gpu_link_copies_bytes_per_second`` is the copies placed on each GPU's link by direction (RX: host to
device), ``copies_gpu_unknown_bytes_per_second`` the copies whose GPU cannot be known. Nothing is
exported while no process has measured copies.
"""
from __future__ import annotations

from prometheus_client.core import Metric

from ...model.kinds import DIRECTIONS, HOST_MEMORY_KINDS
from ...model.traffic import explain_traffic
from ..state import StateView, unique_gpus, unique_processes
from .base import Gauge, emit
from .gpu import LABELS as GPU_LABELS
from .gpu import gpu_labels
from .processes import DEFAULT_TOP

LABELS = ("pid", "name", "user", "source", "instrument", "direction", "memory")


def families(view: StateView, top: int = DEFAULT_TOP) -> list[Metric]:
    snap = view.snapshot
    if snap is None:
        return []
    rows = [p for p in unique_processes(snap.processes) if p.copies is not None and p.copies.stats]
    if not rows:
        return []
    rate = Gauge("process_copy_bytes_per_second", "host<->device copies of a process over its instrument's"
                 " window, by direction and host memory kind (traced or attached processes); pid=\"other\""
                 " sums the rest", LABELS)
    rows.sort(key=lambda p: (-(p.copies.bytes_per_s() or 0.0) if p.copies else 0.0, p.pid))
    chosen, rest = rows[:max(0, top)], rows[max(0, top):]
    for p in chosen:
        assert p.copies is not None
        for s in p.copies.stats:
            rate.add((p.pid, p.identity.name, p.identity.user, p.source, p.copies.instrument, s.direction, s.memory),
                     s.bytes_per_s)
    for d in DIRECTIONS:
        for m in HOST_MEMORY_KINDS:
            total = sum((s.bytes_per_s or 0.0) for p in rest if p.copies is not None for s in p.copies.stats
                        if s.direction == d and s.memory == m)
            if rest and total:
                rate.add(("other", "", "", "", "", d, m), total)
    explained = explain_traffic(snap)
    link = Gauge("gpu_link_copies_bytes_per_second", "the measured copies on a GPU's link by direction (h2d: RX,"
                 " d2h: TX), to set against gpu_pcie_*_bytes_per_second", GPU_LABELS + ("direction",))
    gpus = {g.index: g for g in unique_gpus(snap.gpus)}
    for x in explained.links:
        g = gpus.get(x.gpu_index)
        if g is not None:
            link.add(gpu_labels(g) + (x.direction,), x.explained_bytes_per_s)
    unknown = Gauge("copies_gpu_unknown_bytes_per_second", "measured copies whose GPU cannot be known (a process"
                    " on several GPUs, or one NVML does not list), by direction", ("direction",))
    for d in DIRECTIONS:
        unknown.add((d,), sum(s.bytes_per_s for s in explained.unplaced if s.direction == d))
    return emit(rate, link, unknown)
