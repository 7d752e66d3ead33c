"""The snapshot's pinned figures: the kernel's exact count, what the process rows explain, the rest.

The per-process rows (``/proc/PID/maps`` estimates, or a tracer's exact figures) say who holds pinned
memory; the kernel's FOLL_PIN count (``kernel_pins``) says how much is pinned in all. Here they are
joined into ``HostMemory``'s ``kernel_pinned_bytes`` (+ per node), ``pinned_bytes_total`` (the best
figure, with its source), ``unattributed_pinned_bytes`` and ``numa_nodes``, and the rows get their
NUMA placement (``numa``) and ``VmLck`` (``locked``).

What explains the count is what the kernel shows: the live scan's mappings, never a tracer's
report (a file its user wrote: ``collect/traced/bounds.py``), so no report can make pinned memory that no
process explains disappear.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from ...model import ProcessPinned
from ...units import fmt_bytes
from ..processes.locked import LockedReader
from ..processes.procmaps import PinnedEstimate, extents_bytes
from .kernel_pins import KernelPins, KernelPinsReader
from .numa import PinnedPlacement


def maps_pinned_total(rows: Iterable[ProcessPinned], estimate: Callable[[int], PinnedEstimate | None],
                      shmem_bytes: int | None) -> int:
    """Pinned bytes the live scan's rows (maps estimates, before any report) show in all: each piece
    of a ``/dev/zero`` object once over every process (a buffer two processes map is one buffer), no
    more than the rows (each capped to what its process has resident), and at most the host's
    ``Shmem`` (every page of such a mapping is a shmem page). Write-combined bytes are the driver's
    pages, which the kernel's pinned count does not hold."""
    rows = list(rows)
    row_sum = sum(r.held.pinned_bytes or 0 for r in rows)
    extents: set = set()
    for r in rows:
        est = estimate(r.pid)
        if est is not None:
            extents |= est.extents
    total = min(row_sum, extents_bytes(extents)) if extents else row_sum
    return total if shmem_bytes is None else min(total, shmem_bytes)


def pinned_figures(kernel: KernelPins, explained_bytes: int, pinned_est: int | None,
                   wc_est: int | None) -> dict:
    """The new ``HostMemory`` fields from the kernel's count, what the maps explain of it
    (``maps_pinned_total``) and the host's estimates."""
    if kernel.pinned_bytes is None:
        parts = [v for v in (pinned_est, wc_est) if v is not None]
        total = sum(parts) if parts else None
        return {"kernel_pinned_bytes": None, "kernel_pinned_bytes_by_node": None,
                "pinned_bytes_total": total, "pinned_bytes_source": "est." if total is not None else None,
                "unattributed_pinned_bytes": None, "numa_nodes": kernel.nodes}
    return {
        "kernel_pinned_bytes": kernel.pinned_bytes,
        "kernel_pinned_bytes_by_node": kernel.by_node,
        "pinned_bytes_total": kernel.pinned_bytes + (wc_est or 0),
        "pinned_bytes_source": "kernel",
        "unattributed_pinned_bytes": max(0, kernel.pinned_bytes - explained_bytes),
        "numa_nodes": kernel.nodes,
    }


def host_wide_notice(kernel_bytes: int | None, cgroup_limit: int | None,
                     mem_total: int | None) -> str | None:
    """Inside a memory-limited cgroup the kernel's count still covers the whole host: say so."""
    if kernel_bytes is None or cgroup_limit is None or mem_total is None or cgroup_limit >= mem_total:
        return None
    return (f"pinned: the kernel's count ({fmt_bytes(kernel_bytes)}) is host-wide (/proc/vmstat is not"
            f" namespaced): it includes memory pinned outside this cgroup, whose limit"
            f" ({fmt_bytes(cgroup_limit)}) is below MemTotal ({fmt_bytes(mem_total)})")


class PinnedTotals:
    """The live collector's part for pinned totals: reads the kernel's count each snapshot."""

    def __init__(self, host_root: str = "/", proc_root: str = "/proc",
                 clock: Callable[[], float] = time.monotonic, kernel_read_every_s: float | None = None):
        self.kernel = KernelPinsReader(host_root, clock=clock) if kernel_read_every_s is None else \
            KernelPinsReader(host_root, clock=clock, min_interval_s=kernel_read_every_s)
        self.placement = PinnedPlacement(proc_root, clock=clock)
        self.locked = LockedReader(proc_root, clock=clock)

    def annotate(self, processes: Iterable[ProcessPinned]) -> list[ProcessPinned]:
        """Rows with their VmLck and, on multi-node hosts, their pinned pages per node."""
        rows = self.locked.annotate(processes)
        return self.placement.annotate(rows, self.kernel.nodes())

    def read_kernel(self) -> KernelPins:
        return self.kernel.read()

    def host_fields(self, kernel: KernelPins, explained_bytes: int, pinned_est: int | None,
                    wc_est: int | None, host: dict) -> tuple[dict, list[str]]:
        """(new HostMemory fields, notices); ``host`` holds the fields already read (cgroup limit)."""
        fields = pinned_figures(kernel, explained_bytes, pinned_est, wc_est)
        note = host_wide_notice(kernel.pinned_bytes, host.get("cgroup_limit_bytes"), host.get("mem_total_bytes"))
        return fields, [note] if note else []

    def close(self) -> None:
        self.kernel.close()
