"""The ProcessPinned fields that a traced process's CUPTI figures fill in (``cupti`` of its report).

A report is untrusted input: every value is type-checked and bounded here, and a missing or odd one
is ``None`` ("unknown"), never a guess; a rate is only taken within physical bounds (``MIN_GPU_S``,
``MAX_BYTES_PER_S``). The figures the hooks also have (pinned bytes, allocation
rate, pageable copy rate) are already CUPTI's in a report where CUPTI ran (``pinmon/trace/merge.py``);
this module adds what only CUPTI knows, and (``transfer_fields``, for either engine) the copies per
direction and host memory kind from the report's ``copies``.
"""
from __future__ import annotations

import math
import re
from typing import Any, Optional

from ...model import TRANSFER_FIGURES, TRANSFER_KEYS

ENGINES = ("cupti", "hooks")
_BUS_ID = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")
# Physical bounds on a report's rates. A copy's GPU time is at least a microsecond (CUPTI's timestamps
# of the smallest copy are microseconds apart), so a rate is computed only from at least that much; and
# no host link moves more than MAX_BYTES_PER_S (twice NVLink-C2C's 450 GB/s a direction, the fastest
# host link; PCIe 6.0 x16 is 121 GB/s): a rate above it is no measurement. A forged GPU time of 1e-300 s
# would otherwise make an infinite rate.
MIN_GPU_S = 1e-6
MAX_BYTES_PER_S = 1e12


def _num(v: Any) -> Optional[float]:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        v = float(v)
    except OverflowError:  # an int past the float range
        return None
    return v if math.isfinite(v) and v >= 0 else None


def _rate(v: Any) -> Optional[float]:
    """A report's rate (bytes/s), or None when it is not one a link can carry."""
    v = _num(v)
    return v if v is not None and v <= MAX_BYTES_PER_S else None


def rate_over(nbytes: Optional[float], gpu_s: Optional[float]) -> Optional[float]:
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


def engine_of(report: dict) -> Optional[str]:
    v = report.get("engine") if isinstance(report, dict) else None
    return v if v in ENGINES else ("hooks" if isinstance(report, dict) else None)


def cupti_fields(report: dict) -> dict:
    """ProcessPinned fields from a report's CUPTI figures; only ``trace_engine`` without them."""
    out: dict = {"trace_engine": engine_of(report)}
    if out["trace_engine"] != "cupti":
        return out
    window = _get(report, "cupti", "window")
    if not isinstance(window, dict):
        return out
    copies = window.get("copies")
    for d in ("h2d", "d2h"):
        rows = _get(copies, d)
        if isinstance(rows, dict):
            values = [_num(_get(rows, mem, "bytes_per_s")) for mem in list(rows)[:8]]
            known = [r for r in values if r is not None]
            # One kind's rate past what a link carries makes the direction's sum unknown, not smaller.
            out[f"{d}_copy_bytes_per_s"] = _rate(sum(known)) if known else None
    bulk = window.get("pinned_bulk")
    gpu = _busiest_device(bulk)
    if gpu is None:
        return out
    shares = []
    for d in ("h2d", "d2h"):
        row = _get(bulk, d, gpu)
        if not isinstance(row, dict):
            continue
        busy = _num(row.get("gpu_s"))
        nbytes = _num(row.get("bytes"))
        out[f"{d}_pinned_bulk_busy_s"] = busy
        out[f"{d}_pinned_bulk_bytes_per_s"] = rate_over(nbytes, busy)
        default = _num(row.get("default_stream_bytes"))
        if default is not None and nbytes:
            shares.append((min(default, nbytes), nbytes))
    if shares:
        out["pinned_bulk_default_stream_share"] = sum(a for a, _ in shares) / sum(b for _, b in shares)
    bus = _get(report, "cupti", "devices", gpu, "pci_bus_id")
    if isinstance(bus, str) and _BUS_ID.match(bus):
        out["copy_gpu_pci_bus_id"] = bus
    return out


def _busiest_device(bulk: Any) -> Optional[str]:
    """The device id (a string of digits) with the most bulk pinned bytes in the window."""
    if not isinstance(bulk, dict):
        return None
    totals: dict = {}
    for d in ("h2d", "d2h"):
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


def transfer_fields(report: dict) -> dict:
    """``{"transfers": ...}`` from the report's ``copies`` (CUPTI's where CUPTI ran, the hooks'
    otherwise; see ``pinmon/trace/merge.py``): per "direction.kind", the window rate and, from
    CUPTI only, the achieved rate and per-copy percentiles. A figure that is missing or not a finite
    number >= 0 is None; ``{"transfers": None}`` when the report has no ``copies`` at all."""
    copies = report.get("copies") if isinstance(report, dict) else None
    if not isinstance(copies, dict):
        return {"transfers": None}
    out = {}
    for key in TRANSFER_KEYS:
        d, mem = key.split(".")
        row = _get(copies, d, mem)
        out[key] = {name: _rate(row.get(name)) if isinstance(row, dict) else None for name in TRANSFER_FIGURES}
    return {"transfers": out}
