"""Metrics of the latest probe in the snapshot: pinned vs pageable copy rates, speedup, age.

Only copies of a quick probe (or the quick-size rows of another kind) are exported: one size per
direction, the largest one measured for both pinned and pageable memory, so the two rates compare
like with like. The age is taken against the snapshot's time, so a replay shows the age the
recording had, not how long ago it was recorded.
"""
from __future__ import annotations

from prometheus_client.core import Metric

from ...model import ProbeResult
from ...model.kinds import DIRECTIONS, Direction, ProbeMemory
from ..state import StateView
from .base import Gauge, emit


def common_size(result: ProbeResult, direction: Direction) -> int | None:
    """The largest copy size with a pinned and a pageable rate in ``direction`` (None: none)."""
    sizes: dict[int, set[ProbeMemory]] = {}
    for m in result.measurements:
        if m.kind == "copy" and m.direction == direction and m.bytes_per_s is not None:
            sizes.setdefault(m.size_bytes, set()).add(m.memory)
    both = [s for s, mem in sizes.items() if {"pinned", "pageable"} <= mem]
    return max(both) if both else None


def families(view: StateView) -> list[Metric]:
    snap = view.snapshot
    if snap is None or snap.probe is None:
        return []
    r = snap.probe
    ok = Gauge("probe_ok", "1 when the probe served measured, 0 when none has yet (no CuPy, no GPU...); a later "
               "failure leaves the last measurement served", ("gpu",))
    ts = Gauge("probe_timestamp_seconds", "when the latest probe started (unix time)", ("gpu",))
    age = Gauge("probe_age_seconds", "age of the latest probe at the snapshot's time", ("gpu",))
    dur = Gauge("probe_duration_seconds", "how long the latest probe ran", ("gpu",))
    rate = Gauge("probe_copy_bytes_per_second", "bytes/s of the latest probe's copies",
                 ("gpu", "memory", "direction", "size_bytes"))
    speedup = Gauge("probe_pinned_speedup_ratio", "pinned over pageable copy rate at the same size",
                    ("gpu", "direction", "size_bytes"))
    link_share = Gauge("probe_pinned_link_share_ratio", "pinned copy rate over the link's theoretical rate",
                       ("gpu", "direction", "size_bytes"))
    gpu = (r.gpu_index,)
    ok.add(gpu, 1 if r.status == "ok" else 0)
    ts.add(gpu, r.time)
    age.add(gpu, max(0.0, snap.time - r.time))
    dur.add(gpu, r.duration_s)
    if r.status == "ok":
        for d in DIRECTIONS:
            size = common_size(r, d)
            if size is None:
                continue
            p, g = r.rate(d, "pinned", size), r.rate(d, "pageable", size)
            rate.add(gpu + ("pinned", d, size), p)
            rate.add(gpu + ("pageable", d, size), g)
            if p is not None and g:
                speedup.add(gpu + (d, size), p / g)
            if p is not None and r.link_theoretical_bytes_per_s:
                link_share.add(gpu + (d, size), p / r.link_theoretical_bytes_per_s)
    return emit(ok, ts, age, dur, rate, speedup, link_share)
