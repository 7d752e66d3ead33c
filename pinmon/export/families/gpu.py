"""Per-GPU metrics: PCIe traffic (rates and exact byte counters), link state, error counters, up.

Labels ``gpu`` (NVML index), ``uuid``, ``pci_bus_id`` on every series; the GPU name sits on the info
metric only, so a join (``* on(uuid) group_left(name) pinmon_gpu_info``) adds it where wanted.
A GPU listed twice (same index or UUID, from a damaged recording) is exported once: its first entry.
``counter`` takes at most ``MAX_COUNTERS_PER_GPU`` names per GPU (NVML has 13), so a recording that
names thousands cannot make as many series.
"""
from __future__ import annotations

from prometheus_client.core import Metric

from ...model import Gpu
from ..state import StateView, gpu_key, unique_gpus
from .base import Counter, Gauge, emit

LABELS = ("gpu", "uuid", "pci_bus_id")
MAX_COUNTERS_PER_GPU = 16


def gpu_labels(g: Gpu) -> tuple[int, str | None, str | None]:
    return (g.index, g.uuid, g.pci_bus_id)


def families(view: StateView) -> list[Metric]:
    snap = view.snapshot
    if snap is None:
        return []
    info = Gauge("gpu_info", "GPU identity (value 1); pcie_method: gpm or counters = exact link "
                 "bytes, sampled = NVML 20 ms throughput sample", LABELS + ("name", "pcie_method"))
    up = Gauge("gpu_up", "1 when NVML answers for the GPU, 0 when it fell off the bus", LABELS)
    mem_total = Gauge("gpu_memory_total_bytes", "GPU memory size", LABELS)
    mem_used = Gauge("gpu_memory_used_bytes", "GPU memory in use", LABELS)
    rx_rate = Gauge("gpu_pcie_rx_bytes_per_second", "PCIe link bytes/s the GPU received (host-to-device data) over the last interval", LABELS)
    tx_rate = Gauge("gpu_pcie_tx_bytes_per_second", "PCIe link bytes/s the GPU sent over the last interval: device-to-host data and the read requests of host-to-device DMA", LABELS)
    rx_total = Counter("gpu_pcie_rx_bytes_total", "PCIe link bytes received by the GPU, counted exactly (method counters)", LABELS)
    tx_total = Counter("gpu_pcie_tx_bytes_total", "PCIe link bytes sent by the GPU, counted exactly (method counters)", LABELS)
    gen = Gauge("gpu_pcie_link_gen", "PCIe link generation now", LABELS)
    gen_max = Gauge("gpu_pcie_link_gen_max", "highest PCIe generation of the link", LABELS)
    width = Gauge("gpu_pcie_link_width", "PCIe link width now (lanes)", LABELS)
    width_max = Gauge("gpu_pcie_link_width_max", "widest PCIe link width (lanes)", LABELS)
    theo = Gauge("gpu_pcie_link_theoretical_bytes_per_second",
                 "payload rate of the link at its current generation and width", LABELS)
    theo_max = Gauge("gpu_pcie_link_max_theoretical_bytes_per_second",
                     "payload rate of the link at its rated generation and width", LABELS)
    replays = Counter("gpu_pcie_replays_total", "PCIe replays since pinmon started", LABELS)
    recoveries = Counter("gpu_pcie_recoveries_total", "PCIe L0-to-recovery transitions since pinmon started", LABELS)
    errors = Counter("gpu_pcie_errors_total", "sum of PCIe error counters (not replay or recovery) since pinmon "
                     "started; counters overlap, so an alarm figure, not distinct events", LABELS)
    by_counter = Counter("gpu_pcie_counter_events_total", "each NVML PCIe error counter since pinmon started",
                         LABELS + ("counter",))
    for g in unique_gpus(snap.gpus):  # a repeated GPU would give duplicate series: first one kept
        lab = gpu_labels(g)
        info.add(lab + (g.name, g.pcie.method), 1)
        up.add(lab, 0 if g.lost else 1)
        if g.lost:
            continue  # what a lost GPU last said is not a reading now
        mem_total.add(lab, g.memory_total_bytes)
        mem_used.add(lab, g.memory_used_bytes)
        p, link = g.pcie, g.link
        rx_rate.add(lab, p.rx_bytes_per_s)
        tx_rate.add(lab, p.tx_bytes_per_s)
        totals = view.pcie_bytes_totals.get(gpu_key(g))
        if totals is not None:
            rx_total.add(lab, totals[0])
            tx_total.add(lab, totals[1])
        gen.add(lab, link.gen)
        gen_max.add(lab, link.gen_max)
        width.add(lab, link.width)
        width_max.add(lab, link.width_max)
        theo.add(lab, link.theoretical_bytes_per_s)
        theo_max.add(lab, link.max_theoretical_bytes_per_s)
        replays.add(lab, p.replay_delta)
        recoveries.add(lab, p.recovery_delta)
        errors.add(lab, p.error_delta)
        for name, value in sorted(p.counter_deltas.items())[:MAX_COUNTERS_PER_GPU]:
            by_counter.add(lab + (name,), value)
    return emit(info, up, mem_total, mem_used, rx_rate, tx_rate, rx_total, tx_total, gen, gen_max, width,
                width_max, theo, theo_max, replays, recoveries, errors, by_counter)
