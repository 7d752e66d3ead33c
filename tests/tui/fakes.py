"""Deterministic stand-ins for the app's collaborators: sources, advisor, probe runner, recorder.

The numbers look like a two-GPU H200 box: GPU 0 runs at Gen5 x16, GPU 1 has trained down to
Gen4 x8 while moving ~12 GB/s (degraded), host RAM 1 TiB with 420 GiB pinned.
"""
from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

from pinmon.model import Finding, Gpu, GpuProcess, HostMemory, Link, Pcie, ProbeResult, Snapshot
from pinmon.model.link import theoretical_bytes_per_s
from tests.factories import GEN4_X8, GEN5_X16, GIB, MIB, NODE_SPLIT, T0, process, traced_cupti_process  # noqa: F401
from tests.factories import box_kernel_snapshot as make_kernel_snapshot
from tests.factories import box_probe as make_probe_result
from tests.factories import box_snapshot as make_snapshot

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
    procs = tuple(process(3000 + k, f"load{k}", user="alice", cmdline=f"python load.py --gpu {k}",
                                pinned_bytes=(k + 1) * GIB, write_combined_bytes=0, mappings=1,
                                mappings_churn=0, gpu_memory_bytes=(k + 1) * 10 * GIB, gpu_indices=(k,))
                  for k in range(n))
    return dataclasses.replace(s, gpus=tuple(gpus), processes=procs)


class FakeSource:
    """Endless live-like source; ``n`` snapshots then None when ``finite``."""

    def __init__(self, live: bool = True, n: int | None = None, interval_s: float = 1.0,
                 probe_in_snapshots: bool = False):
        self.live = live
        self.n = n
        self.interval_s = interval_s
        self.calls = 0
        self.closed = False
        self.probe_in_snapshots = probe_in_snapshots
        self.notices: list[str] = []

    def snapshot(self) -> Snapshot | None:
        if self.n is not None and self.calls >= self.n:
            return None
        i = self.calls
        self.calls += 1
        probe = make_probe_result(t=T0) if self.probe_in_snapshots else None
        return make_snapshot(i, source="live" if self.live else "replay", interval_s=self.interval_s, probe=probe)

    def close(self) -> None:
        self.closed = True


class NoGpuSource(FakeSource):
    def snapshot(self) -> Snapshot | None:
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

    def snapshot(self) -> Snapshot | None:
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
        if (p.held.mappings_churn or 0) > 30:
            out.append(Finding(rule="pinned_churn", severity="info", subject=f"pid {p.pid}",
                               message=f"pid {p.pid} ({p.identity.name}) maps and unmaps pinned buffers"
                                       f" ({p.held.mappings_churn} per interval)",
                               advice="allocate pinned buffers once and reuse them",
                               values={"churn": p.held.mappings_churn}))
    return out


def no_findings(history: Sequence[Snapshot]) -> list[Finding]:
    return []


def fed_app():
    """The app on a live source it never polls, with no findings and no probes: the test feeds it
    snapshots (``apply_snapshot``)."""
    from pinmon.tui.app import PinmonApp

    return PinmonApp(type("Src", (), {"live": True})(), no_findings, start_polling=False, probe_every_s=None)


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

    def snapshot(self) -> Snapshot | None:
        self.calls += 1
        return make_kernel_snapshot(self.calls - 1, **self.snapshot_kw)


class MultiGpuSource(FakeSource):
    """``make_multi_snapshot`` each call, ``n`` GPUs."""

    def __init__(self, gpus: int = 8, **kw):
        super().__init__(**kw)
        self.gpus = gpus

    def snapshot(self) -> Snapshot | None:
        i = self.calls
        self.calls += 1
        return make_multi_snapshot(i, self.gpus, source="live" if self.live else "replay")



# --- groups: containers, pods and jobs, each under its own memory limit ---------------------------

# A container whose processes have ended (its row stays a few minutes), with a name holding a
# terminal escape, a bell and a newline: the views must show them, not send them.
GONE_KEY = "docker/" + "ef" * 32
HOSTILE_GROUP_NAME = "docker evil\x1b[2J\x07\nname"


def make_groups_snapshot(i: int = 0, oom_kills: int = 0, gone: bool = True) -> Snapshot:
    """The box in groups (``factories.box_groups_snapshot``: a pod container at 78% of its limit,
    critical; a Slurm step at 33%, warning; a notebook in no group), the Slurm step's process with
    128 MiB of io_uring VmPin, and, with ``gone``, a Docker container that has lost its processes."""
    from tests import factories as make

    snap = make.box_groups_snapshot(i, oom_kills=oom_kills)
    procs = tuple(make.moved(p, vm_pinned_bytes=128 * MIB) if p.pid == 6060 else p for p in snap.processes)
    groups = list(snap.cgroups)
    groups[1] = make.moved(groups[1], vm_pinned_bytes=128 * MIB)
    if gone:
        groups.append(make.cgroup(GONE_KEY, "docker", HOSTILE_GROUP_NAME, container_id="ef" * 32,
                                  limit_bytes=8 * GIB, current_bytes=0, oom_kills=3,
                                  oom_kills_at_start=3, processes=0))
    return dataclasses.replace(snap, processes=procs, cgroups=tuple(groups))


class GroupsSource(FakeSource):
    """The box in groups; the pod container's OOM count rises by one from the ``kill_at``-th snapshot."""

    def __init__(self, kill_at: int | None = None, **kw):
        super().__init__(**kw)
        self.kill_at = kill_at

    def snapshot(self) -> Snapshot | None:
        i = self.calls
        self.calls += 1
        kills = 1 if self.kill_at is not None and i >= self.kill_at else 0
        return make_groups_snapshot(i, oom_kills=kills)
