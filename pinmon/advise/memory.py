"""Rules on host memory and what holds it: pinned memory's share of RAM, low available memory, the
memlock limit, pinned memory that keeps growing, pinned pages no process explains, mlock()ed memory
a CUDA process mistakes for pinned, pinned pages on the wrong NUMA node.

Figures in messages are labelled "(est.)" when they come from /proc/PID/maps estimates, "(kernel's
count)" for the kernel's exact count of pinned pages, and "(traced)" when an in-process tracer
reported them. What a process holds is its held bytes (``HeldMemory.bytes``: pinned, write-combined
and VmPin), the figure the views show and sort by.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence

from ..model import HostMemory, ProcessPinned, Snapshot
from ..model.kinds import Severity
from ..units import fmt_bytes, fmt_nodes, fmt_pct, fmt_rate, fmt_seconds, node_key, printable
from .common import held_label, probe_ok, process_subject
from .rule import Found, rule
from .thresholds import Thresholds


def _top_pinned(processes: Sequence[ProcessPinned]) -> ProcessPinned | None:
    """The process holding the most (held bytes), if any holds some."""
    rows = [p for p in processes if p.held.bytes]
    return max(rows, key=lambda p: p.held.bytes or 0) if rows else None  # each row's is set


def _top_holder_sentence(processes: Sequence[ProcessPinned]) -> str:
    top = _top_pinned(processes)
    if top is None:
        return ""
    return f" Largest holder: {process_subject(top)} with {fmt_bytes(top.held.bytes)} {held_label(top)}."


@rule("pinned-ram-share",
      "pinned host memory vs effective RAM: warning at {pinned_ram_warning_fraction},"
      " critical above {pinned_ram_critical_fraction}",
      thresholds=("pinned_ram_warning_fraction", "pinned_ram_critical_fraction"), severities=("warning", "critical"))
def pinned_ram_share(snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    host = snap.host
    share = _pinned_share(host)
    if share is None:
        return
    pinned, limit, fraction, what, of_what, source = share
    severity: Severity
    if fraction > t.pinned_ram_critical_fraction:
        severity = "critical"
    elif fraction >= t.pinned_ram_warning_fraction:
        severity = "warning"
    else:
        return
    message = f"pinned {fmt_bytes(pinned)} {what} = {fmt_pct(fraction)} of {fmt_bytes(limit)} {of_what}"
    advice = ("Pinned memory cannot be swapped out or reclaimed by the kernel, so it squeezes everything"
              " else on the host. Cap pinned pools, pin only staging buffers that are reused for transfers,"
              " and keep pinned memory under half of RAM." + _top_holder_sentence(snap.processes))
    top = _top_pinned(snap.processes)
    yield Found(severity, message, advice,
                pinned_bytes=pinned, effective_mem_limit_bytes=limit, fraction=fraction,
                kernel_count=1 if source == "kernel" else 0,
                top_pid=top.pid if top else None,
                top_pinned_bytes=top.held.bytes if top else None)


def _pinned_source(host: HostMemory) -> str:
    """"kernel" when the best figure is the kernel's count, "est." for the /proc/PID/maps estimate."""
    return "kernel" if host.pinned_bytes_total is not None and host.pinned_bytes_source == "kernel" else "est."


def _pinned_figure(host: HostMemory) -> tuple[int | None, str]:
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


def _pinned_share(host: HostMemory) -> tuple[int, int, float, str, str, str] | None:
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


@rule("low-available-memory",
      "available RAM below {low_available_fraction} of effective RAM while pinned memory is in use",
      thresholds=("low_available_fraction",))
def low_available_memory(snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    host = snap.host
    avail, limit = host.mem_available_bytes, host.effective_mem_limit_bytes
    pinned, label = _pinned_figure(host)
    if avail is None or pinned is None or not limit or limit <= 0 or pinned <= 0:
        return
    fraction = avail / limit
    if fraction >= t.low_available_fraction:
        return
    message = (f"available {fmt_bytes(avail)} = {fmt_pct(fraction, 1)} of {fmt_bytes(limit)} effective"
               f" RAM{_cgroup_note(host)}, with {fmt_bytes(pinned)} pinned {label}")
    advice = ("Pinned memory cannot be swapped out or reclaimed by the kernel under memory pressure, so the"
              " OOM killer comes sooner than the totals suggest. Release idle pinned pools, lower pinned-pool"
              " caps, or move other work off this host." + _top_holder_sentence(snap.processes))
    yield Found("warning", message, advice,
                mem_available_bytes=avail, effective_mem_limit_bytes=limit, fraction=fraction,
                pinned_bytes=pinned)


@rule("memlock-limit-low",
      "info: RLIMIT_MEMLOCK under {memlock_low_bytes} (caps mlock, io_uring registered buffers and RDMA, not CUDA"
      " pinning)", thresholds=("memlock_low_bytes",), severities=("info",))
def memlock_limit_low(snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    host = snap.host
    limit = host.memlock_limit_bytes
    # The snapshot's best figure: the kernel's count where it has one (a maps estimate, which anyone
    # can make look like CUDA's, is only the fallback).
    pinned, label = _pinned_figure(host)
    if limit is None or host.memlock_unlimited or pinned is None or pinned <= 0:
        return
    if limit >= t.memlock_low_bytes:
        return
    vm_pinned = sum(p.held.vm_pinned_bytes or 0 for p in snap.processes)
    counted = (f", {fmt_bytes(vm_pinned)} of it VmPin (io_uring registered buffers, RDMA memory regions:"
               f" charged to this limit)") if vm_pinned else ""
    message = (f"RLIMIT_MEMLOCK is {fmt_bytes(limit)} (pinmon's own soft limit; processes started the same"
               f" way usually inherit it) while {fmt_bytes(pinned)} {label} is pinned{counted}")
    # CUDA's pinned allocations do not mlock (FACTS: VmLck/Mlocked stay flat), so this limit is not
    # what caps them. The kernel charges to it mlock(), io_uring's registered buffers (for a user
    # without CAP_IPC_LOCK) and RDMA registrations: what VmPin and VmLck count.
    advice = ("CUDA pinned memory (cudaHostAlloc, pin_memory(), CuPy's pinned pool) is not mlock()ed and is"
              " not capped by this limit, so nothing to do for it. The limit does cap mlock()/mlockall(),"
              " io_uring registered buffers (IORING_REGISTER_BUFFERS, for a user without CAP_IPC_LOCK: a"
              " storage or network program that registers its buffers fails with ENOMEM past it) and RDMA"
              " memory registration (ibverbs, as used by NCCL, UCX or MPI over InfiniBand/RoCE): if this"
              " host uses io_uring registered buffers or RDMA, raise it (`ulimit -l unlimited`,"
              " `LimitMEMLOCK=infinity` for a systemd service, `--ulimit memlock=-1` for Docker).")
    yield Found("info", message, advice, memlock_limit_bytes=limit, pinned_bytes=pinned,
                kernel_count=1 if _pinned_source(host) == "kernel" else 0, vm_pinned_bytes=vm_pinned)


_GROWTH_ADVICE = (
    "Pinned memory that only grows is a leak or a pool that never returns memory. CuPy's pinned"
    " memory pool keeps freed blocks for reuse until"
    " `cupy.get_default_pinned_memory_pool().free_all_blocks()`; PyTorch's caching host"
    " allocator (behind `pin_memory()`) also keeps freed pinned blocks, and"
    " `torch.cuda.empty_cache()` does not release them (PyTorch 2.5+ has"
    " `torch._C._host_emptyCache()`). Check that pinned buffers are freed or reused, and"
    " watch whether the growth levels off.")


@rule("pinned-growth",
      "a process's pinned memory grew steadily to over {growth_min_bytes} and by over {growth_min_fraction}"
      " in {growth_window_s}, or fast enough to use up the available memory within {growth_fill_horizon_s}",
      over="history", thresholds=("growth_window_s", "growth_min_bytes", "growth_min_fraction",
                                  "growth_max_drop_fraction", "growth_fill_horizon_s", "growth_fast_min_span_s"))
def pinned_growth(history: Sequence[Snapshot], t: Thresholds) -> Iterator[Found]:
    """Two ways a process's pinned memory grows into trouble, both over samples that never drop by
    more than ``growth_max_drop_fraction`` (a pool that gives memory back is not a leak):

    - slow and steady: over at least half of ``growth_window_s``, to above ``growth_min_bytes`` and by
      more than ``growth_min_fraction`` of the first sample;
    - fast: over at least ``growth_fast_min_span_s``, to above ``growth_min_bytes``, growing in both
      halves of that span (a single allocation followed by nothing is not a trend), at a rate that would
      use up the host's available memory within ``growth_fill_horizon_s``.
    """
    snap = history[-1]
    if t.growth_window_s <= 0:
        return
    end_s = snap.time
    start_s = end_s - t.growth_window_s
    # Only a process holding more than the minimum now can qualify; the advisor runs every second
    # over ten minutes of history, so the others are not looked up at all.
    candidates = [p for p in snap.processes if (p.held.bytes or 0) > t.growth_min_bytes]
    if not candidates:
        return
    window = [s for s in history if start_s <= s.time <= end_s]
    by_pid = _pinned_by_pid(window, {p.pid for p in candidates})
    available = snap.host.mem_available_bytes
    for latest in candidates:
        samples = _pinned_samples(by_pid.get(latest.pid, ()), latest)
        if len(samples) < 2 or _dropped(samples, t.growth_max_drop_fraction):
            continue
        (t0, first), (t1, last) = samples[0], samples[-1]
        span_s = t1 - t0
        if span_s <= 0 or last <= first:
            continue
        rate = (last - first) / span_s
        growth = (last - first) / first if first > 0 else None
        grown = f" (+{fmt_pct(growth)})" if growth is not None else ""
        values = dict(pid=latest.pid, first_pinned_bytes=first, last_pinned_bytes=last, growth_fraction=growth,
                      span_s=span_s, samples=len(samples), growth_bytes_per_s=rate)
        steady = span_s >= t.growth_window_s / 2 and last > first * (1 + t.growth_min_fraction)
        fill_s = available / rate if available is not None else None
        fast = (len(samples) >= 3 and span_s >= t.growth_fast_min_span_s and fill_s is not None
                and fill_s <= t.growth_fill_horizon_s and _grew_in_both_halves(samples))
        if steady:
            message = (f"pinned grew from {fmt_bytes(first)} to {fmt_bytes(last)}{grown} over"
                       f" {span_s / 60:.1f} min {held_label(latest)}, never dropping more than"
                       f" {fmt_pct(t.growth_max_drop_fraction)} between samples")
        elif fast:
            message = (f"pinned grew from {fmt_bytes(first)} to {fmt_bytes(last)}{grown} in"
                       f" {fmt_seconds(span_s)} {held_label(latest)} ({fmt_bytes(rate)}/s): at this rate the"
                       f" host's {fmt_bytes(available)} of available memory is gone in {fmt_seconds(fill_s)}")
        else:
            continue
        yield Found("warning", message, _GROWTH_ADVICE, subject=process_subject(latest),
                    seconds_to_full=fill_s, **values)


def _dropped(samples: Sequence[tuple[float, int]], max_drop_fraction: float) -> bool:
    """Whether the series gave memory back: a sample more than ``max_drop_fraction`` below the one before."""
    return any(b < a * (1 - max_drop_fraction) for (_, a), (_, b) in itertools.pairwise(samples))


def _grew_in_both_halves(samples: Sequence[tuple[float, int]]) -> bool:
    """Growth that goes on: each half of the span holds at least a quarter of the whole growth."""
    (t0, first), (t1, last) = samples[0], samples[-1]
    mid_t = (t0 + t1) / 2
    mid = max((v for ts, v in samples if ts <= mid_t), default=first)
    whole = last - first
    return whole > 0 and mid - first >= whole / 4 and last - mid >= whole / 4


def _pinned_by_pid(window: Sequence[Snapshot], pids: set[int]) -> dict[int, list[tuple[float, ProcessPinned]]]:
    """(time, row) of each of ``pids`` in each snapshot of the window, oldest first: one pass."""
    out: dict[int, list[tuple[float, ProcessPinned]]] = {}
    for s in window:
        for q in s.processes:
            if q.pid in pids:
                out.setdefault(q.pid, []).append((s.time, q))
    return out


def _pinned_samples(rows: Sequence[tuple[float, ProcessPinned]], latest: ProcessPinned) -> list[tuple[float, int]]:
    """(time, held bytes) of this process from its rows in the window, oldest first."""
    samples: list[tuple[float, int]] = []
    name = latest.identity.name
    for time_s, p in rows:
        held = p.held.bytes
        if held is None:
            continue
        if p.identity.name and name and p.identity.name != name:
            samples = []  # the pid was reused by another program: its history does not count
            continue
        samples.append((time_s, held))
    return samples


@rule("pinned-unattributed",
      "{unattributed_min_bytes}+ and {unattributed_min_fraction}+ of the kernel's pinned count explained by no"
      " process's mappings or VmPin (cudaHostRegister, VFIO)",
      thresholds=("unattributed_min_bytes", "unattributed_min_fraction"))
def pinned_unattributed(snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    """Pinned pages the kernel counts that neither a process's mappings nor its VmPin explain
    (cudaHostRegister, VFIO, drivers). A tracer's report is the traced process's own word: what it
    claims as registered is said, and never counted as explained."""
    host = snap.host
    kernel, unattributed = host.kernel_pinned_bytes, host.unattributed_pinned_bytes
    if kernel is None or unattributed is None or kernel <= 0:
        return
    fraction = unattributed / kernel
    if unattributed < t.unattributed_min_bytes or fraction < t.unattributed_min_fraction:
        return
    explained = max(0, kernel - unattributed)
    message = (f"{fmt_bytes(unattributed)} ({fmt_pct(fraction)}) of the {fmt_bytes(kernel)} the kernel counts as"
               f" pinned is explained by no process; CUDA processes' pinned mappings and VmPin (io_uring,"
               f" RDMA) explain {fmt_bytes(explained)}")
    claimed = [p for p in snap.processes if p.source == "traced" and p.held.registered_bytes]
    if claimed:
        top = max(claimed, key=lambda p: p.held.registered_bytes or 0)
        message += (f"; tracer reports say {fmt_bytes(sum(p.held.registered_bytes or 0 for p in claimed))} is"
                    f" registered (cudaHostRegister), the most by {process_subject(top)}")
    if _in_limited_cgroup(host):
        message += " (the kernel's count is host-wide: memory pinned outside this cgroup is in it)"
    advice = ("Memory pinned in place leaves no trace in /proc/PID/maps: cudaHostRegister (the host"
              " offloading of vLLM, SGLang and DeepSpeed, PyTorch's `pinned_use_cuda_host_register`), VFIO"
              " device passthrough and some drivers' pins (RDMA memory regions and io_uring buffers show"
              " in their process's VmPin and are explained). Run the job under `pinmon trace`, which"
              " attributes registered memory to its process and call site, and check that every exit"
              " path calls cudaHostUnregister (or frees the pinned buffer).")
    yield Found("warning", message, advice,
                kernel_pinned_bytes=kernel, unattributed_pinned_bytes=unattributed,
                explained_pinned_bytes=explained, fraction=fraction)


@rule("mlock-not-pinned",
      "a CUDA process with {mlock_min_bytes}+ mlock()ed (VmLck): locked is not pinned, copies run at pageable speed",
      over="processes", thresholds=("mlock_min_bytes",))
def mlock_not_pinned(p: ProcessPinned, snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    """A CUDA process holding mlock()ed memory: locked is not pinned for the CUDA driver."""
    locked = p.held.vm_locked_bytes
    if locked is None or locked < t.mlock_min_bytes:
        return
    probe = probe_ok(snap)
    rates = ""
    if probe is not None:
        pinned, pageable = probe.rate("h2d", "pinned"), probe.rate("h2d", "pageable")
        if pinned and pageable:
            rates = f" On this box pinned H2D ran {fmt_rate(pinned)} vs {fmt_rate(pageable)} pageable."
    message = (f"holds {fmt_bytes(locked)} locked with mlock() (VmLck) while using CUDA: locked memory is"
               f" not pinned for the driver, so copies from it run at pageable speed")
    advice = ("mlock() keeps pages resident, but the CUDA driver does not know them: host-device copies"
              " from them go through its pageable staging path (DeepSpeed measured 10-17 GB/s against 55"
              " GB/s from pinned buffers)." + rates + " Register the buffer with cudaHostRegister"
              " (`cupy.cuda.runtime.hostRegister`, `torch.cuda.cudart().cudaHostRegister`) or allocate it"
              " pinned (`tensor.pin_memory()`, cudaHostAlloc); then the mlock() is not needed.")
    yield Found("warning", message, advice, pid=p.pid, vm_locked_bytes=locked, pinned_bytes=p.held.pinned_bytes)


def _node_list(nodes: Iterable[str]) -> str:
    return ", ".join(f"node{printable(n, 12)}" for n in sorted(nodes, key=node_key))


@rule("pinned-numa-remote",
      "{numa_remote_min_bytes}+ and {numa_remote_min_fraction}+ of a process's pinned pages on a NUMA node"
      " other than its GPUs'",
      over="processes", thresholds=("numa_remote_min_bytes", "numa_remote_min_fraction"))
def pinned_numa_remote(p: ProcessPinned, snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    """A process whose pinned pages sit on a NUMA node other than that of the GPUs it uses."""
    if snap.host.numa_nodes is not None and len(snap.host.numa_nodes) < 2:
        return
    by_node = p.placement.pinned_bytes_by_node
    gpu_indices = p.placement.gpu_indices
    if not by_node or not gpu_indices:
        return
    gpu_node = {g.index: g.numa_node for g in snap.gpus if g.numa_node is not None and not g.lost}
    local = {str(gpu_node[i]) for i in gpu_indices if i in gpu_node}
    if not local:
        return
    total = sum(v for v in by_node.values() if v > 0)
    remote = sum(v for n, v in by_node.items() if n not in local and v > 0)
    if total <= 0:
        return
    fraction = remote / total
    if remote < t.numa_remote_min_bytes or fraction < t.numa_remote_min_fraction:
        return
    gpus = ", ".join(f"gpu{i} (node{gpu_node[i]})" for i in gpu_indices if i in gpu_node)
    split = fmt_nodes(by_node)
    remote_nodes = _node_list(n for n, v in by_node.items() if n not in local and v > 0)
    message = (f"{fmt_bytes(remote)} ({fmt_pct(fraction)}) of its pinned pages sit on {remote_nodes},"
               f" away from {gpus}: {split}")
    n = min(local, key=node_key)
    advice = ("Copies between a GPU and host memory on another socket cross the inter-socket link, which"
              " costs bandwidth and latency, and pinned pages cannot be moved while pinned. Restart the"
              f" process bound to its GPU's node (`numactl --cpunodebind={n} --membind={n} <command>`; with"
              " one process per GPU, each on its own GPU's node), or allocate the pinned buffers from a"
              " thread running there. `pinmon probe --numa` measures the difference on this host.")
    yield Found.with_values("warning", message, advice,
                            {"pid": p.pid, "remote_pinned_bytes": remote, "remote_fraction": fraction,
                             "gpu_node": int(n) if n.isdigit() else None,
                             **{f"node{printable(k, 12)}_pinned_bytes": v for k, v in by_node.items()}})
