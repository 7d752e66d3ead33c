"""The live collector: host memory + per-process pinned scan + NVML, merged into one Snapshot (with
tracer reports and, where given, an attach's latest window).

Implements the ``Source`` protocol. NVML's slow calls run in the NVML collector's own background
threads, so ``snapshot()`` costs a /proc scan and a few sub-millisecond NVML calls. The latest probe
result kept by ``pinmon.model.probe_join`` (a measurement until a newer one, never replaced by a probe that
could not measure) joins every snapshot. NVIDIA GPUs on the PCI
bus are counted once (host/pci.py), so a snapshot without NVML says whether there are GPUs it cannot see.
"""
from __future__ import annotations

import os
import threading
import time

from ..limits import DEFAULT_OOM_LOOKBACK_S
from ..model import GpuProcess, HeldMemory, HostMemory, ProbeResult, ProcessIdentity, ProcessPinned, Snapshot
from ..model.probe_join import kept_probe, with_probe
from ..model.serial import evolve
from .attached import AttachedSource, merge_attached
from .cgroups.groups import GroupCollector
from .cgroups.oom_kills import OomKillReader
from .host.kmsg import KmsgReader
from .host.memory import HostMemoryReader
from .host.pci import count_nvidia_gpus
from .host.pinned_total import PinnedTotals, maps_pinned_total
from .processes.resident import CAPPED_TOTAL_NOTICE, cap_estimate, capped_totals
from .processes.scan import ProcessScanner, scan_notice
from .processes.vmpin_scan import VmPinScan
from .traced.bounds import Backing
from .traced.join import join_reports
from .traced.reader import read_all


class LiveCollector:
    live = True

    def __init__(self, interval_s: float = 1.0, nvml=None, use_nvml: bool = True,
                 host_root: str = "/", proc_root: str = "/proc", pids: list[int] | None = None,
                 counter_hz: float | None = None, prefer_gpm: bool = True,
                 sysfs_root: str | None = None, kernel_read_every_s: float | None = None,
                 oom_lookback_s: float = DEFAULT_OOM_LOOKBACK_S, attached: AttachedSource | None = None):
        self.interval_s = interval_s
        # An attach's latest window (pinmon.attach.Attacher, or one window someone ran): its copies and
        # allocations join the rows of the processes it attached (collect/attached.py).
        self.attached = attached
        sysfs_root = sysfs_root or os.path.join(host_root, "sys")
        self.scanner = ProcessScanner(proc_root=proc_root, pids=pids)
        # kernel_read_every_s: how old a reading of the kernel's pinned count may be reused (the
        # reader's default suits a monitor; a one-shot reading passes 0 for a fresh figure).
        self.pinned = PinnedTotals(host_root=host_root, proc_root=proc_root, kernel_read_every_s=kernel_read_every_s)
        self.vmpin = VmPinScan(proc_root)
        self.groups = GroupCollector(proc_root=proc_root, host_root=host_root)
        # pinmon's own cgroup limit through the groups' walker: one reader of the limits, one mountinfo
        self.host = HostMemoryReader(host_root, memory=self.groups.memory)
        # Memory cgroup OOM kills from the kernel's log (/dev/kmsg under host_root), the groups named
        # as live ones; a lookback of 0 leaves the log unread.
        self.oom = OomKillReader(self.groups, oom_lookback_s, KmsgReader(os.path.join(host_root, "dev/kmsg")))
        self._probe: ProbeResult | None = None
        self._lock = threading.Lock()
        self._nvml = None
        # Counted once: GPUs are not hot-plugged, and NVML, once failed, is not started again.
        self.nvidia_pci_gpus = count_nvidia_gpus(sysfs_root)
        if use_nvml:
            from .nvml import NvmlCollector

            self._nvml = NvmlCollector(nvml=nvml, counter_hz=counter_hz, prefer_gpm=prefer_gpm,
                                       sysfs_root=sysfs_root)
            self._nvml.start()

    def set_probe(self, result: ProbeResult | None) -> None:
        """Offer a probe result to the snapshots from now on (``kept_probe`` decides whether it replaces the held one)."""
        with self._lock:
            self._probe = kept_probe(self._probe, result)

    def snapshot(self) -> Snapshot:
        now = time.time()
        notices: list[str] = []
        host_fields, host_notices = self.host.read()
        notices += host_notices
        gpus: tuple = ()
        nvml_error: str | None = None
        if self._nvml is not None:
            gpus, gpu_notices = self._nvml.read()
            if not self._nvml.available:
                nvml_error = self._nvml.reason or "NVML is not available"
                gpu_notices = (nvml_notice(nvml_error, self.nvidia_pci_gpus),)
            notices += list(gpu_notices)
        mem_total = host_fields.get("mem_total_bytes")
        scan = self.scanner.scan(mem_total_bytes=mem_total)
        note = scan_notice(scan)
        if note:
            notices.append(note)
        # What the kernel shows: the scan's rows, before any report touches them, and VmPin (io_uring,
        # RDMA) of every process while the kernel counts pinned pages that the mappings do not explain.
        est_rows = cap_rows_to_ram(scan.processes, mem_total)
        pinned = maps_pinned_total(est_rows, self.scanner.estimate, host_fields.get("shmem_bytes"))
        kernel = self.pinned.read_kernel()
        vmpin = self.vmpin.read(scan.pids, None if kernel.pinned_bytes is None else kernel.pinned_bytes - pinned)
        explained = pinned + sum(vmpin.values())
        unexplained = None if kernel.pinned_bytes is None else max(0, kernel.pinned_bytes - explained)
        est_rows = with_vmpin(est_rows, vmpin, self.scanner.describe, self.scanner.only_pids)
        # In-process tracer reports fill in the rows of the CUDA processes they cover, within those
        # bounds and the GPUs' links.
        proc_root = self.scanner.proc_root
        traced = read_all(proc_root=proc_root, clean=proc_root == "/proc", uids=scan.uids)
        notices += traced.notices
        rows, report_notices = join_reports(est_rows, traced, {r.pid for r in scan.processes},
                                            self._backing(est_rows), unexplained, gpus,
                                            self.scanner.describe, self.scanner.only_pids)
        notices += report_notices
        if self.attached is not None:
            outcome = self.attached.latest()
            if outcome is None and not getattr(self.attached, "quiet_before_first", False):
                notices.append("attach: attaching (no window has ended yet)")
            rows, attach_notices = merge_attached(rows, outcome, self.scanner.describe, self.scanner.only_pids, gpus)
            notices += attach_notices
        processes = self.pinned.annotate(merge_gpu_processes(cap_rows_to_ram(rows, mem_total), gpus))
        processes, groups = self.groups.annotate(processes)
        oom_kills, oom_notices = self.oom.read()
        notices += oom_notices
        wc = write_combined_total(processes, mem_total, host_fields.get("mem_available_bytes"))
        pinned, wc, capped = capped_totals([pinned], [wc], mem_total)
        if capped:
            notices.append(f"host: {CAPPED_TOTAL_NOTICE}")
        # The kernel's exact count of pinned pages, and how much of it the mappings and VmPin explain.
        totals, total_notices = self.pinned.host_fields(kernel, explained, pinned, wc, host_fields)
        notices += total_notices
        host = HostMemory(**host_fields, pinned_bytes_est=pinned, write_combined_bytes_est=wc, **totals)
        with self._lock:
            probe = self._probe
        snap = Snapshot(time=now, host=host, gpus=tuple(gpus), processes=tuple(processes),
                        notices=tuple(notices), interval_s=self.interval_s,
                        source="live", nvidia_pci_gpus=self.nvidia_pci_gpus, nvml_error=nvml_error,
                        cgroups=groups, oom_kills=oom_kills)
        return with_probe(snap, probe)

    def _backing(self, est_rows: list[ProcessPinned]) -> dict[int, Backing]:
        """What the scan shows of each CUDA process, for the reports of those processes."""
        out = {}
        for r in est_rows:
            est = self.scanner.estimate(r.pid)
            out[r.pid] = Backing(r.held.pinned_bytes or 0, est.nvidiactl_mmap_bytes if est is not None else 0,
                                 r.held.write_combined_bytes or 0)
        return out

    def close(self) -> None:
        self.scanner.close()
        self.pinned.close()
        self.groups.close()
        self.oom.close()
        nvml, self._nvml = self._nvml, None
        if nvml is not None:
            nvml.close()

    def __enter__(self) -> LiveCollector:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def nvml_notice(reason: str, pci_gpus: int | None) -> str:
    """Why there is no GPU data: no GPU at all is fine; GPUs that NVML cannot reach are not."""
    if pci_gpus == 0:
        return f"no NVIDIA GPU found: none on the PCI bus (NVML: {reason})"
    if pci_gpus:
        return (f"no NVIDIA GPU monitoring: {pci_gpus} NVIDIA GPU{'s' if pci_gpus != 1 else ''} on the"
                f" PCI bus but NVML could not start: {reason}")
    return f"no NVIDIA GPU monitoring: {reason}"


def cap_rows_to_ram(rows: list[ProcessPinned], mem_total_bytes) -> list[ProcessPinned]:
    """No row above RAM, whatever its source (a tracer's report included); such a row is flagged."""
    if mem_total_bytes is None:
        return rows
    out = []
    for r in rows:
        held = r.held
        c = cap_estimate(held.pinned_bytes or 0, held.write_combined_bytes or 0, None, mem_total_bytes)
        if c.capped:
            r = evolve(r, held=evolve(
                held, pinned_bytes=None if held.pinned_bytes is None else c.pinned_bytes,
                write_combined_bytes=None if held.write_combined_bytes is None else c.write_combined_bytes,
                capped=True))
        out.append(r)
    return out


def with_vmpin(rows: list[ProcessPinned], vmpin: dict[int, int], describe,
               only_pids: list[int] | None = None) -> list[ProcessPinned]:
    """The rows with their VmPin from the full scan, and a row for each other process that has some
    (an io_uring or RDMA user that maps no CUDA memory)."""
    if not vmpin:
        return rows
    out = [evolve(r, held=evolve(r.held, vm_pinned_bytes=vmpin[r.pid])) if r.pid in vmpin else r for r in rows]
    have = {r.pid for r in rows}
    for pid in sorted(vmpin):
        if pid in have or (only_pids is not None and pid not in only_pids):
            continue
        name, user, cmdline = describe(pid)
        out.append(ProcessPinned(pid=pid, identity=ProcessIdentity(name=name, user=user, cmdline=cmdline),
                                 held=HeldMemory(vm_pinned_bytes=vmpin[pid])))
    return out


def write_combined_total(rows, mem_total_bytes: int | None, mem_available_bytes: int | None) -> int:
    """The rows' write-combined bytes in all, at most the memory in use (MemTotal - MemAvailable):
    they are the driver's pages, never available to anyone else."""
    total = sum(r.held.write_combined_bytes or 0 for r in rows)
    if mem_total_bytes is not None and mem_available_bytes is not None:
        total = min(total, max(0, mem_total_bytes - mem_available_bytes))
    return total


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
            r = evolve(r, placement=evolve(r.placement, gpu_indices=tuple(i for i, _ in entries),
                                           gpu_memory_bytes=sum(mem) if mem else None))
        out.append(r)
    return out
