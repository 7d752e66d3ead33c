"""The link's own traffic while a probe ran: where the collector's readings and a probe result meet.

A probe that shares its link with another job measures what is left of the link, not the link: on
a Gen5 x16 link carrying 59 GB/s of someone else's H2D copies, a pinned H2D probe reads ~30 GB/s.
The probe engine times copies and knows nothing of NVML; the collector reads each GPU's link every
interval. Here the readings of the probe's GPU whose intervals overlap the probe are averaged into
the result (``ProbeResult.link_*``), and the traffic beyond what the probe itself moved is
estimated, so the Probe panel can say when a result was shared.

No Textual, no I/O: a function of a probe result and snapshots.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ...model import EXACT_PCIE_METHODS, ProbeResult, Snapshot

# Other traffic below this is noise (link protocol overhead over the probe's own bytes is ~8%,
# an uncounted warm-up copy, readings that run past the probe): not worth a warning.
SHARED_MIN_BYTES_PER_S = 1e9
# ... nor below this share of the link's theoretical rate.
SHARED_MIN_LINK_SHARE = 0.05
# Probe measurements that move bytes over the link: copies (one warm-up before the timed
# repeats) and GPU kernels reading host memory (host to device).
_WARMUPS = 1


def probe_window(result: ProbeResult) -> tuple[float, float] | None:
    """(start, end) of the probe in wall-clock seconds, None without a duration."""
    if result.duration_s is None:
        return None
    return result.time, result.time + max(0.0, result.duration_s)


def link_join_due(result: ProbeResult, snapshot: Snapshot) -> bool:
    """Whether ``snapshot`` is a reading taken at or after the probe's end: the last one that can
    overlap it, so the join can be made."""
    window = probe_window(result)
    return window is not None and snapshot.time >= window[1]


def join_link(result: ProbeResult, snapshots: Iterable[Snapshot], default_interval_s: float) -> ProbeResult:
    """``result`` with its ``link_*`` fields: the time-weighted mean of the RX/TX readings of its
    GPU over the snapshots whose reading intervals overlap the probe. No overlapping reading (no
    NVML, a lost GPU, a probe between readings of a stalled collector): the fields stay None,
    except ``link_window_s`` 0.0, which says the join was made."""
    window = probe_window(result)
    if window is None or result.gpu_index is None:
        return result
    start, end = window
    seconds = rx_bytes = tx_bytes = 0.0
    methods = []
    for snap in snapshots:
        gpu = next((g for g in snap.gpus if g.index == result.gpu_index), None)
        if gpu is None or gpu.lost:
            continue
        p = gpu.pcie
        span = p.interval_s or snap.interval_s or default_interval_s
        if not span or span <= 0 or snap.time <= start or snap.time - span >= end:
            continue  # not overlapping the probe
        if p.rx_bytes_per_s is None or p.tx_bytes_per_s is None:
            continue
        seconds += span
        rx_bytes += p.rx_bytes_per_s * span
        tx_bytes += p.tx_bytes_per_s * span
        methods.append(p.method)
    if not seconds:
        return dataclasses.replace(result, link_window_s=0.0)
    # Mixed methods (the collector fell back mid-probe): the result is as exact as its worst reading.
    exact = all(m in EXACT_PCIE_METHODS for m in methods)
    method = methods[-1] if exact or len(set(methods)) == 1 else "sampled"
    return dataclasses.replace(result, link_rx_bytes_per_s=rx_bytes / seconds, link_tx_bytes_per_s=tx_bytes / seconds,
                               link_window_s=seconds, link_method=method)


def probe_own_bytes(result: ProbeResult) -> tuple[float, float]:
    """(RX, TX) bytes the probe itself put on the link, as its measurements record them: each
    copy's size times its repeats and a warm-up; H2D copies and kernels reading host memory are
    RX (into the GPU), D2H copies TX."""
    rx = tx = 0.0
    for m in result.measurements:
        count = (m.repeats or 1) + _WARMUPS
        if (m.kind == "copy" and m.direction == "h2d") or m.kind == "kernel_read":
            rx += m.size_bytes * count
        elif m.kind == "copy" and m.direction == "d2h":
            tx += m.size_bytes * count
    return rx, tx


def other_traffic(result: ProbeResult) -> tuple[float, float] | None:
    """(RX, TX) bytes/s on the link besides the probe's own, over the joined readings' span; None
    where that cannot be told: no join yet, no reading, or readings that sampled 20 ms of each
    interval (they may or may not have caught the probe's copies)."""
    if (result.link_window_s is None or result.link_window_s <= 0 or result.link_method not in EXACT_PCIE_METHODS
            or result.link_rx_bytes_per_s is None or result.link_tx_bytes_per_s is None):
        return None
    own_rx, own_tx = probe_own_bytes(result)
    w = result.link_window_s
    return (max(0.0, result.link_rx_bytes_per_s - own_rx / w), max(0.0, result.link_tx_bytes_per_s - own_tx / w))


def shared_directions(result: ProbeResult) -> dict[str, float]:
    """Directions ("h2d", "d2h") whose link carried clearly more than the probe moved, with the
    other traffic's rate: the probe's figures there are what the other job left, not the link's."""
    other = other_traffic(result)
    if other is None:
        return {}
    least = max(SHARED_MIN_BYTES_PER_S, SHARED_MIN_LINK_SHARE * (result.link_theoretical_bytes_per_s or 0.0))
    return {d: rate for d, rate in zip(("h2d", "d2h"), other) if rate >= least}
