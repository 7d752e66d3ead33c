"""Rules on the probe's own measurements: its best pinned copy against the link's theoretical rate.

(Rules that quote the probe to put a process's figures in context live with those figures:
``traced``, ``memory``, ``copies``.)
"""
from __future__ import annotations

from collections.abc import Iterator

from ..model import Gpu, Snapshot
from ..units import fmt_link, fmt_pct, fmt_rate
from .common import lspci_target, probe_ok
from .rule import Found, rule
from .thresholds import Thresholds


@rule("probe-below-link", "the probe's best pinned copy ran below {probe_link_fraction} of the link's theoretical rate",
      thresholds=("probe_link_fraction",))
def probe_below_link(snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    probe = probe_ok(snap)
    if probe is None:
        return
    gpu = _gpu_by_index(snap, probe.gpu_index)
    if gpu is not None and gpu.lost:
        return
    h2d, d2h = probe.rate("h2d", "pinned"), probe.rate("d2h", "pinned")
    candidates = [(r, d) for r, d in ((h2d, "H2D"), (d2h, "D2H")) if r is not None]
    if not candidates:
        return
    best, direction = max(candidates)
    link_rate = probe.link_theoretical_bytes_per_s
    if link_rate is None and gpu is not None:
        link_rate = gpu.link.theoretical_bytes_per_s
    if not link_rate or link_rate <= 0:
        return
    fraction = best / link_rate
    if fraction >= t.probe_link_fraction:
        return
    link_text = ""
    if gpu is not None and (gpu.link.gen is not None or gpu.link.width is not None):
        link_text = f" ({fmt_link(gpu.link.gen, gpu.link.width)})"
    message = (f"best pinned copy {fmt_rate(best)} ({direction}) = {fmt_pct(fraction)} of the link's"
               f" {fmt_rate(link_rate)}{link_text}")
    advice = (f"Check the link state under load (LnkSta in `{lspci_target(gpu.pci_bus_id if gpu else None)}`),"
              f" NUMA placement: {_numa_advice(gpu)}, and other traffic on the link (the probe shares it"
              " with every process using this GPU).")
    subject = f"gpu{probe.gpu_index}" if probe.gpu_index is not None else "host"
    yield Found("warning", message, advice, subject=subject,
                best_bytes_per_s=best, link_theoretical_bytes_per_s=link_rate, fraction=fraction,
                h2d_pinned_bytes_per_s=h2d, d2h_pinned_bytes_per_s=d2h,
                numa_node=gpu.numa_node if gpu else None)


def _gpu_by_index(snap: Snapshot, index: int | None) -> Gpu | None:
    if index is None:
        return None
    return next((g for g in snap.gpus if g.index == index), None)


def _numa_advice(gpu: Gpu | None) -> str:
    if gpu is not None and gpu.numa_node is not None:
        n = gpu.numa_node
        return (f"bind the process to the GPU's NUMA node {n}"
                f" (`numactl --cpunodebind={n} --membind={n} <command>`)")
    if gpu is not None and gpu.cpu_affinity:
        cpus = gpu.cpu_affinity
        return (f"run the process on the GPU's near CPUs {cpus} with its memory local to them"
                f" (`numactl --physcpubind={cpus} --localalloc <command>`)")
    return ("bind the process to the GPU's NUMA node, which `nvidia-smi topo -m` shows"
            " (`numactl --cpunodebind=N --membind=N <command>`)")
