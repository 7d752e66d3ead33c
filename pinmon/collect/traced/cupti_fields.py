"""A traced process's copies and allocations (``Copies``, ``Allocations``) from its report.

The report's ``copies`` (CUPTI's where CUPTI ran, the hooks' otherwise: ``pinmon/trace/merge.py``) give
one ``CopyStats`` per direction and host memory kind: the rate over the tracer's window, the bytes and
copies since the program started and, from CUPTI only, the achieved rate (bytes over GPU time) and the
per-copy rate percentiles; ``wc.readbacks`` the count of device-to-host copies into write-combined
memory. CUPTI's window adds the bulk pinned copies on the busiest GPU (``pinned_bulk``), their share on
the default stream and that GPU's bus id. ``allocs`` gives the allocations.

A report is untrusted input: every value is type-checked and bounded here, and a missing or odd one
is ``None`` ("unknown"), never a guess; a rate is only taken within physical bounds (``MIN_GPU_S``,
``MAX_BYTES_PER_S``), a byte size within ``limits.MAX_SIZE_BYTES``. One host memory kind's window rate
past what a link carries makes every window rate of that direction unknown: the direction's total
would otherwise read smaller than it was, never larger.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from ...limits import MAX_SIZE_BYTES
from ...model import Allocations, BulkCopies, Copies, CopyStats
from ...model.kinds import DIRECTIONS, HostMemoryKind, Instrument

ENGINES: tuple[Instrument, ...] = ("cupti", "hooks")
_BUS_ID = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")
# Physical bounds on a report's rates. A copy's GPU time is at least a microsecond (CUPTI's timestamps
# of the smallest copy are microseconds apart), so a rate is computed only from at least that much; and
# no host link moves more than MAX_BYTES_PER_S (twice NVLink-C2C's 450 GB/s a direction, the fastest
# host link; PCIe 6.0 x16 is 121 GB/s): a rate above it is no measurement. A forged GPU time of 1e-300 s
# would otherwise make an infinite rate.
MIN_GPU_S = 1e-6
MAX_BYTES_PER_S = 1e12
# The report's host memory kinds, in the order their stats are listed; managed and other only where
# the process made such copies.
ALWAYS_KINDS: tuple[HostMemoryKind, ...] = ("pinned", "pageable")
SOMETIMES_KINDS: tuple[HostMemoryKind, ...] = ("managed", "other")
MAX_COUNT = 2**63 - 1


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        v = float(v)
    except OverflowError:  # an int past the float range
        return None
    return v if math.isfinite(v) and v >= 0 else None


def _rate(v: Any) -> float | None:
    """A report's rate (bytes/s), or None when it is not one a link can carry."""
    v = _num(v)
    return v if v is not None and v <= MAX_BYTES_PER_S else None


def _count(v: Any) -> int | None:
    """A count (or a byte total) of the report: a number from 0 to 2**63 - 1, whole (a fraction is cut),
    else None."""
    v = _num(v)
    return int(v) if v is not None and v <= MAX_COUNT else None


def _size(v: Any) -> int | None:
    """A byte size of the report: an integer no host holds more of than ``MAX_SIZE_BYTES``, else None."""
    v = _count(v)
    return v if v is not None and v <= MAX_SIZE_BYTES else None


def rate_over(nbytes: float | None, gpu_s: float | None) -> float | None:
    """``nbytes / gpu_s`` within the physical bounds above, else None."""
    if nbytes is None or gpu_s is None or gpu_s < MIN_GPU_S:
        return None
    return _rate(nbytes / gpu_s)


def _get(d: Any, *keys) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def engine_of(report: Any) -> Instrument | None:
    """The engine the report's figures come from: "cupti", else "hooks"; None for no report."""
    if not isinstance(report, dict):
        return None
    v = report.get("engine")
    return "cupti" if v == "cupti" else "hooks"


def _window_s(report: dict, engine: Instrument) -> float | None:
    if engine == "cupti":
        return _num(_get(report, "cupti", "window", "s"))
    return _num(report.get("window_s"))


def copies_of(report: Any) -> Copies | None:
    """The report's copies; None where it has none (no copy table, no readbacks, no CUPTI window)."""
    engine = engine_of(report)
    if engine is None:
        return None
    stats = _stats(report.get("copies"))
    readbacks = _count(_get(report, "wc", "readbacks"))
    if readbacks is not None:
        stats.append(CopyStats(direction="d2h", memory="write_combined", count=readbacks))
    bulk, share, bus = _bulk(report) if engine == "cupti" else ((), None, None)
    if stats == [] and not bulk and bus is None and not isinstance(report.get("copies"), dict):
        return None
    return Copies(instrument=engine, window_s=_window_s(report, engine), stats=tuple(stats), bulk=bulk,
                  default_stream_share=share, gpu_pci_bus_id=bus)


def _stats(copies: Any) -> list[CopyStats]:
    """One stat per direction and host memory kind the report's ``copies`` has a row for."""
    if not isinstance(copies, dict):
        return []
    out: list[CopyStats] = []
    for d in DIRECTIONS:
        rows = copies.get(d)
        if not isinstance(rows, dict):
            continue
        forged = False
        stats = []
        for mem in ALWAYS_KINDS + SOMETIMES_KINDS:
            row = rows.get(mem)
            if not isinstance(row, dict):
                continue
            window = _num(row.get("bytes_per_s"))
            forged = forged or (window is not None and _rate(window) is None)
            stat = CopyStats(direction=d, memory=mem, bytes_per_s=_rate(window), bytes=_count(row.get("bytes")),
                             count=_count(row.get("count")),
                             achieved_bytes_per_s=_rate(row.get("achieved_bytes_per_s")),
                             rate_p50_bytes_per_s=_rate(row.get("rate_p50")),
                             rate_p10_bytes_per_s=_rate(row.get("rate_p10")))
            if mem in SOMETIMES_KINDS and not (stat.count or stat.bytes or stat.bytes_per_s):
                continue
            stats.append(stat)
        if forged:
            stats = [dataclasses.replace(s, bytes_per_s=None) for s in stats]
        out += stats
    return out


def _bulk(report: dict) -> tuple[tuple[BulkCopies, ...], float | None, str | None]:
    """(bulk pinned copies per direction on the busiest GPU, their share on the default stream, that
    GPU's bus id) from CUPTI's window."""
    bulk = _get(report, "cupti", "window", "pinned_bulk")
    gpu = _busiest_device(bulk)
    if gpu is None:
        return (), None, None
    out = []
    shares = []
    for d in DIRECTIONS:
        row = _get(bulk, d, gpu)
        if not isinstance(row, dict):
            continue
        busy = _num(row.get("gpu_s"))
        nbytes = _num(row.get("bytes"))
        out.append(BulkCopies(direction=d, achieved_bytes_per_s=rate_over(nbytes, busy), busy_s=busy))
        default = _num(row.get("default_stream_bytes"))
        if default is not None and nbytes:
            shares.append((min(default, nbytes), nbytes))
    share = sum(a for a, _ in shares) / sum(b for _, b in shares) if shares else None
    bus = _get(report, "cupti", "devices", gpu, "pci_bus_id")
    return tuple(out), share, bus if isinstance(bus, str) and _BUS_ID.match(bus) else None


def _busiest_device(bulk: Any) -> str | None:
    """The device id (a string of digits) with the most bulk pinned bytes in the window."""
    if not isinstance(bulk, dict):
        return None
    totals: dict = {}
    for d in DIRECTIONS:
        rows = bulk.get(d)
        if not isinstance(rows, dict):
            continue
        for dev, row in list(rows.items())[:64]:
            n = _num(_get(row, "bytes"))
            if isinstance(dev, str) and dev.isdigit() and len(dev) < 6 and n is not None:
                totals[dev] = totals.get(dev, 0.0) + n
    if not totals:
        return None
    return max(sorted(totals), key=lambda k: totals[k])


def allocations_of(report: Any) -> Allocations | None:
    """The report's pinned allocations (CUPTI's where the report says they are, the hooks' otherwise);
    None where it has none."""
    engine = engine_of(report)
    allocs = report.get("allocs") if engine is not None else None
    if not isinstance(allocs, dict):
        return None
    instrument: Instrument = "cupti" if engine == "cupti" and allocs.get("from") == "cupti" else "hooks"
    wc = _count(allocs.get("write_combined"))
    return Allocations(
        instrument=instrument, window_s=_window_s(report, instrument), count=_count(allocs.get("count")),
        per_s=_num(allocs.get("per_s")), frees=_count(allocs.get("frees")), frees_per_s=_num(allocs.get("frees_per_s")),
        median_bytes=_size(allocs.get("median_bytes")), flags={"write_combined": wc} if wc is not None else {},
        registrations=_count(allocs.get("registers")))
