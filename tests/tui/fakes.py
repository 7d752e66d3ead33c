"""Deterministic stand-ins for the app's collaborators: sources, advisor, probe runner, recorder.

The numbers look like a two-GPU H200 box: GPU 0 runs at Gen5 x16, GPU 1 has trained down to
Gen4 x8 while moving ~12 GB/s (degraded), host RAM 1 TiB with 420 GiB pinned.
"""
from __future__ import annotations

import threading
from typing import Optional, Sequence

from pinmon.model import (Finding, Gpu, GpuProcess, HostMemory, Link, Pcie, ProbeMeasurement, ProbeResult,
                          ProcessPinned, Snapshot)

GIB = 1 << 30
MIB = 1 << 20
T0 = 1_780_000_000.0  # fixed epoch seconds: the header time comes from here, never the wall clock
GEN5_X16 = 63.0e9
GEN4_X8 = 15.75e9


def make_snapshot(i: int = 0, *, source: str = "live", interval_s: float = 1.0,
                  probe: Optional[ProbeResult] = None) -> Snapshot:
    # Simple integer patterns, so every run and every machine sees the same numbers.
    wave = (i * 7) % 10
    gpus = (
        Gpu(index=0, name="NVIDIA H200", uuid="GPU-0000aaaa", pci_bus_id="00000000:17:00.0",
            link=Link(gen=5, gen_max=5, width=16, width_max=16, theoretical_bytes_per_s=GEN5_X16,
                      max_theoretical_bytes_per_s=GEN5_X16),
            pcie=Pcie(rx_bytes_per_s=40e9 + wave * 1e9, tx_bytes_per_s=2e9 + wave * 0.1e9, method="counters",
                      replay_delta=0, recovery_delta=0, error_delta=0,
                      counter_deltas={"replay": 0, "l0_to_recovery": 0, "bad_tlp": 0}),
            memory_total_bytes=141 * GIB, memory_used_bytes=96 * GIB, cpu_affinity="0-47", numa_node=0,
            processes=(GpuProcess(pid=4242, gpu_memory_bytes=80 * GIB), GpuProcess(pid=5151, gpu_memory_bytes=16 * GIB))),
        Gpu(index=1, name="NVIDIA H200", uuid="GPU-1111bbbb", pci_bus_id="00000000:9A:00.0",
            link=Link(gen=4, gen_max=5, width=8, width_max=16, theoretical_bytes_per_s=GEN4_X8,
                      max_theoretical_bytes_per_s=GEN5_X16),
            pcie=Pcie(rx_bytes_per_s=12e9 + wave * 0.2e9, tx_bytes_per_s=0.5e9, method="sampled",
                      replay_delta=2, recovery_delta=1, error_delta=0,
                      counter_deltas={"replay": 2, "l0_to_recovery": 1, "bad_tlp": 0}),
            memory_total_bytes=141 * GIB, memory_used_bytes=40 * GIB, cpu_affinity="48-95", numa_node=1,
            processes=(GpuProcess(pid=6060, gpu_memory_bytes=40 * GIB),)),
    )
    host = HostMemory(hostname="gpu-node-17", mem_total_bytes=1024 * GIB, mem_available_bytes=300 * GIB,
                      effective_mem_limit_bytes=1024 * GIB, cgroup_limit_bytes=None, swap_used_bytes=0,
                      shmem_bytes=12 * GIB, mlocked_bytes=0, pinned_bytes_est=420 * GIB,
                      write_combined_bytes_est=2 * GIB, memlock_limit_bytes=None, memlock_unlimited=True)
    procs = (
        ProcessPinned(pid=4242, name="python", user="alice", cmdline="python train.py --bs 512",
                      pinned_bytes=300 * GIB, write_combined_bytes=1 * GIB, pinned_mappings=1200,
                      mappings_churn=40 + wave, gpu_memory_bytes=80 * GIB, gpu_indices=(0,)),
        ProcessPinned(pid=5151, name="dataloader", user="alice", cmdline="python -m loader --workers 16",
                      pinned_bytes=100 * GIB, write_combined_bytes=0, pinned_mappings=64, mappings_churn=0,
                      gpu_memory_bytes=16 * GIB, gpu_indices=(0,)),
        ProcessPinned(pid=6060, name="infer", user="bob", cmdline="./infer --model llama", source="traced",
                      pinned_bytes=20 * GIB, write_combined_bytes=1 * GIB, pinned_mappings=8, mappings_churn=0,
                      gpu_memory_bytes=40 * GIB, gpu_indices=(1,)),
        ProcessPinned(pid=7070, name="jupyter", user="carol", cmdline="jupyter-lab",
                      pinned_bytes=256 * MIB, write_combined_bytes=None, pinned_mappings=1, mappings_churn=None,
                      gpu_memory_bytes=None),
    )
    return Snapshot(time=T0 + i * interval_s, host=host, gpus=gpus, processes=procs, probe=probe,
                    interval_s=interval_s, source=source)


def make_probe_result(kind: str = "quick", t: float = T0) -> ProbeResult:
    sizes = (64 * MIB,) if kind == "quick" else (1 * MIB, 16 * MIB, 64 * MIB)
    ms = []
    for size in sizes:
        scale = min(1.0, size / (64 * MIB) + 0.5)
        ms += [ProbeMeasurement("copy", "pinned", size, "h2d", 52.0e9 * scale, repeats=5),
               ProbeMeasurement("copy", "pageable", size, "h2d", 18.0e9 * scale, repeats=5),
               ProbeMeasurement("copy", "pinned", size, "d2h", 54.0e9 * scale, repeats=5),
               ProbeMeasurement("copy", "pageable", size, "d2h", 15.0e9 * scale, repeats=5)]
    ms.append(ProbeMeasurement("alloc", "pinned", 64 * MIB, seconds=0.012, repeats=3))
    return ProbeResult(time=t, gpu_index=0, kind=kind, link_theoretical_bytes_per_s=GEN5_X16,
                       duration_s=1.5, max_pinned_bytes=256 * MIB, measurements=tuple(ms))


class FakeSource:
    """Endless live-like source; ``n`` snapshots then None when ``finite``."""

    def __init__(self, live: bool = True, n: Optional[int] = None, interval_s: float = 1.0,
                 probe_in_snapshots: bool = False):
        self.live = live
        self.n = n
        self.interval_s = interval_s
        self.calls = 0
        self.closed = False
        self.probe_in_snapshots = probe_in_snapshots
        self.notices: list[str] = []

    def snapshot(self) -> Optional[Snapshot]:
        if self.n is not None and self.calls >= self.n:
            return None
        i = self.calls
        self.calls += 1
        probe = make_probe_result(t=T0) if self.probe_in_snapshots else None
        return make_snapshot(i, source="live" if self.live else "replay", interval_s=self.interval_s, probe=probe)

    def close(self) -> None:
        self.closed = True


class NoGpuSource(FakeSource):
    def snapshot(self) -> Optional[Snapshot]:
        self.calls += 1
        host = HostMemory(hostname="laptop", mem_total_bytes=16 * GIB, mem_available_bytes=9 * GIB,
                          effective_mem_limit_bytes=16 * GIB, pinned_bytes_est=0, write_combined_bytes_est=0,
                          shmem_bytes=GIB, mlocked_bytes=0, memlock_limit_bytes=8 * MIB, memlock_unlimited=False)
        return Snapshot(time=T0 + self.calls, host=host, notices=("no NVIDIA GPU found: NVML library not found",),
                        interval_s=1.0)


class FlakySource(FakeSource):
    """Raises on every ``fail_every``-th call, like a collector hitting a transient /proc error."""

    def __init__(self, fail_every: int = 2, **kw):
        super().__init__(**kw)
        self.fail_every = fail_every
        self.attempts = 0

    def snapshot(self) -> Optional[Snapshot]:
        self.attempts += 1
        if self.attempts % self.fail_every == 0:
            raise OSError("cannot read /proc/4242/maps")
        return super().snapshot()


def fake_advisor(history: Sequence[Snapshot]) -> list[Finding]:
    if not history:
        return []
    s = history[-1]
    out = []
    h = s.host
    if h.pinned_bytes_est and h.effective_mem_limit_bytes:
        share = h.pinned_bytes_est / h.effective_mem_limit_bytes
        if share >= 0.4:
            out.append(Finding(rule="pinned_share_high", severity="critical" if share >= 0.5 else "warning",
                               subject="host", message=f"pinned memory is {share:.0%} of effective RAM",
                               advice="cap pinned buffers (e.g. DataLoader pin_memory with fewer workers)",
                               values={"pinned_bytes": h.pinned_bytes_est, "share": share}))
    for g in s.gpus:
        if g.link.gen is not None and g.link.gen_max is not None and g.link.gen < g.link.gen_max:
            out.append(Finding(rule="link_degraded", severity="warning", subject=f"GPU {g.index}",
                               message=f"GPU {g.index} link at Gen{g.link.gen} x{g.link.width}"
                                       f" under load (max Gen{g.link.gen_max} x{g.link.width_max})",
                               advice="reseat the card or check the riser and BIOS PCIe settings",
                               values={"gen": g.link.gen, "gen_max": g.link.gen_max}))
    for p in s.processes:
        if (p.mappings_churn or 0) > 30:
            out.append(Finding(rule="pinned_churn", severity="info", subject=f"pid {p.pid}",
                               message=f"pid {p.pid} ({p.name}) maps and unmaps pinned buffers"
                                       f" ({p.mappings_churn} per interval)",
                               advice="allocate pinned buffers once and reuse them",
                               values={"churn": p.mappings_churn}))
    return out


def no_findings(history: Sequence[Snapshot]) -> list[Finding]:
    return []


class FakeRecorder:
    def __init__(self, path: str = "/tmp/pinmon-test.jsonl.gz"):
        self.path = path
        self.written: list[Snapshot] = []
        self.closed = False

    @property
    def count(self) -> int:
        return len(self.written)

    def write(self, snapshot: Snapshot) -> None:
        self.written.append(snapshot)

    def close(self) -> None:
        self.closed = True


class FakeProbeRunner:
    """Calls progress like a real run would; ``block`` holds it until released (to see the bar)."""

    def __init__(self, block: bool = False):
        self.calls: list[tuple[str, dict]] = []
        self.release = threading.Event()
        self.started = threading.Event()
        if not block:
            self.release.set()

    def __call__(self, kind: str = "quick", gpu_index: int = 0, progress=None, cancel=None) -> ProbeResult:
        self.calls.append((kind, {"gpu_index": gpu_index}))
        self.started.set()
        steps = 4
        for k in range(steps):
            if progress is not None:
                progress(k, steps, f"step {k + 1}/{steps}")
            if k == 1:
                while not self.release.wait(0.05):
                    if cancel is not None and cancel.is_set():
                        break
        if progress is not None:
            progress(steps, steps, "done")
        return make_probe_result(kind)
