"""The advisor's rules: small pure functions from a snapshot history to findings.

Each rule has the signature ``(history, thresholds) -> list[Finding]``: ``history[-1]`` is the latest
snapshot, earlier entries are older (oldest first). Rules read only the snapshots (``Snapshot.time``
is their clock), do no I/O and stay silent when the figures they need are ``None``. ``RULES`` maps each
stable rule id (an API: users filter and alert on it) to its function.

Figures in messages are formatted with ``pinmon.units`` and labelled "(est.)" when they come from
/proc/PID/maps estimates and "(traced)" when an in-process tracer reported them. A traced finding's
message names the call site of its own behaviour (``ProcessPinned.call_sites``), quoted: it is text
from a report file, shown as data (printable, bounded) and never part of the advice.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional, Sequence

from ..model import Finding, Gpu, HostMemory, ProbeResult, ProcessPinned, Snapshot
from ..units import fmt_bytes, fmt_int, fmt_link, fmt_pct, fmt_rate, fmt_seconds, printable
from .copies import slow_pinned_copies
from .thresholds import Thresholds

Rule = Callable[[Sequence[Snapshot], Thresholds], "list[Finding]"]


# --- helpers -------------------------------------------------------------------------------------

def _latest(history: Sequence[Snapshot]) -> Optional[Snapshot]:
    return history[-1] if len(history) else None


def process_subject(p: ProcessPinned) -> str:
    return f"pid {p.pid} ({p.name})" if p.name else f"pid {p.pid}"


def _src(p: ProcessPinned) -> str:
    if p.source == "traced":
        return "(traced, CUPTI)" if p.trace_engine == "cupti" else "(traced)"
    return "(est.)"


SITE_CHARS = 160


def _site(p: ProcessPinned, *categories: str) -> Optional[str]:
    """The tracer's call site (file:line) for the first of ``categories`` it has, as printable text."""
    for category in categories:
        site = p.call_sites.get(category)
        if site:
            return printable(site, SITE_CHARS)
    return None


def _at(site: Optional[str], verb: str = "at") -> str:
    """``, at "file:line"``: the site quoted, so it reads as the data it is."""
    if not site:
        return ""
    return ', {} "{}"'.format(verb, site.replace('"', '\\"'))


def _top_pinned(processes: Sequence[ProcessPinned]) -> Optional[ProcessPinned]:
    rows = [p for p in processes if p.pinned_bytes]
    return max(rows, key=lambda p: p.pinned_bytes) if rows else None


def _top_holder_sentence(processes: Sequence[ProcessPinned]) -> str:
    top = _top_pinned(processes)
    if top is None:
        return ""
    return f" Largest holder: {process_subject(top)} with {fmt_bytes(top.pinned_bytes)} {_src(top)}."


def _lspci_target(bus_id: Optional[str]) -> str:
    """NVML's bus id carries an 8-digit domain ("00000000:41:00.0"); lspci prints 4 digits."""
    if not bus_id:
        return "sudo lspci -vv"
    domain, sep, rest = bus_id.partition(":")
    if sep and len(domain) > 4 and domain[:-4].strip("0") == "":
        bus_id = f"{domain[-4:]}:{rest}"
    return f"sudo lspci -vv -s {bus_id.lower()}"


def _gpu_by_index(snap: Snapshot, index: Optional[int]) -> Optional[Gpu]:
    if index is None:
        return None
    return next((g for g in snap.gpus if g.index == index), None)


def _probe_ok(snap: Snapshot) -> Optional[ProbeResult]:
    p = snap.probe
    return p if p is not None and p.status == "ok" else None


def _probe_cpu_read(probe: ProbeResult, memory: str) -> Optional[float]:
    rows = [m for m in probe.measurements
            if m.kind == "cpu_read" and m.memory == memory and m.bytes_per_s is not None]
    return max(rows, key=lambda m: m.size_bytes).bytes_per_s if rows else None


def _finding(rule: str, severity: str, subject: str, message: str, advice: str, **values) -> Finding:
    # Unknown figures are left out rather than written as null: Finding.from_dict rejects null values.
    return Finding(rule=rule, severity=severity, subject=subject, message=message, advice=advice,
                   values={k: v for k, v in values.items() if v is not None})


# --- host-wide rules -----------------------------------------------------------------------------

def pinned_ram_share(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    snap = _latest(history)
    if snap is None:
        return []
    host = snap.host
    share = _pinned_share(host)
    if share is None:
        return []
    pinned, limit, fraction, what, of_what, source = share
    if fraction > t.pinned_ram_critical_fraction:
        severity = "critical"
    elif fraction >= t.pinned_ram_warning_fraction:
        severity = "warning"
    else:
        return []
    message = f"pinned {fmt_bytes(pinned)} {what} = {fmt_pct(fraction)} of {fmt_bytes(limit)} {of_what}"
    advice = ("Pinned memory cannot be swapped out or reclaimed by the kernel, so it squeezes everything"
              " else on the host. Cap pinned pools, pin only staging buffers that are reused for transfers,"
              " and keep pinned memory under half of RAM." + _top_holder_sentence(snap.processes))
    top = _top_pinned(snap.processes)
    return [_finding("pinned-ram-share", severity, "host", message, advice,
                     pinned_bytes=pinned, effective_mem_limit_bytes=limit, fraction=fraction,
                     kernel_count=1 if source == "kernel" else 0,
                     top_pid=top.pid if top else None,
                     top_pinned_bytes=top.pinned_bytes if top else None)]


def _pinned_source(host: HostMemory) -> str:
    """"kernel" when the best figure is the kernel's count, "est." for the /proc/PID/maps estimate."""
    return "kernel" if host.pinned_bytes_total is not None and host.pinned_bytes_source == "kernel" else "est."


def _pinned_figure(host: HostMemory) -> tuple[Optional[int], str]:
    """(the best pinned figure, its label): the kernel's count (+ write-combined est.) where the
    snapshot has it, else the estimate (older recordings have only ``pinned_bytes_est``)."""
    if host.pinned_bytes_total is None:
        return host.pinned_bytes_est, "(est.)"
    if _pinned_source(host) == "kernel":
        wc = " + write-combined est." if host.write_combined_bytes_est else ""
        return host.pinned_bytes_total, f"(kernel's count{wc})"
    return host.pinned_bytes_total, "(est.)"


def _in_limited_cgroup(host: HostMemory) -> bool:
    """The effective limit is a cgroup's, below the host's RAM (the kernel's count is host-wide)."""
    return bool(_cgroup_note(host))


def _pinned_share(host: HostMemory) -> Optional[tuple[int, int, float, str, str, str]]:
    """(pinned bytes, the RAM they are compared with, fraction, "(label)", "what RAM", source), or None.

    Inside a cgroup with a limit below MemTotal the kernel's count covers the whole host while the
    limit is the cgroup's: the host-wide count is compared with MemTotal and this cgroup's processes'
    estimate with the limit, and the larger share is reported."""
    pinned, label = _pinned_figure(host)
    limit = host.effective_mem_limit_bytes
    if pinned is None or not limit or limit <= 0:
        return None
    if not (_in_limited_cgroup(host) and _pinned_source(host) == "kernel" and host.mem_total_bytes):
        return pinned, limit, pinned / limit, label, f"effective RAM{_cgroup_note(host)}", _pinned_source(host)
    total = host.mem_total_bytes
    own = sum(v for v in (host.pinned_bytes_est, host.write_combined_bytes_est) if v is not None)
    host_wide = (pinned, total, pinned / total, f"host-wide {label}", "RAM", "kernel")
    in_cgroup = (own, limit, own / limit, "in this cgroup's processes (est.)", "effective RAM (the cgroup limit)",
                 "est.")
    return max(host_wide, in_cgroup, key=lambda c: c[2])


def _cgroup_note(host: HostMemory) -> str:
    cg = host.cgroup_limit_bytes
    if cg is not None and cg == host.effective_mem_limit_bytes and (
            host.mem_total_bytes is None or cg < host.mem_total_bytes):
        return " (the cgroup limit)"
    return ""


def low_available_memory(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    snap = _latest(history)
    if snap is None:
        return []
    host = snap.host
    avail, limit = host.mem_available_bytes, host.effective_mem_limit_bytes
    pinned, label = _pinned_figure(host)
    if avail is None or pinned is None or not limit or limit <= 0 or pinned <= 0:
        return []
    fraction = avail / limit
    if fraction >= t.low_available_fraction:
        return []
    message = (f"available {fmt_bytes(avail)} = {fmt_pct(fraction, 1)} of {fmt_bytes(limit)} effective"
               f" RAM{_cgroup_note(host)}, with {fmt_bytes(pinned)} pinned {label}")
    advice = ("Pinned memory cannot be swapped out or reclaimed by the kernel under memory pressure, so the"
              " OOM killer comes sooner than the totals suggest. Release idle pinned pools, lower pinned-pool"
              " caps, or move other work off this host." + _top_holder_sentence(snap.processes))
    return [_finding("low-available-memory", "warning", "host", message, advice,
                     mem_available_bytes=avail, effective_mem_limit_bytes=limit, fraction=fraction,
                     pinned_bytes=pinned)]


def memlock_limit_low(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    snap = _latest(history)
    if snap is None:
        return []
    host = snap.host
    limit, pinned = host.memlock_limit_bytes, host.pinned_bytes_est
    if limit is None or host.memlock_unlimited or pinned is None or pinned <= 0:
        return []
    if limit >= t.memlock_low_bytes:
        return []
    message = (f"RLIMIT_MEMLOCK is {fmt_bytes(limit)} (pinmon's own soft limit; processes started the same"
               f" way usually inherit it) while {fmt_bytes(pinned)} (est.) is pinned")
    # CUDA's pinned allocations do not mlock (FACTS: VmLck/Mlocked stay flat), so this limit is not
    # what caps them; it matters for mlock()-based pinning and RDMA registration.
    advice = ("CUDA pinned memory (cudaHostAlloc, pin_memory(), CuPy's pinned pool) is not mlock()ed and is"
              " not capped by this limit, so nothing to do for it. The limit does cap mlock()/mlockall() and"
              " RDMA memory registration (ibverbs, as used by NCCL, UCX or MPI over InfiniBand/RoCE): if this"
              " host uses RDMA, raise it (`ulimit -l unlimited`, `LimitMEMLOCK=infinity` for a systemd"
              " service, `--ulimit memlock=-1` for Docker).")
    return [_finding("memlock-limit-low", "info", "host", message, advice,
                     memlock_limit_bytes=limit, pinned_bytes=pinned)]


# --- per-process rules ---------------------------------------------------------------------------

def pinned_small_allocs(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    snap = _latest(history)
    if snap is None:
        return []
    costs, probe_values = _alloc_costs(snap)
    out = []
    for p in snap.processes:
        rate, median = p.pinned_allocs_per_s, p.median_alloc_bytes
        if rate is None or median is None:
            continue
        if rate < t.small_alloc_rate_per_s or median >= t.small_alloc_median_bytes:
            continue
        site = _site(p, "alloc")
        message = f"{rate:.1f} pinned allocations/s, median {fmt_bytes(median)} {_src(p)}{_at(site)}"
        advice = (f"Each cudaHostAlloc maps and pins pages through the driver and costs far more than malloc"
                  f" ({costs}). Allocate pinned buffers once and reuse them, or take them from a pinned pool"
                  f" (CuPy's pinned memory pool, PyTorch's caching host allocator behind `pin_memory()`).")
        out.append(_finding("pinned-small-allocs", "warning", process_subject(p), message, advice,
                            pid=p.pid, pinned_allocs_per_s=rate, median_alloc_bytes=median,
                            call_site=site, **probe_values))
    return out


def _alloc_costs(snap: Snapshot) -> tuple[str, dict]:
    """The probe's steady-state pinned allocation times when it has them, else reference figures."""
    probe = _probe_ok(snap)
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


def wc_cpu_readback(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    snap = _latest(history)
    if snap is None:
        return []
    probe = _probe_ok(snap)
    measured = ""
    if probe is not None:
        wc_rate, pinned_rate = _probe_cpu_read(probe, "write_combined"), _probe_cpu_read(probe, "pinned")
        if wc_rate is not None and pinned_rate is not None:
            measured = (f"; this box's probe read write-combined memory at {fmt_rate(wc_rate)} vs"
                        f" {fmt_rate(pinned_rate)} from ordinary pinned memory")
    advice = ("Drop cudaHostAllocWriteCombined for buffers the CPU reads or that receive device-to-host"
              " copies; keep it only for upload buffers the CPU writes and the GPU reads.")
    out = []
    for p in snap.processes:
        wc_bytes = p.write_combined_bytes
        if p.wc_readbacks is not None and p.wc_readbacks > 0:
            # The tracer counts device-to-host copies into write-combined memory (a CPU load cannot
            # be seen from Python): each lands in a buffer the CPU then reads, uncached.
            copies = p.wc_readbacks
            site = _site(p, "wc_readback")
            held = f" ({fmt_bytes(wc_bytes)} held now)" if wc_bytes else ""
            message = (f"{fmt_int(copies)} device-to-host {'copy' if copies == 1 else 'copies'} {_src(p)}"
                       f" into write-combined pinned memory{_at(site)}{held}: the CPU reads that memory"
                       f" uncached, on bare metal typically an order of magnitude slower than ordinary"
                       f" memory{measured}")
            out.append(_finding("wc-cpu-readback", "warning", process_subject(p), message, advice,
                                pid=p.pid, wc_d2h_copies=copies,
                                write_combined_bytes=wc_bytes if wc_bytes else None, call_site=site))
        elif wc_bytes is not None and wc_bytes > 0:
            message = (f"holds {fmt_bytes(wc_bytes)} {_src(p)} of write-combined pinned memory: fine for"
                       f" buffers the CPU only writes and the GPU reads; never read it from the CPU")
            out.append(_finding("wc-cpu-readback", "info", process_subject(p), message, advice,
                                pid=p.pid, write_combined_bytes=wc_bytes))
    return out


def pageable_bulk_copies(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    snap = _latest(history)
    if snap is None:
        return []
    speedup_text, speedup_values = "", {}
    probe = _probe_ok(snap)
    if probe is not None:
        pinned, pageable = probe.rate("h2d", "pinned"), probe.rate("h2d", "pageable")
        if pinned and pageable:
            speedup = pinned / pageable
            speedup_text = (f" On this box pinned H2D ran {fmt_rate(pinned)} vs {fmt_rate(pageable)}"
                            f" pageable ({speedup:.1f}x).")
            speedup_values = {"probe_pinned_h2d_bytes_per_s": pinned,
                              "probe_pageable_h2d_bytes_per_s": pageable, "probe_speedup": speedup}
    out = []
    for p in snap.processes:
        rate = p.pageable_copy_bytes_per_s
        if rate is None or rate < t.pageable_copy_bytes_per_s:
            continue
        site = _site(p, "pageable_copy")
        message = f"{fmt_rate(rate)} of host-device copies from pageable memory {_src(p)}{_at(site)}"
        advice = ("Copies from pageable memory go through the driver's own pinned bounce buffer at a fraction"
                  " of the link's speed. Pin the staging buffer (cudaHostAlloc, `cupyx.empty_pinned`,"
                  " PyTorch `pin_memory()`), or cudaHostRegister a buffer that is reused." + speedup_text)
        out.append(_finding("pageable-bulk-copies", "warning", process_subject(p), message, advice,
                            pid=p.pid, pageable_copy_bytes_per_s=rate, call_site=site,
                            **speedup_values))
    return out


def pinned_rounding_waste(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    """Pinned bytes held far above the bytes the program asked for (traced processes only)."""
    snap = _latest(history)
    if snap is None:
        return []
    out = []
    for p in snap.processes:
        allocated, requested = p.pinned_bytes, p.requested_pinned_bytes
        if allocated is None or requested is None or allocated <= 0 or requested > allocated:
            continue
        waste = allocated - requested
        fraction = waste / allocated
        if waste < t.rounding_waste_min_bytes or fraction < t.rounding_waste_min_fraction:
            continue
        site = _site(p, "rounding_waste", "alloc")
        message = (f"holds {fmt_bytes(allocated)} of pinned memory for {fmt_bytes(requested)} requested"
                   f" {_src(p)}: {fmt_bytes(waste)} ({fmt_pct(fraction)}) pinned but unused"
                   f"{_at(site, 'allocated at')}")
        advice = ("PyTorch's caching host allocator rounds every pinned block up to the next power of two"
                  " (a 129 MiB tensor takes 256 MiB) and keeps freed blocks cached for reuse. Size pinned"
                  " staging buffers at or just under a power of two, or pin one large buffer and slice it;"
                  " PyTorch 2.5+ releases cached blocks with `torch._C._host_emptyCache()`.")
        out.append(_finding("pinned-rounding-waste", "warning", process_subject(p), message, advice,
                            pid=p.pid, pinned_bytes=allocated, requested_pinned_bytes=requested,
                            waste_bytes=waste, waste_fraction=fraction, call_site=site))
    return out


def pinned_growth(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    snap = _latest(history)
    if snap is None or t.growth_window_s <= 0:
        return []
    end_s = snap.time
    start_s = end_s - t.growth_window_s
    # Only a process holding more than the minimum now can qualify; the advisor runs every second
    # over ten minutes of history, so the others are not looked up at all.
    candidates = [p for p in snap.processes
                  if p.pinned_bytes is not None and p.pinned_bytes > t.growth_min_bytes]
    if not candidates:
        return []
    window = [s for s in history if start_s <= s.time <= end_s]
    by_pid = _pinned_by_pid(window, {p.pid for p in candidates})
    out = []
    for latest in candidates:
        samples = _pinned_samples(by_pid.get(latest.pid, ()), latest)
        if len(samples) < 2:
            continue
        (t0, first), (t1, last) = samples[0], samples[-1]
        span_s = t1 - t0
        if span_s < t.growth_window_s / 2:
            continue
        if last <= t.growth_min_bytes or last <= first * (1 + t.growth_min_fraction):
            continue
        if any(b < a * (1 - t.growth_max_drop_fraction) for (_, a), (_, b) in zip(samples, samples[1:])):
            continue  # it gave memory back: a working pool, not a leak
        growth = (last - first) / first if first > 0 else None
        grown = f" (+{fmt_pct(growth)})" if growth is not None else ""
        message = (f"pinned grew from {fmt_bytes(first)} to {fmt_bytes(last)}{grown} over"
                   f" {span_s / 60:.1f} min {_src(latest)}, never dropping more than"
                   f" {fmt_pct(t.growth_max_drop_fraction)} between samples")
        advice = ("Pinned memory that only grows is a leak or a pool that never returns memory. CuPy's pinned"
                  " memory pool keeps freed blocks for reuse until"
                  " `cupy.get_default_pinned_memory_pool().free_all_blocks()`; PyTorch's caching host"
                  " allocator (behind `pin_memory()`) also keeps freed pinned blocks, and"
                  " `torch.cuda.empty_cache()` does not release them (PyTorch 2.5+ has"
                  " `torch._C._host_emptyCache()`). Check that pinned buffers are freed or reused, and"
                  " watch whether the growth levels off.")
        out.append(_finding("pinned-growth", "warning", process_subject(latest), message, advice,
                            pid=latest.pid, first_pinned_bytes=first, last_pinned_bytes=last,
                            growth_fraction=growth, span_s=span_s, samples=len(samples),
                            growth_bytes_per_s=(last - first) / span_s if span_s > 0 else None))
    return out


def _pinned_by_pid(window: Sequence[Snapshot], pids: set[int]) -> dict[int, list[tuple[float, ProcessPinned]]]:
    """(time, row) of each of ``pids`` in each snapshot of the window, oldest first: one pass."""
    out: dict[int, list[tuple[float, ProcessPinned]]] = {}
    for s in window:
        for q in s.processes:
            if q.pid in pids:
                out.setdefault(q.pid, []).append((s.time, q))
    return out


def _pinned_samples(rows: Sequence[tuple[float, ProcessPinned]], latest: ProcessPinned) -> list[tuple[float, int]]:
    """(time, pinned bytes) of this process from its rows in the window, oldest first."""
    samples: list[tuple[float, int]] = []
    for time_s, p in rows:
        if p.pinned_bytes is None:
            continue
        if p.name and latest.name and p.name != latest.name:
            samples = []  # the pid was reused by another program: its history does not count
            continue
        samples.append((time_s, p.pinned_bytes))
    return samples


# --- per-GPU rules -------------------------------------------------------------------------------

def pcie_link_degraded(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    snap = _latest(history)
    if snap is None:
        return []
    out = []
    for g in snap.gpus:
        if g.lost:
            continue
        link = g.link
        if not link.below_max:
            continue
        traffic = g.pcie.traffic_bytes_per_s
        now, rated = fmt_link(link.gen, link.width), fmt_link(link.gen_max, link.width_max)
        rates = ""
        if link.max_theoretical_bytes_per_s is not None and link.theoretical_bytes_per_s is not None:
            rates = f" ({fmt_rate(link.max_theoretical_bytes_per_s)} vs {fmt_rate(link.theoretical_bytes_per_s)})"
        advice = ("Reseat the card and check the slot, riser and the BIOS PCIe settings (a slot forced to a"
                  " lower generation, or bifurcated); compare LnkSta with LnkCap in"
                  f" `{_lspci_target(g.pci_bus_id)}` while the GPU is busy.")
        values = dict(gen=link.gen, gen_max=link.gen_max, width=link.width, width_max=link.width_max,
                      traffic_bytes_per_s=traffic, theoretical_bytes_per_s=link.theoretical_bytes_per_s,
                      max_theoretical_bytes_per_s=link.max_theoretical_bytes_per_s)
        if traffic is not None and traffic >= t.link_degraded_traffic_bytes_per_s:
            message = f"link {now} under {fmt_rate(traffic)} of traffic, rated {rated}{rates}"
            out.append(_finding("pcie-link-degraded", "warning", f"gpu{g.index}", message, advice, **values))
        elif link.width_below_max:
            # An idle GPU lowering its generation is power saving; its width rarely changes for that.
            load = f"at {fmt_rate(traffic)} of traffic" if traffic is not None else "with traffic unknown"
            message = (f"link {now} {load}, rated {rated}{rates}: the width is below the slot's rating,"
                       f" which power saving rarely explains")
            out.append(_finding("pcie-link-degraded", "info", f"gpu{g.index}", message, advice, **values))
    return out


def pcie_errors(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    snap = _latest(history)
    if snap is None:
        return []
    out = []
    for g in snap.gpus:
        if g.lost:
            continue
        pcie = g.pcie
        replay, recovery, errors = (pcie.replay_delta or 0), (pcie.recovery_delta or 0), (pcie.error_delta or 0)
        if replay <= 0 and recovery <= 0 and errors <= 0:
            continue
        parts = [f"{k} +{fmt_int(v)}" for k, v in sorted(pcie.counter_deltas.items()) if v is not None and v > 0]
        named = {k for k, v in pcie.counter_deltas.items() if v is not None and v > 0}
        if replay > 0 and "replay" not in named:
            parts.append(f"replay +{fmt_int(replay)}")
        if recovery > 0 and "l0_to_recovery" not in named:
            parts.append(f"l0_to_recovery +{fmt_int(recovery)}")
        if errors > 0 and not (named - {"replay", "l0_to_recovery"}):
            parts.append(f"errors +{fmt_int(errors)}")
        # The link passes through Recovery on every speed change, and idle GPUs change speed for
        # power saving all the time, so recoveries alone are a lead, not a fault.
        severity = "warning" if replay > 0 or errors > 0 else "info"
        message = "PCIe counters rose since pinmon started: " + ", ".join(parts)
        if severity == "info":
            message += " (the link also retrains on every power-saving speed change, so recoveries alone are not a fault)"
        advice = ("Rising replays and recoveries point to signal integrity (riser, cable, slot seating); watch"
                  " whether they keep climbing under load, and check `sudo dmesg | grep -i aer` for AER"
                  f" reports{' on ' + g.pci_bus_id if g.pci_bus_id else ''}.")
        out.append(_finding("pcie-errors", severity, f"gpu{g.index}", message, advice,
                            replay_delta=pcie.replay_delta, recovery_delta=pcie.recovery_delta,
                            error_delta=pcie.error_delta))
    return out


def probe_below_link(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    snap = _latest(history)
    if snap is None:
        return []
    probe = _probe_ok(snap)
    if probe is None:
        return []
    gpu = _gpu_by_index(snap, probe.gpu_index)
    if gpu is not None and gpu.lost:
        return []
    h2d, d2h = probe.rate("h2d", "pinned"), probe.rate("d2h", "pinned")
    candidates = [(r, d) for r, d in ((h2d, "H2D"), (d2h, "D2H")) if r is not None]
    if not candidates:
        return []
    best, direction = max(candidates)
    link_rate = probe.link_theoretical_bytes_per_s
    if link_rate is None and gpu is not None:
        link_rate = gpu.link.theoretical_bytes_per_s
    if not link_rate or link_rate <= 0:
        return []
    fraction = best / link_rate
    if fraction >= t.probe_link_fraction:
        return []
    link_text = ""
    if gpu is not None and (gpu.link.gen is not None or gpu.link.width is not None):
        link_text = f" ({fmt_link(gpu.link.gen, gpu.link.width)})"
    message = (f"best pinned copy {fmt_rate(best)} ({direction}) = {fmt_pct(fraction)} of the link's"
               f" {fmt_rate(link_rate)}{link_text}")
    advice = (f"Check the link state under load (LnkSta in `{_lspci_target(gpu.pci_bus_id if gpu else None)}`),"
              f" NUMA placement: {_numa_advice(gpu)}, and other traffic on the link (the probe shares it"
              " with every process using this GPU).")
    subject = f"gpu{probe.gpu_index}" if probe.gpu_index is not None else "host"
    return [_finding("probe-below-link", "warning", subject, message, advice,
                     best_bytes_per_s=best, link_theoretical_bytes_per_s=link_rate, fraction=fraction,
                     h2d_pinned_bytes_per_s=h2d, d2h_pinned_bytes_per_s=d2h,
                     numa_node=gpu.numa_node if gpu else None)]


def _numa_advice(gpu: Optional[Gpu]) -> str:
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


def gpu_lost(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    snap = _latest(history)
    if snap is None:
        return []
    out = []
    for g in snap.gpus:
        if not g.lost:
            continue
        where = f" (bus {g.pci_bus_id})" if g.pci_bus_id else ""
        message = f"GPU {g.index}{where} fell off the bus"
        advice = ("Check `sudo dmesg` for Xid 79 (GPU has fallen off the bus) and for power or thermal events"
                  " around that time; work on this GPU is lost, and it needs a reset or, usually, a reboot"
                  " by an administrator.")
        out.append(_finding("gpu-lost", "critical", f"gpu{g.index}", message, advice, index=g.index))
    return out


# --- the kernel's count of pinned pages, mlock, NUMA placement ----------------------------------

def pinned_unattributed(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    """Pinned pages the kernel counts that no process row explains (registered, RDMA, VFIO, io_uring)."""
    snap = _latest(history)
    if snap is None:
        return []
    host = snap.host
    kernel, unattributed = host.kernel_pinned_bytes, host.unattributed_pinned_bytes
    if kernel is None or unattributed is None or kernel <= 0:
        return []
    fraction = unattributed / kernel
    if unattributed < t.unattributed_min_bytes or fraction < t.unattributed_min_fraction:
        return []
    explained = max(0, kernel - unattributed)
    message = (f"{fmt_bytes(unattributed)} ({fmt_pct(fraction)}) of the {fmt_bytes(kernel)} the kernel counts as"
               f" pinned is explained by no process; CUDA processes' pinned mappings and traced figures"
               f" explain {fmt_bytes(explained)}")
    if _in_limited_cgroup(host):
        message += " (the kernel's count is host-wide: memory pinned outside this cgroup is in it)"
    advice = ("Memory pinned in place leaves no trace in /proc/PID/maps: cudaHostRegister (the host"
              " offloading of vLLM, SGLang and DeepSpeed, PyTorch's `pinned_use_cuda_host_register`), RDMA"
              " memory registration (ibverbs, as used by NCCL, UCX or MPI), VFIO device passthrough and"
              " io_uring registered buffers. Run the job under `pinmon trace`, which attributes registered"
              " memory to its process and call site, and check that every exit path calls"
              " cudaHostUnregister (or frees the pinned buffer).")
    return [_finding("pinned-unattributed", "warning", "host", message, advice,
                     kernel_pinned_bytes=kernel, unattributed_pinned_bytes=unattributed,
                     explained_pinned_bytes=explained, fraction=fraction)]


def mlock_not_pinned(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    """A CUDA process holding mlock()ed memory: locked is not pinned for the CUDA driver."""
    snap = _latest(history)
    if snap is None:
        return []
    probe = _probe_ok(snap)
    rates = ""
    if probe is not None:
        pinned, pageable = probe.rate("h2d", "pinned"), probe.rate("h2d", "pageable")
        if pinned and pageable:
            rates = f" On this box pinned H2D ran {fmt_rate(pinned)} vs {fmt_rate(pageable)} pageable."
    out = []
    for p in snap.processes:
        locked = p.vm_locked_bytes
        if locked is None or locked < t.mlock_min_bytes:
            continue
        message = (f"holds {fmt_bytes(locked)} locked with mlock() (VmLck) while using CUDA: locked memory is"
                   f" not pinned for the driver, so copies from it run at pageable speed")
        advice = ("mlock() keeps pages resident, but the CUDA driver does not know them: host-device copies"
                  " from them go through its pageable staging path (DeepSpeed measured 10-17 GB/s against 55"
                  " GB/s from pinned buffers)." + rates + " Register the buffer with cudaHostRegister"
                  " (`cupy.cuda.runtime.hostRegister`, `torch.cuda.cudart().cudaHostRegister`) or allocate it"
                  " pinned (`tensor.pin_memory()`, cudaHostAlloc); then the mlock() is not needed.")
        out.append(_finding("mlock-not-pinned", "warning", process_subject(p), message, advice,
                            pid=p.pid, vm_locked_bytes=locked, pinned_bytes=p.pinned_bytes))
    return out


def _node_list(nodes: Iterable[str]) -> str:
    return ", ".join(f"node{printable(n, 12)}" for n in sorted(nodes, key=_node_key))


def _node_key(node: str):
    return (0, int(node)) if node.isdigit() else (1, node)


def pinned_numa_remote(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    """A process whose pinned pages sit on a NUMA node other than that of the GPUs it uses."""
    snap = _latest(history)
    if snap is None:
        return []
    if snap.host.numa_nodes is not None and len(snap.host.numa_nodes) < 2:
        return []
    gpu_node = {g.index: g.numa_node for g in snap.gpus if g.numa_node is not None and not g.lost}
    out = []
    for p in snap.processes:
        by_node = p.pinned_bytes_by_node
        if not by_node or not p.gpu_indices:
            continue
        local = {str(gpu_node[i]) for i in p.gpu_indices if i in gpu_node}
        if not local:
            continue
        total = sum(v for v in by_node.values() if v > 0)
        remote = sum(v for n, v in by_node.items() if n not in local and v > 0)
        if total <= 0:
            continue
        fraction = remote / total
        if remote < t.numa_remote_min_bytes or fraction < t.numa_remote_min_fraction:
            continue
        gpus = ", ".join(f"gpu{i} (node{gpu_node[i]})" for i in p.gpu_indices if i in gpu_node)
        split = ", ".join(f"node{printable(k, 12)} {fmt_bytes(v)}"
                          for k, v in sorted(by_node.items(), key=lambda kv: _node_key(kv[0])))
        remote_nodes = _node_list(n for n, v in by_node.items() if n not in local and v > 0)
        message = (f"{fmt_bytes(remote)} ({fmt_pct(fraction)}) of its pinned pages sit on {remote_nodes},"
                   f" away from {gpus}: {split}")
        n = min(local, key=_node_key)
        advice = ("Copies between a GPU and host memory on another socket cross the inter-socket link, which"
                  " costs bandwidth and latency, and pinned pages cannot be moved while pinned. Restart the"
                  f" process bound to its GPU's node (`numactl --cpunodebind={n} --membind={n} <command>`; with"
                  " one process per GPU, each on its own GPU's node), or allocate the pinned buffers from a"
                  " thread running there. `pinmon probe --numa` measures the difference on this host.")
        out.append(_finding("pinned-numa-remote", "warning", process_subject(p), message, advice,
                            pid=p.pid, remote_pinned_bytes=remote, remote_fraction=fraction,
                            gpu_node=int(n) if n.isdigit() else None,
                            **{f"node{printable(k, 12)}_pinned_bytes": v for k, v in by_node.items()}))
    return out


RULES: dict[str, Rule] = {
    "gpu-lost": gpu_lost,
    "pinned-ram-share": pinned_ram_share,
    "low-available-memory": low_available_memory,
    "pinned-growth": pinned_growth,
    "pinned-small-allocs": pinned_small_allocs,
    "pageable-bulk-copies": pageable_bulk_copies,
    "pinned-rounding-waste": pinned_rounding_waste,
    "wc-cpu-readback": wc_cpu_readback,
    "pcie-link-degraded": pcie_link_degraded,
    "pcie-errors": pcie_errors,
    "probe-below-link": probe_below_link,
    "slow-pinned-copies": slow_pinned_copies,
    "memlock-limit-low": memlock_limit_low,
    "pinned-unattributed": pinned_unattributed,
    "mlock-not-pinned": mlock_not_pinned,
    "pinned-numa-remote": pinned_numa_remote,
}


def gpu_driver_unavailable(history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
    """NVIDIA GPUs on the PCI bus that NVML cannot reach: a broken or missing driver, not "no GPU"."""
    snap = _latest(history)
    if snap is None or not snap.nvml_error or not snap.nvidia_pci_gpus or snap.gpus:
        return []
    n = snap.nvidia_pci_gpus
    message = (f"{n} NVIDIA GPU{'s' if n != 1 else ''} on the PCI bus but NVML could not start:"
               f" {printable(snap.nvml_error)}")
    advice = ("Nothing on these GPUs is monitored, and CUDA work on them will likely fail too. Check the"
              " driver: `nvidia-smi`, `lsmod | grep nvidia`, `sudo dmesg | grep -i nvrm`; a library and"
              " kernel module of different versions need a driver reload or a reboot. In a container that"
              " is not given the GPUs, disable this rule (`disabled_rules`).")
    return [_finding("gpu-driver-unavailable", "critical", "host", message, advice, nvidia_pci_gpus=n)]


RULES["gpu-driver-unavailable"] = gpu_driver_unavailable
