"""Model objects for the tests, from one module.

One builder per model type, each with healthy defaults that a test overrides by keyword:
``host``, ``link``, ``pcie``, ``gpu``, ``process``, ``cgroup``, ``copies``, ``stat``, ``copy_row``,
``probe``, ``finding`` and ``snapshot`` (plus ``null_snapshot`` and ``pinned_series``). The builders
compose: ``snapshot(gpus=[gpu(1, link=link(gen=4))], processes=[process(pinned_bytes=GIB)])``.
``process`` and ``cgroup`` take the fields of their records by name as well as the records
(``process(user="alice", pinned_bytes=GIB, gpu_indices=(0,))``: identity, held and placement), and
``moved(row, **fields)`` is such a row with some of those fields changed.

Built from them, the ready-made scenes that several test packages read:

- ``full_*``: one host with every figure filled (the kernel's pinned count on two NUMA nodes, a
  Gen5 x16 GPU with byte counters and PCIe errors, three processes, a quick probe), so the exporter
  and the check report have every series and line to show.
- ``box_*``: a two-GPU H200 box. GPU 0 runs at Gen5 x16; GPU 1 has trained down to Gen4 x8 while
  moving ~12 GB/s (degraded); 1 TiB of RAM with 420 GiB pinned.
- ``quick_result`` and ``alloc_rows``: probe results and rows as the probe analysis and its text
  read them.

Figures are bytes and bytes/s, as in the model; times are fixed numbers, never the wall clock.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from pinmon.model import (
    Allocations,
    BulkCopies,
    Cgroup,
    Copies,
    CopyStats,
    Finding,
    Gpu,
    GpuProcess,
    GroupLimit,
    GroupOwner,
    HeldMemory,
    HostMemory,
    Link,
    OomKill,
    Pcie,
    Placement,
    ProbeMeasurement,
    ProbeResult,
    ProcessIdentity,
    ProcessPinned,
    Snapshot,
)
from pinmon.model.link import theoretical_bytes_per_s
from pinmon.units import GIB, MIB

__all__ = ["GEN4_X8", "GEN5_X16", "GIB", "MIB", "NODE_SPLIT", "T0", "UUID0", "UUID1", "alloc_rows", "allocations",
           "box_groups_snapshot", "box_kernel_snapshot", "box_probe", "box_snapshot", "cgroup", "copies",
           "copy_row", "finding", "full_gpu", "full_host", "full_probe", "full_processes", "full_snapshot", "gpu",
           "host", "link", "moved", "null_snapshot", "pcie", "pinned_series", "probe", "process", "quick_result",
           "snapshot", "stat", "traced_cupti_process"]

T0 = 1_780_000_000.0  # a fixed epoch: a header's time comes from here, never the wall clock
# The rounded link rates the hand-made scenes state; link() computes the exact ones (Gen5 x16 is
# 63.015 GB/s after 128b/130b encoding).
GEN5_X16 = 63.0e9
GEN4_X8 = 15.75e9
UUID0 = "GPU-00000000-0000-0000-0000-000000000000"
UUID1 = "GPU-11111111-1111-1111-1111-111111111111"


# --- one builder per model type ------------------------------------------------------------------

def host(**overrides) -> HostMemory:
    """A 128 GiB host with plenty available, nothing pinned, an unlimited memlock limit."""
    fields = dict(hostname="testbox", mem_total_bytes=128 * GIB, mem_available_bytes=96 * GIB,
                  effective_mem_limit_bytes=128 * GIB, pinned_bytes_est=0, write_combined_bytes_est=0,
                  memlock_limit_bytes=None, memlock_unlimited=True)
    fields.update(overrides)
    return HostMemory(**fields)


def link(gen: int | None = 5, width: int | None = 16, gen_max: int | None = 5,
         width_max: int | None = 16, **overrides) -> Link:
    """A link's state; both theoretical rates follow from the generation and width unless given."""
    fields = dict(gen=gen, gen_max=gen_max, width=width, width_max=width_max,
                  theoretical_bytes_per_s=theoretical_bytes_per_s(gen, width),
                  max_theoretical_bytes_per_s=theoretical_bytes_per_s(gen_max, width_max))
    fields.update(overrides)
    return Link(**fields)


def pcie(rx: float | None = 0.0, tx: float | None = 0.0, **overrides) -> Pcie:
    """Link traffic from the byte counters (bytes/s), no replays, recoveries or errors."""
    fields = dict(rx_bytes_per_s=rx, tx_bytes_per_s=tx, method="counters", replay_delta=0, recovery_delta=0,
                  error_delta=0)
    fields.update(overrides)
    return Pcie(**fields)


_link, _pcie = link, pcie  # gpu() and others name parameters after these builders


def gpu(index: int = 0, *, gen: int | None = 5, width: int | None = 16, gen_max: int | None = 5,
        width_max: int | None = 16, rx: float | None = 0.0, tx: float | None = 0.0,
        link: Link | None = None, pcie: Pcie | None = None, **overrides) -> Gpu:
    """An H200 on a Gen5 x16 link (63.0 GB/s): ``gen``, ``width`` (and their maxima), ``rx`` and
    ``tx`` shape the link and its traffic, unless ``link`` or ``pcie`` is given whole."""
    fields = dict(index=index, name="NVIDIA H200", pci_bus_id=f"00000000:{0x41 + index:02x}:00.0",
                  link=_link(gen, width, gen_max, width_max) if link is None else link,
                  pcie=_pcie(rx, tx) if pcie is None else pcie)
    fields.update(overrides)
    return Gpu(**fields)


def _fields(cls) -> frozenset:
    return frozenset(f.name for f in dataclasses.fields(cls))


_IDENTITY, _HELD, _PLACEMENT = _fields(ProcessIdentity), _fields(HeldMemory), _fields(Placement)
_OWNER, _LIMIT = _fields(GroupOwner), _fields(GroupLimit)


def _split(fields: dict, *records: tuple[str, frozenset]) -> dict:
    """``fields`` with the keys that belong to a record (named, with the record's field names) moved
    into a dict of that record's."""
    out = dict(fields)
    for record, names in records:
        part = {k: out.pop(k) for k in list(out) if k in names and k != record}
        if part:
            out[record] = part
    return out


def _build(cls, base, changes: dict | None):
    if not changes:
        return base
    return dataclasses.replace(base, **changes) if base is not None else cls(**changes)


def process(pid: int = 1234, name: str | None = "python", **overrides) -> ProcessPinned:
    """A process row; every reading not given is unknown. Besides the row's own fields, the fields
    of its identity (user, cmdline, cgroup), held memory (pinned_bytes, vm_pinned_bytes, mappings,
    capped ...) and placement (gpu_indices, gpu_memory_bytes, pinned_bytes_by_node) are taken by name,
    and shorthands make its copies and allocations where those records are not given: ``wc_readbacks``
    and ``pageable_bytes_per_s`` (H2D), as ``Copies`` reads them back, ``alloc_per_s`` and
    ``alloc_median_bytes``, all measured by ``instrument`` (default "hooks")."""
    instrument = overrides.pop("instrument", None)
    readbacks = overrides.pop("wc_readbacks", None)
    pageable = overrides.pop("pageable_bytes_per_s", None)
    per_s, median = overrides.pop("alloc_per_s", None), overrides.pop("alloc_median_bytes", None)
    stats = ([stat("h2d", "pageable", pageable)] if pageable is not None else []) + \
        ([stat("d2h", "write_combined", count=readbacks)] if readbacks is not None else [])
    if (stats or (instrument and per_s is None and median is None)) and "copies" not in overrides:
        overrides["copies"] = copies(instrument or "hooks", stats=stats)
    if (per_s is not None or median is not None) and "allocations" not in overrides:
        overrides["allocations"] = allocations(instrument or "hooks", per_s=per_s, median_bytes=median)
    return moved(ProcessPinned(pid=pid, identity=ProcessIdentity(name=name)), **overrides)


def moved(row, **changes):
    """``row`` (a ProcessPinned or a Cgroup) with ``changes``, its records' fields taken by name."""
    if isinstance(row, ProcessPinned):
        parts = _split(changes, ("identity", _IDENTITY), ("held", _HELD), ("placement", _PLACEMENT))
        for record in ("identity", "held", "placement"):
            if isinstance(parts.get(record), dict):
                parts[record] = _build(None, getattr(row, record), parts[record])
        return dataclasses.replace(row, **parts)
    parts = _split(changes, ("owner", _OWNER), ("limit", _LIMIT), ("held", _HELD))
    for record in ("owner", "limit", "held"):
        if isinstance(parts.get(record), dict):
            parts[record] = _build(None, getattr(row, record), parts[record])
    return dataclasses.replace(row, **parts)


def cgroup(key: str = "docker/" + "ab" * 32, kind: str = "docker", name: str = "docker trainer", **overrides) -> Cgroup:
    """A group; every reading not given is unknown. Besides the group's own fields, the fields of its
    owner (pod, container_id, job ...), limit (limit_bytes, current_bytes, oom_kills ...) and held
    memory (pinned_bytes, write_combined_bytes, vm_pinned_bytes) are taken by name."""
    return moved(Cgroup(key=key, kind=kind, name=name), **overrides)


def stat(direction: str, memory: str, bytes_per_s: float | None = None, **overrides) -> CopyStats:
    """One direction and host memory kind of a process's copies."""
    return CopyStats(direction=direction, memory=memory, bytes_per_s=bytes_per_s, **overrides)


def copies(instrument: str = "cupti", stats: Iterable[CopyStats] = (), bulk: Iterable[BulkCopies] = (),
           **overrides) -> Copies:
    """A process's copies: ``stats`` and ``bulk`` as given, every other figure unknown."""
    return Copies(instrument=instrument, stats=tuple(stats), bulk=tuple(bulk), **overrides)


def allocations(instrument: str = "hooks", **overrides) -> Allocations:
    return Allocations(instrument=instrument, **overrides)


def oom_kill(time: float = 900.0, pid: int = 5151, process: str = "python3", **overrides) -> OomKill:
    """A memory cgroup OOM kill from the kernel's log: by default bob's inference in Slurm job 4711's
    step 0, at its 64 GiB limit, 48 GiB of its 60 GiB resident being shared (pinned) memory."""
    fields = dict(seq=1562, uid=1001, key=JOB_KEY, kind="slurm", name="job 4711.0", job="4711", step="0",
                  path="/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0",
                  limit_path="/system.slice/slurmstepd.scope/job_4711", memory_limit_bytes=64 * GIB,
                  limit_source="kernel log", total_vm_bytes=80 * GIB, anon_rss_bytes=10 * GIB,
                  file_rss_bytes=2 * GIB, shmem_rss_bytes=48 * GIB)
    fields.update(overrides)
    return OomKill(time=time, pid=pid, process=process, **fields)


def copy_row(memory: str, direction: str, rate: float, size: int = 256 * MIB, repeats: int | None = 10,
             **overrides) -> ProbeMeasurement:
    """A probe's copy at ``rate`` bytes/s; the time of one copy follows from the size unless given."""
    fields = dict(kind="copy", memory=memory, size_bytes=size, direction=direction, bytes_per_s=rate,
                  seconds=size / rate, repeats=repeats)
    fields.update(overrides)
    return ProbeMeasurement(**fields)


def probe(h2d_pinned: float | None = 55.0e9, d2h_pinned: float | None = 55.1e9,
          h2d_pageable: float | None = 6.3e9, link: float | None = 63.0e9,
          allocs: Iterable[tuple[int, float]] = (), cpu_reads: dict | None = None, status: str = "ok",
          gpu_index: int | None = 0, time: float = 990.0,
          measurements: Iterable[ProbeMeasurement] | None = None, **overrides) -> ProbeResult:
    """A probe result; rates in bytes/s (None leaves that copy out), ``allocs`` as (size_bytes,
    seconds), ``cpu_reads`` as {memory: bytes/s}; ``measurements`` replaces all those rows."""
    if measurements is None:
        rows = [copy_row(memory, direction, rate)
                for direction, memory, rate in (("h2d", "pinned", h2d_pinned), ("d2h", "pinned", d2h_pinned),
                                                ("h2d", "pageable", h2d_pageable))
                if rate is not None]
        rows += [ProbeMeasurement(kind="alloc", memory="pinned", size_bytes=size, seconds=seconds)
                 for size, seconds in allocs]
        rows += [ProbeMeasurement(kind="cpu_read", memory=memory, size_bytes=64 * MIB, bytes_per_s=rate)
                 for memory, rate in (cpu_reads or {}).items()]
        measurements = rows
    return ProbeResult(time=time, gpu_index=gpu_index, status=status, link_theoretical_bytes_per_s=link,
                       measurements=tuple(measurements), **overrides)


def finding(rule: str = "pinned-ram-share", severity: str = "critical", subject: str = "host",
            message: str = "m", advice: str = "a", **overrides) -> Finding:
    """A finding of ``rule`` on ``subject``; its text is a placeholder, for views that only place it."""
    return Finding(rule=rule, severity=severity, subject=subject, message=message, advice=advice, **overrides)


_host, _probe = host, probe
_SNAPSHOT_FIELDS = frozenset(f.name for f in dataclasses.fields(Snapshot))


def snapshot(time: float = 1000.0, host: HostMemory | None = None, gpus: Iterable[Gpu] = (),
             processes: Iterable[ProcessPinned] = (), probe: ProbeResult | None = None,
             interval_s: float | None = 1.0, **overrides) -> Snapshot:
    """A snapshot of ``host`` (``host()`` unless given). A keyword naming another Snapshot field
    (``notices``, ``source`` ...) sets it; any other keyword overrides a field of ``host()``."""
    fields = {k: v for k, v in overrides.items() if k in _SNAPSHOT_FIELDS}
    host_fields = {k: v for k, v in overrides.items() if k not in _SNAPSHOT_FIELDS}
    if host is None:
        host = _host(**host_fields)
    elif host_fields:
        raise TypeError("pass host= or host field overrides, not both")
    return Snapshot(time=time, host=host, gpus=tuple(gpus), processes=tuple(processes), probe=probe,
                    interval_s=interval_s, **fields)


def null_snapshot(time: float = 1000.0) -> Snapshot:
    """Every reading unknown: a host, a GPU and a process whose optional fields are all None."""
    return Snapshot(time=time, host=HostMemory(hostname="unknown"), gpus=(Gpu(index=0),),
                    processes=(ProcessPinned(pid=1),), probe=ProbeResult(time=time, gpu_index=0, status="ok"))


def pinned_series(values, start: float = 0.0, step: float = 60.0, pid: int = 1234, name: str = "python",
                  **proc) -> list[Snapshot]:
    """Snapshots of one process's pinned bytes, one per ``step`` seconds."""
    return [snapshot(time=start + i * step, processes=[process(pid=pid, name=name, pinned_bytes=v, **proc)])
            for i, v in enumerate(values)]


# --- full_*: every figure filled -----------------------------------------------------------------

_FULL_HOST = dict(hostname="box", mem_total_bytes=128 * GIB, mem_available_bytes=100 * GIB,
                  effective_mem_limit_bytes=96 * GIB, cgroup_limit_bytes=96 * GIB, swap_used_bytes=0,
                  shmem_bytes=5 * MIB, mlocked_bytes=0, pinned_bytes_est=10 * GIB, write_combined_bytes_est=MIB,
                  memlock_limit_bytes=8 * MIB, memlock_unlimited=False, kernel_pinned_bytes=12 * GIB,
                  kernel_pinned_bytes_by_node={"0": 5 * GIB, "1": 7 * GIB}, pinned_bytes_total=12 * GIB + MIB,
                  pinned_bytes_source="kernel", unattributed_pinned_bytes=2 * GIB, numa_nodes=(0, 1))


def full_host(**overrides) -> HostMemory:
    """A 128 GiB host in a 96 GiB cgroup; the kernel counts 12 GiB pinned (5 + 7 GiB on two nodes),
    2 GiB of it unattributed; an 8 MiB memlock limit."""
    return host(**{**_FULL_HOST, **overrides})


def full_gpu(index: int = 0, uuid: str = UUID0, rx: int | None = 1000, tx: int | None = 500,
             interval: float = 1.0, method: str | None = "counters", lost: bool = False, **link_fields) -> Gpu:
    """An H200 at Gen5 x16 that moved ``rx`` and ``tx`` link bytes in ``interval`` seconds (counted
    exactly by the ``counters`` method), with 3 replays, 7 recoveries and 2 bad TLPs;
    ``link_fields`` override the link's."""
    counted = method == "counters"
    return gpu(index, uuid=uuid, pci_bus_id=f"00000000:{index:02X}:00.0",
               link=link(**{"theoretical_bytes_per_s": GEN5_X16, "max_theoretical_bytes_per_s": GEN5_X16,
                            **link_fields}),
               pcie=pcie(rx=None if rx is None else rx / interval, tx=None if tx is None else tx / interval,
                         method=method, rx_bytes=rx if counted else None, tx_bytes=tx if counted else None,
                         interval_s=interval, replay_delta=3, recovery_delta=7, error_delta=2,
                         counter_deltas={"replay": 3, "l0_to_recovery": 7, "bad_tlp": 2, "lane_error": None}),
               memory_total_bytes=141 * GIB, memory_used_bytes=GIB, lost=lost)


def full_probe(time: float = 990.0) -> ProbeResult:
    """A quick probe of both memories both ways at 64 MiB, and a small pinned copy."""
    rows = [copy_row(memory, direction, rate, size=64 * MIB, seconds=0.01, repeats=8)
            for memory, direction, rate in [("pinned", "h2d", 55e9), ("pageable", "h2d", 8.8e9),
                                            ("pinned", "d2h", 55.1e9), ("pageable", "d2h", 15.5e9)]]
    rows.append(copy_row("pinned", "h2d", 1e9, size=4096, seconds=None, repeats=None))
    return probe(time=time, link=GEN5_X16, measurements=rows, kind="quick", duration_s=0.8,
                 max_pinned_bytes=256 * MIB)


def full_processes(n: int) -> tuple[ProcessPinned, ...]:
    """``n`` jobs of alice's pinning 1, 2, 3 ... MiB; the first one traced."""
    return tuple(process(pid=100 + i, name=f"job{i}", user="alice", pinned_bytes=(i + 1) * MIB,
                         write_combined_bytes=i, source="traced" if i == 0 else "est.") for i in range(n))


def full_snapshot(time: float = 1000.0, gpus: Iterable[Gpu] | None = None,
                  processes: Iterable[ProcessPinned] | None = None, with_probe: bool = True,
                  **host_fields) -> Snapshot:
    """``full_host`` (``host_fields`` override it) with one ``full_gpu``, three ``full_processes``
    and a ``full_probe`` unless given."""
    return snapshot(time=time, host=full_host(**host_fields), gpus=(full_gpu(),) if gpus is None else gpus,
                    processes=full_processes(3) if processes is None else processes,
                    probe=full_probe() if with_probe else None)


# --- box_*: the two-GPU H200 box -----------------------------------------------------------------

def box_snapshot(i: int = 0, *, source: str = "live", interval_s: float = 1.0,
                 probe: ProbeResult | None = None) -> Snapshot:
    """The box's ``i``-th snapshot, ``interval_s`` apart from ``T0``: the traffic and one process's
    churn follow ``i`` in integer patterns, so every run and every machine sees the same numbers."""
    wave = (i * 7) % 10
    gpus = (
        gpu(0, uuid="GPU-0000aaaa", pci_bus_id="00000000:17:00.0",
            link=link(theoretical_bytes_per_s=GEN5_X16, max_theoretical_bytes_per_s=GEN5_X16),
            pcie=pcie(40e9 + wave * 1e9, 2e9 + wave * 0.1e9,
                      counter_deltas={"replay": 0, "l0_to_recovery": 0, "bad_tlp": 0}),
            memory_total_bytes=141 * GIB, memory_used_bytes=96 * GIB, cpu_affinity="0-47", numa_node=0,
            processes=(GpuProcess(pid=4242, gpu_memory_bytes=80 * GIB),
                       GpuProcess(pid=5151, gpu_memory_bytes=16 * GIB))),
        gpu(1, uuid="GPU-1111bbbb", pci_bus_id="00000000:9A:00.0",
            link=link(gen=4, width=8, theoretical_bytes_per_s=GEN4_X8, max_theoretical_bytes_per_s=GEN5_X16),
            pcie=pcie(12e9 + wave * 0.2e9, 0.5e9, method="sampled", replay_delta=2, recovery_delta=1,
                      counter_deltas={"replay": 2, "l0_to_recovery": 1, "bad_tlp": 0}),
            memory_total_bytes=141 * GIB, memory_used_bytes=40 * GIB, cpu_affinity="48-95", numa_node=1,
            processes=(GpuProcess(pid=6060, gpu_memory_bytes=40 * GIB),)),
    )
    box = host(hostname="gpu-node-17", mem_total_bytes=1024 * GIB, mem_available_bytes=300 * GIB,
               effective_mem_limit_bytes=1024 * GIB, cgroup_limit_bytes=None, swap_used_bytes=0,
               shmem_bytes=12 * GIB, mlocked_bytes=0, pinned_bytes_est=420 * GIB,
               write_combined_bytes_est=2 * GIB)
    procs = (
        process(4242, "python", user="alice", cmdline="python train.py --bs 512",
                pinned_bytes=300 * GIB, write_combined_bytes=1 * GIB, mappings=1200,
                mappings_churn=40 + wave, gpu_memory_bytes=80 * GIB, gpu_indices=(0,)),
        process(5151, "dataloader", user="alice", cmdline="python -m loader --workers 16",
                pinned_bytes=100 * GIB, write_combined_bytes=0, mappings=64, mappings_churn=0,
                gpu_memory_bytes=16 * GIB, gpu_indices=(0,)),
        process(6060, "infer", user="bob", cmdline="./infer --model llama", source="traced",
                pinned_bytes=20 * GIB, write_combined_bytes=1 * GIB, mappings=8, mappings_churn=0,
                gpu_memory_bytes=40 * GIB, gpu_indices=(1,)),
        process(7070, "jupyter", user="carol", cmdline="jupyter-lab",
                pinned_bytes=256 * MIB, write_combined_bytes=None, mappings=1, mappings_churn=None,
                gpu_memory_bytes=None),
    )
    return snapshot(time=T0 + i * interval_s, host=box, gpus=gpus, processes=procs, probe=probe,
                    interval_s=interval_s, source=source)


def traced_cupti_process() -> ProcessPinned:
    """A process traced with CUPTI on GPU 0: its H2D pinned copies of 1 MiB+ reach 40% of the box
    probe's 52 GB/s, its D2H ones 94% of 54 GB/s; a few pageable copies (50 MB/s, under the
    pageable-bulk-copies threshold); two call sites, one of them hostile text."""
    return process(
        8080, "trainer", user="dave", cmdline="python train_cupti.py --offload", source="traced",
        pinned_bytes=8 * GIB, write_combined_bytes=0, registered_bytes=2 * GIB,
        allocations=allocations("cupti", per_s=3.5, median_bytes=4 * MIB),
        gpu_memory_bytes=20 * GIB, gpu_indices=(0,),
        copies=copies("cupti", window_s=5.0, stats=(
            stat("h2d", "pinned", 10.5e9, achieved_bytes_per_s=20.9e9, rate_p50_bytes_per_s=21.5e9,
                 rate_p10_bytes_per_s=9.0e9),
            stat("h2d", "pageable", 0.05e9, achieved_bytes_per_s=6.1e9, rate_p50_bytes_per_s=6.0e9,
                 rate_p10_bytes_per_s=4.2e9),
            stat("d2h", "pinned", 3.0e9, achieved_bytes_per_s=50.1e9, rate_p50_bytes_per_s=51.0e9,
                 rate_p10_bytes_per_s=44.0e9),
            stat("d2h", "pageable", 0.0)),
            bulk=(BulkCopies("h2d", 20.8e9, 2.5), BulkCopies("d2h", 50.76e9, 1.2)), default_stream_share=0.75,
            gpu_pci_bus_id="0000:17:00.0"),
        call_sites={"alloc": "train_cupti.py:42", "pageable_copy": "loader.py:118\x1b[31m"})


# Pinned pages per node of each process on the two-node box (GPU 0 is on node 0, GPU 1 on node 1).
NODE_SPLIT = {4242: {"0": 240 * GIB, "1": 60 * GIB}, 5151: {"0": 100 * GIB},
              6060: {"0": 15 * GIB, "1": 5 * GIB}, 8080: {"0": 2 * GIB, "1": 6 * GIB}}


def box_kernel_snapshot(i: int = 0, *, nodes: int = 1, unattributed: int = 24 * GIB, traced: bool = True,
                        probe: ProbeResult | None = None) -> Snapshot:
    """``box_snapshot`` on a kernel that counts pinned pages: the count is what the process rows
    hold plus ``unattributed``; ``nodes`` 2 gives a two-node host with the rows' ``NODE_SPLIT``;
    ``traced`` adds ``traced_cupti_process``."""
    s = box_snapshot(i, probe=probe)
    procs = s.processes + ((traced_cupti_process(),) if traced else ())
    if nodes > 1:
        procs = tuple(moved(p, pinned_bytes_by_node=NODE_SPLIT.get(p.pid)) for p in procs)
    kernel = sum(p.held.pinned_bytes or 0 for p in procs) + unattributed
    by_node = {"0": kernel} if nodes == 1 else {"0": kernel - 80 * GIB, "1": 80 * GIB}
    box = dataclasses.replace(s.host, kernel_pinned_bytes=kernel, kernel_pinned_bytes_by_node=by_node,
                              pinned_bytes_total=kernel + s.host.write_combined_bytes_est,
                              pinned_bytes_source="kernel", unattributed_pinned_bytes=unattributed,
                              numa_nodes=tuple(range(nodes)))
    return dataclasses.replace(s, host=box, processes=procs)


def box_probe(kind: str = "quick", t: float = T0) -> ProbeResult:
    """A probe of the box's GPU 0: 52 GB/s pinned and 18 GB/s pageable H2D at 64 MiB (a ``sweep``
    also at 1 and 16 MiB, slower), and a 12 ms pinned allocation."""
    sizes = (64 * MIB,) if kind == "quick" else (1 * MIB, 16 * MIB, 64 * MIB)
    rows = []
    for size in sizes:
        scale = min(1.0, size / (64 * MIB) + 0.5)
        rows += [copy_row(memory, direction, rate * scale, size=size, seconds=None, repeats=5)
                 for memory, direction, rate in (("pinned", "h2d", 52.0e9), ("pageable", "h2d", 18.0e9),
                                                 ("pinned", "d2h", 54.0e9), ("pageable", "d2h", 15.0e9))]
    rows.append(ProbeMeasurement("alloc", "pinned", 64 * MIB, seconds=0.012, repeats=3))
    return probe(time=t, link=GEN5_X16, measurements=rows, kind=kind, duration_s=1.5,
                 max_pinned_bytes=256 * MIB)


# --- probe rows as the analysis and the probe text read them -------------------------------------

def alloc_rows(size, pinned_alloc, pinned_free, pageable_alloc, pageable_free, pinned_copy, pageable_copy):
    """The steady alloc and free rows of both memories and their H2D copies at one size, in seconds."""
    m = ProbeMeasurement
    return [m("alloc", "pinned", size, seconds=pinned_alloc, note="steady"),
            m("alloc", "pinned", size, seconds=pinned_alloc * 10, note="first"),
            m("free", "pinned", size, seconds=pinned_free, note="steady"),
            m("alloc", "pageable", size, seconds=pageable_alloc, note="steady"),
            m("free", "pageable", size, seconds=pageable_free, note="steady"),
            m("copy", "pinned", size, direction="h2d", seconds=pinned_copy, bytes_per_s=size / pinned_copy),
            m("copy", "pageable", size, direction="h2d", seconds=pageable_copy, bytes_per_s=size / pageable_copy)]


def quick_result(**overrides) -> ProbeResult:
    """A quick probe on a Gen5 x16 link: 55.0 GB/s pinned vs 6.3 GB/s pageable H2D; ``overrides``
    set any field of the result."""
    size = 64 * MIB
    rows = (ProbeMeasurement("init", "device", 0, seconds=0.21, repeats=1,
                             note="CUDA context ready; CUDA device 0 is 0000:00:06.0"),
            copy_row("pinned", "h2d", 55.0e9, size=size, repeats=8),
            copy_row("pageable", "h2d", 6.3e9, size=size, repeats=8),
            copy_row("pinned", "d2h", 55.1e9, size=size, repeats=8),
            copy_row("pageable", "d2h", 11.3e9, size=size, repeats=8))
    # Gen5 x16: 32 GT/s x 16 lanes, 128b/130b encoding, in bytes/s.
    fields = dict(time=1.0, gpu_index=0, kind="quick", link_theoretical_bytes_per_s=32e9 * 16 * 128 / 130 / 8,
                  duration_s=0.31, max_pinned_bytes=256 * MIB, measurements=rows)
    fields.update(overrides)
    return ProbeResult(**fields)


POD_KEY = "pod/0a1b2c3d-0000-4000-8000-00000000abcd/" + "cd" * 32
JOB_KEY = "slurm/4711/0"


def box_groups_snapshot(i: int = 0, oom_kills: int = 0) -> Snapshot:
    """The box's snapshot with its processes in groups: alice's trainer and loader in one pod container
    with a 512 GiB limit (78% pinned: critical), bob's inference in a Slurm step with 64 GiB (33%:
    warning), carol's notebook in no group; ``oom_kills`` since start in the pod."""
    snap = box_snapshot(i)
    pod = cgroup(POD_KEY, "pod", "ml/trainer-7f9c/worker", path="/kubepods.slice/kubepods-pod0a1b.slice/cri-containerd-cdcd.scope",
                 pod="trainer-7f9c", namespace="ml", container="worker", container_id="cd" * 32,
                 pod_uid="0a1b2c3d-0000-4000-8000-00000000abcd", limit_bytes=512 * GIB,
                 limit_path="/kubepods.slice/kubepods-pod0a1b.slice", current_bytes=430 * GIB,
                 oom_kills=oom_kills, oom_kills_at_start=0, pinned_bytes=400 * GIB, write_combined_bytes=1 * GIB,
                 processes=2)
    job = cgroup(JOB_KEY, "slurm", "job 4711.0", path="/system.slice/slurmstepd.scope/job_4711/step_0",
                 job="4711", step="0", limit_bytes=64 * GIB, limit_path="/system.slice/slurmstepd.scope/job_4711",
                 current_bytes=30 * GIB, oom_kills=0, oom_kills_at_start=0, pinned_bytes=20 * GIB,
                 write_combined_bytes=1 * GIB, processes=1)
    keys = {4242: POD_KEY, 5151: POD_KEY, 6060: JOB_KEY}
    procs = tuple(moved(p, cgroup=keys.get(p.pid)) for p in snap.processes)
    return dataclasses.replace(snap, processes=procs, cgroups=(pod, job))
