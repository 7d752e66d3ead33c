"""Rule ``slow-pinned-copies``: a traced process's own pinned copies ran well below what the probe
measured on the same GPU and direction (CUPTI figures only: the GPU time of each copy).

Inputs (``ProcessPinned.copies``): ``bulk`` (per direction, copies of 1 MiB or more from or to pinned
memory: bytes over their GPU time and that GPU time, in the tracer's window) and the GPU they went to
(``Snapshot.copy_gpu``); the latest successful probe of that GPU. Silent when any is missing.
The finding names the likely causes with the numbers the snapshot has: other traffic on the link,
the GPU's NUMA node (pinned buffers on another node cross the socket interconnect), and the share of
the copies on the legacy default stream (serialised with that stream's kernels).
Silent too while the probe's own copies may be in the process's window (the probe ran less than
``PROBE_QUIET_S`` ago): they share the link and would slow the copies they are compared with.
"""
from __future__ import annotations

from collections.abc import Iterator

from ..model import Gpu, ProcessPinned, Snapshot
from ..model.kinds import DIRECTIONS, Direction
from ..units import fmt_pct, fmt_rate, fmt_seconds, fmt_share
from .rule import Found, rule
from .thresholds import Thresholds

PROBE_QUIET_S = 10.0  # the tracer's window (5 s of GPU time) plus its report and poll delays


@rule("slow-pinned-copies",
      "traced with CUPTI: pinned copies of 1 MiB+ under {slow_copy_fraction} of the probe's rate over"
      " {slow_copy_min_busy_s}+ of copying",
      over="processes", thresholds=("slow_copy_fraction", "slow_copy_min_busy_s"))
def slow_pinned_copies(p: ProcessPinned, snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    probe = snap.probe
    if probe is None or probe.status != "ok" or p.copies is None:
        return
    if snap.time - (probe.time + (probe.duration_s or 0.0)) < PROBE_QUIET_S:
        return
    for d in DIRECTIONS:
        bulk = p.copies.bulk_of(d)
        rate = bulk.achieved_bytes_per_s if bulk is not None else None
        busy = bulk.busy_s if bulk is not None else None
        if rate is None or busy is None or busy < t.slow_copy_min_busy_s:
            continue
        gpu = snap.copy_gpu(p)
        if gpu is None or (probe.gpu_index is not None and probe.gpu_index != gpu.index):
            continue
        ref = probe.rate(d, "pinned")
        if not ref or rate >= t.slow_copy_fraction * ref:
            continue
        yield _found(p, d, rate, busy, ref, gpu)


def _found(p: ProcessPinned, d: Direction, rate: float, busy: float, ref: float, gpu: Gpu) -> Found:
    label = "H2D" if d == "h2d" else "D2H"
    message = (f"{label} copies of 1 MiB+ from pinned memory ran at {fmt_rate(rate)} (CUPTI, {fmt_seconds(busy)} of"
               f" copying), {fmt_share(rate, ref)} of the {fmt_rate(ref)} the probe measured on GPU {gpu.index}")
    causes: list[str] = []
    values: dict[str, object] = {}
    link = gpu.pcie.rx_bytes_per_s if d == "h2d" else gpu.pcie.tx_bytes_per_s
    own = p.copies.bytes_per_s(d) if p.copies is not None else None
    if link is not None:
        other = max(link - (own or 0.0), 0.0)
        # TX is not only device-to-host data: a host-to-device DMA makes the GPU send its read
        # requests upstream, and those count as TX too.
        tx_note = ("; TX also carries the GPU's read requests for host-to-device copies" if d == "d2h" else "")
        causes.append(f"other traffic on the link: it carried {fmt_rate(link)} {'RX' if d == 'h2d' else 'TX'}"
                      f" (link bytes{tx_note}), of which this process's {label} copies {fmt_rate(own)}, so about"
                      f" {fmt_rate(other)} came from elsewhere (other processes, peer-to-peer, NIC DMA)")
        values.update(link_bytes_per_s=link, other_link_bytes_per_s=other)
    if gpu.numa_node is not None:
        causes.append(f"NUMA-remote buffers: GPU {gpu.index} is on NUMA node {gpu.numa_node}; pinned buffers on"
                      f" another node cross the socket interconnect (run the job with"
                      f" `numactl --cpunodebind={gpu.numa_node} --membind={gpu.numa_node}`)")
        values["gpu_numa_node"] = gpu.numa_node
    else:
        causes.append("NUMA-remote buffers: pinned buffers on another node than the GPU's cross the socket"
                      " interconnect (`nvidia-smi topo -m` shows the GPU's node)")
    share = p.copies.default_stream_share if p.copies is not None else None
    if share is not None:
        causes.append(f"the default stream: {fmt_pct(share)} of these bytes went over the legacy default"
                      f" stream, where each copy waits for that stream's kernels and they for it (copy on a"
                      f" separate stream with non_blocking=True / cudaMemcpyAsync)")
        values["default_stream_share"] = share
    else:
        causes.append("copies on the default stream, serialised with its kernels")
    advice = "Likely causes, with this snapshot's figures: " + "; ".join(causes) + "."
    values.update(pid=p.pid, direction=d, achieved_bytes_per_s=rate, busy_s=busy,
                  probe_pinned_bytes_per_s=ref, gpu_index=gpu.index, fraction=rate / ref)
    return Found.with_values("warning", message, advice, values)
