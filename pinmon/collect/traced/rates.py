"""What a tracer's report may claim of rates: copies within its GPUs' links, allocations within what a
driver can do.

``cupti_fields.py`` already refuses rates no host link carries (``MAX_BYTES_PER_S``); here a report's
rates are held to the box the snapshot describes:

- a process's copies of one direction over a window (``bytes_per_s`` of each host memory kind, and
  their sum) at most the sum of its host's GPUs' links: each GPU's rated payload rate
  (``Link.max_theoretical_bytes_per_s``, else the rate it runs at now), or ``MAX_BYTES_PER_S`` for a
  GPU whose link is unknown or that reaches the host over NVLink-C2C (Grace Hopper and Grace Blackwell
  superchips, whose PCIe link is not their host link);
- a rate over GPU time (achieved, per-copy percentiles, bulk copies) at most the fastest of those links:
  one copy runs on one link;
- with no GPU in the snapshot (no NVML), ``MAX_BYTES_PER_S`` for both;
- pinned allocations and releases at most ``MAX_ALLOCS_PER_S`` a second.

A rate past its ceiling is no measurement: it becomes unknown (``None``), never the ceiling, and one
host memory kind's window rate past it makes every window rate of that direction unknown (the
direction's total would otherwise read smaller than it was). The row's copies get a note, and the
caller a pid for its notice.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...model import Allocations, Copies, Gpu, ProcessPinned
from ...model.kinds import DIRECTIONS
from ...model.serial import evolve
from ...units import fmt_rate
from .cupti_fields import MAX_BYTES_PER_S

# Pinned allocations (or releases) a second one process can make: a small cudaHostAlloc costs ~9 us
# (FACTS: measured on an H200 host, after the first ~1 ms one), so one thread makes ~1.1e5 a second,
# and the driver maps each into the process under its address-space lock; 1e6 is ten times that.
MAX_ALLOCS_PER_S = 1e6
# GPUs whose host link is NVLink-C2C, as NVML names them: their PCIe link does not bound host copies.
C2C_GPU_NAMES = ("GH200", "GB200", "GB300")


@dataclass(frozen=True)
class RateCeilings:
    """The most a report's rates may be, in bytes (or allocations) a second."""

    window_bytes_per_s: float = MAX_BYTES_PER_S  # one direction's copies over a window: every link
    copy_bytes_per_s: float = MAX_BYTES_PER_S    # over GPU time: the fastest link
    allocs_per_s: float = MAX_ALLOCS_PER_S


def _link_ceiling(g: Gpu) -> float:
    name = g.name or ""
    if any(c2c in name for c2c in C2C_GPU_NAMES):
        return MAX_BYTES_PER_S
    rate = g.link.max_theoretical_bytes_per_s or g.link.theoretical_bytes_per_s
    return min(rate, MAX_BYTES_PER_S) if rate else MAX_BYTES_PER_S


def ceilings_of(gpus: Sequence[Gpu]) -> RateCeilings:
    """The ceilings on the host these GPUs are in; the physical ones where no GPU is known."""
    links = [_link_ceiling(g) for g in gpus]
    if not links:
        return RateCeilings()
    return RateCeilings(window_bytes_per_s=min(sum(links), MAX_BYTES_PER_S), copy_bytes_per_s=max(links))


def _within(value: float | None, ceiling: float) -> float | None:
    return value if value is None or value <= ceiling else None


def _bound_copies(c: Copies, ceil: RateCeilings) -> Copies:
    stats = list(c.stats)
    for d in DIRECTIONS:
        rates = [s.bytes_per_s for s in stats if s.direction == d and s.bytes_per_s is not None]
        if any(r > ceil.window_bytes_per_s for r in rates) or sum(rates) > ceil.window_bytes_per_s:
            stats = [dataclasses.replace(s, bytes_per_s=None) if s.direction == d else s for s in stats]
    stats = [dataclasses.replace(
        s, achieved_bytes_per_s=_within(s.achieved_bytes_per_s, ceil.copy_bytes_per_s),
        rate_p50_bytes_per_s=_within(s.rate_p50_bytes_per_s, ceil.copy_bytes_per_s),
        rate_p10_bytes_per_s=_within(s.rate_p10_bytes_per_s, ceil.copy_bytes_per_s)) for s in stats]
    bulk = tuple(dataclasses.replace(b, achieved_bytes_per_s=_within(b.achieved_bytes_per_s, ceil.copy_bytes_per_s))
                 for b in c.bulk)
    if tuple(stats) == c.stats and bulk == c.bulk:
        return c
    note = (f"a rate past what the host's GPU links carry ({fmt_rate(ceil.window_bytes_per_s)} a direction,"
            f" {fmt_rate(ceil.copy_bytes_per_s)} a link) is unknown")
    return evolve(c, stats=tuple(stats), bulk=bulk, notes=c.notes + (note,))


def _bound_allocations(a: Allocations, ceil: RateCeilings) -> Allocations:
    per_s, frees = _within(a.per_s, ceil.allocs_per_s), _within(a.frees_per_s, ceil.allocs_per_s)
    if per_s == a.per_s and frees == a.frees_per_s:
        return a
    return evolve(a, per_s=per_s, frees_per_s=frees)


def bound_rates(rows: Iterable[ProcessPinned], ceil: RateCeilings) -> tuple[list[ProcessPinned], list[int]]:
    """(rows with every traced row's rates within ``ceil``, pids whose rates were made unknown)."""
    out, pids = [], []
    for r in rows:
        if r.source == "traced":
            copies = None if r.copies is None else _bound_copies(r.copies, ceil)
            allocs = None if r.allocations is None else _bound_allocations(r.allocations, ceil)
            if copies is not r.copies or allocs is not r.allocations:
                r = evolve(r, copies=copies, allocations=allocs)
                pids.append(r.pid)
        out.append(r)
    return out, pids


def rates_notice(pids: list[int], ceil: RateCeilings, shown: int = 5) -> str | None:
    """One line naming the traced processes whose reported rates were past their ceilings, or None."""
    if not pids:
        return None
    more = len(pids) - shown
    names = ", ".join(str(p) for p in pids[:shown]) + (f" and {more} more" if more > 0 else "")
    return (f"trace reports: pid {names} reported copy rates past what the host's GPU links carry"
            f" ({fmt_rate(ceil.window_bytes_per_s)} a direction) or more than {ceil.allocs_per_s:,.0f} pinned"
            " allocations a second: those rates are unknown")
