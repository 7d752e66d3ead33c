"""Hand-made snapshots for the advisor tests: healthy defaults, override what a test is about."""
from __future__ import annotations

from typing import Iterable, Optional

from pinmon.link import theoretical_bytes_per_s
from pinmon.model import (Gpu, HostMemory, Link, Pcie, ProbeMeasurement, ProbeResult, ProcessPinned,
                          Snapshot)
from pinmon.units import GIB, MIB

__all__ = ["GIB", "MIB", "make_host", "make_proc", "make_gpu", "make_probe", "make_snap", "null_snap",
           "pinned_series"]


def make_host(**overrides) -> HostMemory:
    """A 128 GiB host with plenty available, nothing pinned, an unlimited memlock limit."""
    fields = dict(hostname="testbox", mem_total_bytes=128 * GIB, mem_available_bytes=96 * GIB,
                  effective_mem_limit_bytes=128 * GIB, pinned_bytes_est=0, write_combined_bytes_est=0,
                  memlock_limit_bytes=None, memlock_unlimited=True)
    fields.update(overrides)
    return HostMemory(**fields)


def make_proc(pid: int = 1234, name: Optional[str] = "python", **overrides) -> ProcessPinned:
    return ProcessPinned(pid=pid, name=name, **overrides)


def make_gpu(index: int = 0, gen: Optional[int] = 5, width: Optional[int] = 16, gen_max: Optional[int] = 5,
             width_max: Optional[int] = 16, rx: Optional[float] = 0.0, tx: Optional[float] = 0.0,
             pcie: Optional[Pcie] = None, **overrides) -> Gpu:
    """A GPU on a Gen5 x16 link (63.0 GB/s) with the given link state and traffic (bytes/s)."""
    link = Link(gen=gen, gen_max=gen_max, width=width, width_max=width_max,
                theoretical_bytes_per_s=theoretical_bytes_per_s(gen, width),
                max_theoretical_bytes_per_s=theoretical_bytes_per_s(gen_max, width_max))
    if pcie is None:
        pcie = Pcie(rx_bytes_per_s=rx, tx_bytes_per_s=tx, method="counters",
                    replay_delta=0, recovery_delta=0, error_delta=0)
    fields = dict(index=index, name="NVIDIA H200", pci_bus_id=f"00000000:{0x41 + index:02x}:00.0",
                  link=link, pcie=pcie)
    fields.update(overrides)
    return Gpu(**fields)


def make_probe(h2d_pinned: Optional[float] = 55.0e9, d2h_pinned: Optional[float] = 55.1e9,
               h2d_pageable: Optional[float] = 6.3e9, link: Optional[float] = 63.0e9,
               allocs: Iterable[tuple[int, float]] = (), cpu_reads: Optional[dict] = None,
               status: str = "ok", gpu_index: Optional[int] = 0, time: float = 990.0) -> ProbeResult:
    """A probe result; rates in bytes/s, ``allocs`` as (size_bytes, seconds), ``cpu_reads`` {memory: B/s}."""
    size = 256 * MIB
    rows = []
    for direction, memory, rate in (("h2d", "pinned", h2d_pinned), ("d2h", "pinned", d2h_pinned),
                                    ("h2d", "pageable", h2d_pageable)):
        if rate is not None:
            rows.append(ProbeMeasurement(kind="copy", memory=memory, size_bytes=size, direction=direction,
                                         bytes_per_s=rate, seconds=size / rate, repeats=10))
    for alloc_size, seconds in allocs:
        rows.append(ProbeMeasurement(kind="alloc", memory="pinned", size_bytes=alloc_size, seconds=seconds))
    for memory, rate in (cpu_reads or {}).items():
        rows.append(ProbeMeasurement(kind="cpu_read", memory=memory, size_bytes=64 * MIB, bytes_per_s=rate))
    return ProbeResult(time=time, gpu_index=gpu_index, status=status, link_theoretical_bytes_per_s=link,
                       measurements=tuple(rows))


def make_snap(time: float = 1000.0, host: Optional[HostMemory] = None, gpus: Iterable[Gpu] = (),
              processes: Iterable[ProcessPinned] = (), probe: Optional[ProbeResult] = None,
              **host_overrides) -> Snapshot:
    """A snapshot; keyword arguments not named here override ``make_host`` fields."""
    if host is None:
        host = make_host(**host_overrides)
    elif host_overrides:
        raise TypeError("pass host= or host field overrides, not both")
    return Snapshot(time=time, host=host, gpus=tuple(gpus), processes=tuple(processes), probe=probe,
                    interval_s=1.0)


def null_snap(time: float = 1000.0) -> Snapshot:
    """Every reading unknown: a host, a GPU and a process whose optional fields are all None."""
    return Snapshot(time=time, host=HostMemory(hostname="unknown"), gpus=(Gpu(index=0),),
                    processes=(ProcessPinned(pid=1),),
                    probe=ProbeResult(time=time, gpu_index=0, status="ok"))


def pinned_series(values, start=0.0, step=60.0, pid=1234, name="python", **proc) -> list[Snapshot]:
    """Snapshots of one process's pinned bytes, one per ``step`` seconds."""
    return [make_snap(time=start + i * step, processes=[make_proc(pid=pid, name=name, pinned_bytes=v, **proc)])
            for i, v in enumerate(values)]
