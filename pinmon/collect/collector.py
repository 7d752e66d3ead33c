"""The live collector: host memory + per-process pinned scan + NVML, merged into one Snapshot.

Implements the ``Source`` protocol. NVML's slow calls run in the NVML collector's own background
threads, so ``snapshot()`` costs a /proc scan and a few sub-millisecond NVML calls. The latest probe
result (if any) is attached to every snapshot until a newer one replaces it.
"""
from __future__ import annotations

import dataclasses
import os
import threading
import time
from typing import Optional

from ..model import GpuProcess, HostMemory, ProbeResult, ProcessPinned, Snapshot
from .host import HostMemoryReader
from .pinned_total import PinnedTotals
from .processes import ProcessScanner, scan_notice
from .traced import merge_traced, read_all


class LiveCollector:
    live = True

    def __init__(self, interval_s: float = 1.0, nvml=None, use_nvml: bool = True,
                 host_root: str = "/", proc_root: str = "/proc", pids: Optional[list[int]] = None,
                 counter_hz: Optional[float] = None, prefer_gpm: bool = True):
        self.interval_s = interval_s
        self.host_root = host_root
        self.host = HostMemoryReader(host_root)
        self.scanner = ProcessScanner(proc_root=proc_root, pids=pids)
        self.pinned = PinnedTotals(host_root=host_root, proc_root=proc_root)
        self._probe: Optional[ProbeResult] = None
        self._lock = threading.Lock()
        self._nvml = None
        self._nvml_notice: Optional[str] = None
        if use_nvml:
            from .nvml import NvmlCollector

            self._nvml = NvmlCollector(nvml=nvml, counter_hz=counter_hz, prefer_gpm=prefer_gpm,
                                       sysfs_root=os.path.join(host_root, "sys"))
            self._nvml.start()

    def set_probe(self, result: Optional[ProbeResult]) -> None:
        with self._lock:
            self._probe = result

    def snapshot(self) -> Snapshot:
        now = time.time()
        notices: list[str] = []
        host_fields, host_notices = self.host.read()
        notices += host_notices
        gpus: tuple = ()
        if self._nvml is not None:
            gpus, gpu_notices = self._nvml.read()
            notices += list(gpu_notices)
        scan = self.scanner.scan()
        note = scan_notice(scan)
        if note:
            notices.append(note)
        # In-process tracer reports replace the /proc estimates of the pids they cover.
        proc_root = self.scanner.proc_root
        traced = read_all(proc_root=proc_root, clean=proc_root == "/proc")
        rows = merge_traced(scan.processes, traced, self.scanner.describe, self.scanner.only_pids)
        processes = self.pinned.annotate(merge_gpu_processes(rows, gpus))
        pinned = sum(p.pinned_bytes or 0 for p in processes)
        wc = sum(p.write_combined_bytes or 0 for p in processes)
        # The kernel's exact count of pinned pages, and how much of it the rows explain.
        totals, total_notices = self.pinned.host_fields(processes, pinned, wc, host_fields)
        notices += total_notices
        host = HostMemory(**host_fields, pinned_bytes_est=pinned, write_combined_bytes_est=wc, **totals)
        with self._lock:
            probe = self._probe
        return Snapshot(time=now, host=host, gpus=tuple(gpus), processes=tuple(processes),
                        probe=probe, notices=tuple(notices), interval_s=self.interval_s,
                        source="live")

    def close(self) -> None:
        self.pinned.close()
        nvml, self._nvml = self._nvml, None
        if nvml is not None:
            nvml.close()

    def __enter__(self) -> "LiveCollector":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def merge_gpu_processes(rows: list[ProcessPinned], gpus) -> list[ProcessPinned]:
    """Attach NVML's per-GPU memory of each compute process to its pinned row."""
    by_pid: dict[int, list[tuple[int, GpuProcess]]] = {}
    for g in gpus:
        for gp in g.processes:
            by_pid.setdefault(gp.pid, []).append((g.index, gp))
    out = []
    for r in rows:
        entries = by_pid.get(r.pid)
        if entries:
            mem = [gp.gpu_memory_bytes for _, gp in entries if gp.gpu_memory_bytes is not None]
            r = dataclasses.replace(r, gpu_indices=tuple(i for i, _ in entries),
                                    gpu_memory_bytes=sum(mem) if mem else None)
        out.append(r)
    return out
