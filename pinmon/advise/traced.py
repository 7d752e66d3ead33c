"""Rules on what processes do with pinned memory: small allocations in a loop, device-to-host copies
into write-combined memory, bulk copies from pageable memory, pinned bytes held beyond the request.

These figures come from the in-process tracer (``pinmon trace``) or from uprobes attached to a running
process's libcuda (``pinmon attach``, ``--attach``): the rules read a row's ``Copies`` and
``Allocations`` whatever measured them, with the same thresholds, and the message says which
("(traced)", "(attached)"). For other processes the rules stay silent, except ``wc-cpu-readback``'s note
on write-combined memory held, which the /proc/PID/maps estimate sees. A traced finding's message names the call site of its own behaviour
(``ProcessPinned.call_sites``), quoted: it is text from a report file, shown as data (printable,
bounded) and never part of the advice. Where the snapshot has a probe result, the advice quotes what
the probe measured on this box.
"""
from __future__ import annotations

from collections.abc import Iterator

from ..model import ProbeResult, ProcessPinned, Snapshot
from ..units import fmt_bytes, fmt_int, fmt_pct, fmt_rate, fmt_ratio, fmt_seconds, printable
from .common import held_label, probe_ok, source_label
from .rule import Found, rule
from .thresholds import Thresholds

SITE_CHARS = 160


def _site(p: ProcessPinned, *categories: str) -> str | None:
    """The tracer's call site (file:line) for the first of ``categories`` it has, as printable text."""
    for category in categories:
        site = p.call_sites.get(category)
        if site:
            return printable(site, SITE_CHARS)
    return None


def _at(site: str | None, verb: str = "at") -> str:
    """``, at "file:line"``: the site quoted, so it reads as the data it is."""
    if not site:
        return ""
    return ', {} "{}"'.format(verb, site.replace('"', '\\"'))


@rule("pinned-small-allocs",
      "{small_alloc_rate_per_s}+ pinned allocations/s with a median under {small_alloc_median_bytes}"
      " (allocate once, reuse)",
      over="processes", thresholds=("small_alloc_rate_per_s", "small_alloc_median_bytes"))
def pinned_small_allocs(p: ProcessPinned, snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    allocs = p.allocations
    if allocs is None:
        return
    rate, median = allocs.per_s, allocs.median_bytes
    if rate is None or median is None:
        return
    if rate < t.small_alloc_rate_per_s or median >= t.small_alloc_median_bytes:
        return
    costs, probe_values = _alloc_costs(snap)
    site = _site(p, "alloc")
    message = f"{rate:.1f} pinned allocations/s, median {fmt_bytes(median)} {source_label(p)}{_at(site)}"
    advice = (f"Each cudaHostAlloc maps and pins pages through the driver and costs far more than malloc"
              f" ({costs}). Allocate pinned buffers once and reuse them, or take them from a pinned pool"
              f" (CuPy's pinned memory pool, PyTorch's caching host allocator behind `pin_memory()`).")
    yield Found("warning", message, advice, pid=p.pid, pinned_allocs_per_s=rate, median_alloc_bytes=median,
                call_site=site, **probe_values)


def _alloc_costs(snap: Snapshot) -> tuple[str, dict]:
    """The probe's steady-state pinned allocation times when it has them, else reference figures."""
    probe = probe_ok(snap)
    rows = []
    if probe is not None:
        seen = set()
        for m in sorted((m for m in probe.measurements
                         if m.kind == "alloc" and m.seconds is not None
                         and m.memory not in ("pageable", "device")),
                        # A service allocates over and over: quote the steady-state call, not
                        # the first one that also pays for the driver's set-up.
                        key=lambda m: (m.size_bytes, m.memory != "pinned",
                                       not (m.note or "").startswith("steady"))):
            if m.size_bytes not in seen:
                seen.add(m.size_bytes)
                rows.append(m)
    if rows:
        shown = rows[:3]
        text = "on this box the probe measured " + ", ".join(
            f"{fmt_bytes(m.size_bytes)} in {fmt_seconds(m.seconds)}" for m in shown)
        return text, {"probe_alloc_size_bytes": shown[0].size_bytes, "probe_alloc_seconds": shown[0].seconds}
    return ("measured on an H200 host: ~1 ms for a process's first call, ~9 us for each later 4 KiB one,"
            " ~6 ms for 16 MiB"), {}


_WC_ADVICE = ("Drop cudaHostAllocWriteCombined for buffers the CPU reads or that receive device-to-host"
              " copies; keep it only for upload buffers the CPU writes and the GPU reads.")


@rule("wc-cpu-readback",
      "traced or attached: device-to-host copies into write-combined memory, read uncached (info, any"
      " process: holds it)",
      over="processes", severities=("warning", "info"))
def wc_cpu_readback(p: ProcessPinned, snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    wc_bytes = p.held.write_combined_bytes
    readbacks = p.copies.wc_readbacks if p.copies is not None else None
    if readbacks is not None and readbacks > 0:
        # The tracer and the attach count device-to-host copies into write-combined memory (a CPU
        # load is not a call either sees): each lands in a buffer the CPU then reads, uncached.
        copies = readbacks
        site = _site(p, "wc_readback")
        held = f" ({fmt_bytes(wc_bytes)} held now)" if wc_bytes else ""
        message = (f"{fmt_int(copies)} device-to-host {'copy' if copies == 1 else 'copies'} {source_label(p)}"
                   f" into write-combined pinned memory{_at(site)}{held}: the CPU reads that memory"
                   f" uncached, on bare metal typically an order of magnitude slower than ordinary"
                   f" memory{_wc_measured(snap)}")
        yield Found("warning", message, _WC_ADVICE, pid=p.pid, wc_d2h_copies=copies,
                    write_combined_bytes=wc_bytes if wc_bytes else None, call_site=site)
    elif wc_bytes is not None and wc_bytes > 0:
        message = (f"holds {fmt_bytes(wc_bytes)} {held_label(p)} of write-combined pinned memory: fine for"
                   f" buffers the CPU only writes and the GPU reads; never read it from the CPU")
        yield Found("info", message, _WC_ADVICE, pid=p.pid, write_combined_bytes=wc_bytes)


def _wc_measured(snap: Snapshot) -> str:
    """What this box's probe measured reading write-combined vs ordinary pinned memory, if it did."""
    probe = probe_ok(snap)
    if probe is not None:
        wc_rate, pinned_rate = _probe_cpu_read(probe, "write_combined"), _probe_cpu_read(probe, "pinned")
        if wc_rate is not None and pinned_rate is not None:
            return (f"; this box's probe read write-combined memory at {fmt_rate(wc_rate)} vs"
                    f" {fmt_rate(pinned_rate)} from ordinary pinned memory")
    return ""


def _probe_cpu_read(probe: ProbeResult, memory: str) -> float | None:
    rows = [m for m in probe.measurements
            if m.kind == "cpu_read" and m.memory == memory and m.bytes_per_s is not None]
    return max(rows, key=lambda m: m.size_bytes).bytes_per_s if rows else None


@rule("pageable-bulk-copies", "{pageable_copy_bytes_per_s} or more of host-device copies from pageable memory",
      over="processes", thresholds=("pageable_copy_bytes_per_s",))
def pageable_bulk_copies(p: ProcessPinned, snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    rate = p.copies.pageable_bytes_per_s if p.copies is not None else None
    if rate is None or rate < t.pageable_copy_bytes_per_s:
        return
    speedup_text = ""
    speedup_values: dict[str, float] = {}
    probe = probe_ok(snap)
    if probe is not None:
        pinned, pageable = probe.rate("h2d", "pinned"), probe.rate("h2d", "pageable")
        if pinned and pageable:
            speedup = pinned / pageable
            speedup_text = (f" On this box pinned H2D ran {fmt_rate(pinned)} vs {fmt_rate(pageable)}"
                            f" pageable ({fmt_ratio(speedup)}).")
            speedup_values = {"probe_pinned_h2d_bytes_per_s": pinned,
                              "probe_pageable_h2d_bytes_per_s": pageable, "probe_speedup": speedup}
    site = _site(p, "pageable_copy")
    message = f"{fmt_rate(rate)} of host-device copies from pageable memory {source_label(p)}{_at(site)}"
    if p.copies is not None and p.copies.pageable_may_be_registered:
        # Uprobes see registrations made while attached only: a buffer registered before reads pageable.
        message += ", or from memory cudaHostRegister'ed before the attach"
    advice = ("Copies from pageable memory go through the driver's own pinned bounce buffer at a fraction"
              " of the link's speed. Pin the staging buffer (cudaHostAlloc, `cupyx.empty_pinned`,"
              " PyTorch `pin_memory()`), or cudaHostRegister a buffer that is reused." + speedup_text)
    yield Found.with_values("warning", message, advice, {"pid": p.pid, "pageable_copy_bytes_per_s": rate,
                                                         "call_site": site, **speedup_values})


@rule("pinned-rounding-waste",
      "traced: {rounding_waste_min_bytes}+ and {rounding_waste_min_fraction}+ of a process's pinned memory held"
      " beyond what it requested",
      over="processes", thresholds=("rounding_waste_min_bytes", "rounding_waste_min_fraction"))
def pinned_rounding_waste(p: ProcessPinned, snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    """Pinned bytes held far above the bytes the program asked for (traced processes only)."""
    allocated, requested = p.held.pinned_bytes, p.held.requested_bytes
    if allocated is None or requested is None or allocated <= 0 or requested > allocated:
        return
    waste = allocated - requested
    fraction = waste / allocated
    if waste < t.rounding_waste_min_bytes or fraction < t.rounding_waste_min_fraction:
        return
    site = _site(p, "rounding_waste", "alloc")
    message = (f"holds {fmt_bytes(allocated)} of pinned memory for {fmt_bytes(requested)} requested"
               f" {held_label(p)}: {fmt_bytes(waste)} ({fmt_pct(fraction)}) pinned but unused"
               f"{_at(site, 'allocated at')}")
    advice = ("PyTorch's caching host allocator rounds every pinned block up to the next power of two"
              " (a 129 MiB tensor takes 256 MiB) and keeps freed blocks cached for reuse. Size pinned"
              " staging buffers at or just under a power of two, or pin one large buffer and slice it;"
              " PyTorch 2.5+ releases cached blocks with `torch._C._host_emptyCache()`.")
    yield Found("warning", message, advice, pid=p.pid, pinned_bytes=allocated, requested_pinned_bytes=requested,
                waste_bytes=waste, waste_fraction=fraction, call_site=site)
