"""Deterministic stand-ins for the app's collaborators: sources, advisor, probe runner, recorder.

The numbers look like a two-GPU H200 box: GPU 0 runs at Gen5 x16, GPU 1 has trained down to
Gen4 x8 while moving ~12 GB/s (degraded), host RAM 1 TiB with 420 GiB pinned.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Optional, Sequence

from pinmon.link import theoretical_bytes_per_s
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


# --- an eight-GPU box: each GPU its own load, so a figure shown under the wrong GPU is caught ----

# Links trained below Gen5 x16 under load: GPU 2 at Gen4 x16, GPU 5 at Gen5 x8 (31.5 GB/s each).
DEGRADED_LINKS = {2: (4, 16), 5: (5, 8)}


def multi_rx(k: int) -> float:
    """GPU ``k``'s RX: 5.0, 10.1, 15.2 ... 40.7 GB/s for 8 GPUs; no figure is another's as text."""
    return (k + 1) * 5e9 + k * 0.1e9


def multi_tx(k: int) -> float:
    """GPU ``k``'s TX: 300 MB/s, 600 MB/s, 900 MB/s, 1.2 GB/s ..."""
    return (k + 1) * 0.3e9


def make_multi_snapshot(i: int = 0, n: int = 8, *, source: str = "live") -> Snapshot:
    """``make_snapshot`` on a box of ``n`` GPUs, GPU ``k`` at ``multi_rx(k)`` / ``multi_tx(k)``
    (steady, so the figure on screen is that one whatever ``i``), the links of ``DEGRADED_LINKS``
    below their Gen5 x16, the first half of the GPUs on NUMA node 0 and the rest on node 1; one
    process per GPU."""
    s = make_snapshot(i, source=source)
    gpus = []
    for k in range(n):
        gen, width = DEGRADED_LINKS.get(k, (5, 16))
        link = Link(gen=gen, gen_max=5, width=width, width_max=16,
                    theoretical_bytes_per_s=theoretical_bytes_per_s(gen, width),
                    max_theoretical_bytes_per_s=GEN5_X16)
        node = 0 if k < (n + 1) // 2 else 1
        gpus.append(Gpu(index=k, name="NVIDIA H200", uuid=f"GPU-{k:04d}cccc", pci_bus_id=f"00000000:{0x17 + 0x10 * k:02X}:00.0",
                        link=link,
                        pcie=Pcie(rx_bytes_per_s=multi_rx(k), tx_bytes_per_s=multi_tx(k), method="gpm",
                                  replay_delta=0, recovery_delta=0, error_delta=0,
                                  counter_deltas={"replay": 0, "l0_to_recovery": 0, "bad_tlp": 0}),
                        memory_total_bytes=141 * GIB, memory_used_bytes=(k + 1) * 10 * GIB,
                        cpu_affinity="0-47" if node == 0 else "48-95", numa_node=node,
                        processes=(GpuProcess(pid=3000 + k, gpu_memory_bytes=(k + 1) * 10 * GIB),)))
    procs = tuple(ProcessPinned(pid=3000 + k, name=f"load{k}", user="alice", cmdline=f"python load.py --gpu {k}",
                                pinned_bytes=(k + 1) * GIB, write_combined_bytes=0, pinned_mappings=1,
                                mappings_churn=0, gpu_memory_bytes=(k + 1) * 10 * GIB, gpu_indices=(k,))
                  for k in range(n))
    return dataclasses.replace(s, gpus=tuple(gpus), processes=procs)


# --- the kernel's pinned count, NUMA nodes, a process traced with CUPTI ------------------------

def traced_cupti_process() -> ProcessPinned:
    """A process traced with CUPTI on GPU 0: its H2D pinned copies of 1 MiB+ reach 40% of the fake
    probe's 52 GB/s, its D2H ones 94% of 54 GB/s; two call sites, one of them hostile text."""
    return ProcessPinned(
        pid=8080, name="trainer", user="dave", cmdline="python train_cupti.py --offload", source="traced",
        pinned_bytes=8 * GIB, write_combined_bytes=0, registered_bytes=2 * GIB, pinned_allocs_per_s=3.5,
        median_alloc_bytes=4 * MIB, gpu_memory_bytes=20 * GIB, gpu_indices=(0,), trace_engine="cupti",
        h2d_copy_bytes_per_s=10.9e9, d2h_copy_bytes_per_s=3.0e9,
        h2d_pinned_bulk_bytes_per_s=20.8e9, h2d_pinned_bulk_busy_s=2.5,
        d2h_pinned_bulk_bytes_per_s=50.76e9, d2h_pinned_bulk_busy_s=1.2, pinned_bulk_default_stream_share=0.75,
        copy_gpu_pci_bus_id="0000:17:00.0",
        call_sites={"alloc": "train_cupti.py:42", "pageable_copy": "loader.py:118\x1b[31m"},
        transfers={"h2d.pinned": {"bytes_per_s": 10.5e9, "achieved_bytes_per_s": 20.9e9, "rate_p50": 21.5e9,
                                  "rate_p10": 9.0e9},
                   "h2d.pageable": {"bytes_per_s": 0.4e9, "achieved_bytes_per_s": 6.1e9, "rate_p50": 6.0e9,
                                    "rate_p10": 4.2e9},
                   "d2h.pinned": {"bytes_per_s": 3.0e9, "achieved_bytes_per_s": 50.1e9, "rate_p50": 51.0e9,
                                  "rate_p10": 44.0e9},
                   "d2h.pageable": {"bytes_per_s": 0.0, "achieved_bytes_per_s": None, "rate_p50": None,
                                    "rate_p10": None}})


# Pinned pages per node of each process on the two-node host (GPU 0 is on node 0, GPU 1 on node 1).
NODE_SPLIT = {4242: {"0": 240 * GIB, "1": 60 * GIB}, 5151: {"0": 100 * GIB},
              6060: {"0": 15 * GIB, "1": 5 * GIB}, 8080: {"0": 2 * GIB, "1": 6 * GIB}}


def make_kernel_snapshot(i: int = 0, *, nodes: int = 1, unattributed: int = 24 * GIB, traced: bool = True,
                         probe: Optional[ProbeResult] = None) -> Snapshot:
    """``make_snapshot`` on a kernel that counts pinned pages: the count is what the process rows
    hold plus ``unattributed``; ``nodes`` 2 gives a two-node host with the rows' ``NODE_SPLIT``;
    ``traced`` adds ``traced_cupti_process``."""
    s = make_snapshot(i, probe=probe)
    procs = s.processes + ((traced_cupti_process(),) if traced else ())
    if nodes > 1:
        procs = tuple(dataclasses.replace(p, pinned_bytes_by_node=NODE_SPLIT.get(p.pid)) for p in procs)
    kernel = sum(p.pinned_bytes or 0 for p in procs) + unattributed
    by_node = {"0": kernel} if nodes == 1 else {"0": kernel - 80 * GIB, "1": 80 * GIB}
    host = dataclasses.replace(s.host, kernel_pinned_bytes=kernel, kernel_pinned_bytes_by_node=by_node,
                               pinned_bytes_total=kernel + s.host.write_combined_bytes_est,
                               pinned_bytes_source="kernel", unattributed_pinned_bytes=unattributed,
                               numa_nodes=tuple(range(nodes)))
    return dataclasses.replace(s, host=host, processes=procs)


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


class KernelSource(FakeSource):
    """``make_kernel_snapshot`` each call, with its keyword arguments."""

    def __init__(self, **snapshot_kw):
        super().__init__()
        self.snapshot_kw = snapshot_kw

    def snapshot(self) -> Optional[Snapshot]:
        self.calls += 1
        return make_kernel_snapshot(self.calls - 1, **self.snapshot_kw)


class MultiGpuSource(FakeSource):
    """``make_multi_snapshot`` each call, ``n`` GPUs."""

    def __init__(self, gpus: int = 8, **kw):
        super().__init__(**kw)
        self.gpus = gpus

    def snapshot(self) -> Optional[Snapshot]:
        i = self.calls
        self.calls += 1
        return make_multi_snapshot(i, self.gpus, source="live" if self.live else "replay")

