"""One process in full, as labelled rows of plain text: what the Processes tab's pop-up (Enter) shows.

No Textual here: ``detail_rows`` is a function of the process row, its snapshot (GPUs, the latest
probe) and the advisor's findings, so what the user reads is unit-tested figure by figure.

For a traced process (``source == "traced"``): the engine that traced it, its pinned allocations
(bytes held, registered, allocation rate, median size), its copies per direction and host memory kind
(``ProcessPinned.transfers``: the rate over the tracer's window, and from CUPTI the achieved rate,
bytes over GPU time, with the median and 10th percentile per copy), its pinned copies of 1 MiB or more
against the latest probe's pinned rate on the same GPU and direction, and its call sites (quoted,
printable). For every process: pinned and write-combined bytes, its GPUs, its pinned pages per NUMA
node, VmPin, its group (container, pod, job) against the group's limit, VmLck, and the rule ids of
the findings about it. A figure is highlighted ("warning") only while the advisor's finding about it
is active, so the view follows the configured thresholds.
"""
from __future__ import annotations

from typing import Optional, Sequence

from ..advise.copies import copy_gpu
from ..model import Finding, Gpu, ProbeResult, ProcessPinned, Snapshot
from ..units import fmt_bytes, fmt_int, fmt_nodes, fmt_pct, fmt_rate, fmt_seconds, fmt_share, printable
from .detail_row import DetailRow
from .format import command_text, local_share, user_text
from .group_detail import group_findings, group_of, group_summary

ENGINE_LABEL = {"cupti": "CUPTI", "hooks": "hooks (CuPy/PyTorch)"}
DIRECTION_LABEL = {"h2d": "H2D", "d2h": "D2H"}
KIND_ORDER = ("h2d.pinned", "h2d.pageable", "d2h.pinned", "d2h.pageable")
# A copy figure's width (the widest, "1023.9 GB/s", and a space): with the label column a copy row
# is 57 cells, inside an 80-column pop-up.
FIGURE_CELLS = 11
SITE_CHARS = 160  # as the collector keeps them (trace_report.MAX_SITE_CHARS)


def _findings_of(p: ProcessPinned, findings: Sequence[Finding]) -> list[Finding]:
    return [f for f in findings if f.values.get("pid") == p.pid]


def _active(found: Sequence[Finding], rule: str, **values) -> bool:
    return any(f.rule == rule and all(f.values.get(k) == v for k, v in values.items()) for f in found)


def _engine(p: ProcessPinned) -> str:
    if p.source != "traced":
        return f"{printable(p.source, 10)} (from /proc/PID/maps)"
    return "traced, engine " + ENGINE_LABEL.get(p.trace_engine or "", "n/a")


def _fig(v: Optional[float]) -> str:
    return f"{fmt_rate(v):>{FIGURE_CELLS}}"


def transfer_rows(p: ProcessPinned, found: Sequence[Finding] = ()) -> list[DetailRow]:
    """The copy table: per direction and kind, now (window), achieved, p50 and p10 per copy; then
    the pageable rate both ways, the figure ``pageable-bulk-copies`` reads (highlighted while it
    fires). A report without the table (an older tracer's) still gives that rate."""
    t = p.transfers
    pageable = p.pageable_copy_bytes_per_s
    flagged = "warning" if _active(found, "pageable-bulk-copies") else ""
    if not t:
        if pageable is None:
            return [DetailRow("copies", "n/a (no copy figures in the tracer's report)", "dim")]
        return [DetailRow("copies", f"pageable {fmt_rate(pageable)} now, both directions", flagged or "head"),
                DetailRow("", "over the tracer's last ~5 s; this report splits copies by neither direction"
                              " nor memory kind", "dim")]
    head = "".join(f"{h:>{FIGURE_CELLS}}" for h in ("now", "achieved", "p50/copy", "p10/copy"))
    rows = [DetailRow("copies", head, "head")]
    for key in KIND_ORDER:
        row = t.get(key) or {}
        d, mem = key.split(".")
        rows.append(DetailRow(f"{DIRECTION_LABEL[d]} {mem}", "".join(
            _fig(row.get(name)) for name in ("bytes_per_s", "achieved_bytes_per_s", "rate_p50", "rate_p10"))))
    if pageable is not None:
        rows.append(DetailRow("pageable", f"{fmt_rate(pageable)} now, both directions", flagged))
    if p.trace_engine == "cupti":
        rows.append(DetailRow("", "now: last ~5 s; achieved: bytes / GPU time, all copies",
                              "dim"))
    else:
        rows.append(DetailRow("", "now: last ~5 s; achieved rates need GPU times: trace with CUPTI", "dim"))
    return rows


def probe_for(snapshot: Optional[Snapshot], gpu: Optional[Gpu]) -> Optional[ProbeResult]:
    """The snapshot's probe when it ran fine on ``gpu``."""
    probe = snapshot.probe if snapshot is not None else None
    if probe is None or probe.status != "ok" or gpu is None:
        return None
    return probe if probe.gpu_index in (None, gpu.index) else None


def probe_rows(p: ProcessPinned, snapshot: Optional[Snapshot], found: Sequence[Finding]) -> list[DetailRow]:
    """Achieved pinned rate of its 1 MiB+ copies against the probe's pinned rate, per direction."""
    if p.trace_engine != "cupti":
        return []
    gpu = copy_gpu(snapshot, p) if snapshot is not None else None
    probe = probe_for(snapshot, gpu)
    rows = []
    for d in ("h2d", "d2h"):
        rate = getattr(p, f"{d}_pinned_bulk_bytes_per_s")
        busy = getattr(p, f"{d}_pinned_bulk_busy_s")
        label = "1 MiB+ pinned" if not rows else ""
        head = DIRECTION_LABEL[d]
        if rate is None:
            rows.append(DetailRow(label, f"{head} n/a (none in the tracer's window)", "dim"))
            continue
        busy_text = fmt_seconds(busy)
        if gpu is None:
            rows.append(DetailRow(label, f"{head} {fmt_rate(rate)} ({busy_text}); its GPU is not in the snapshot"))
            continue
        ref = probe.rate(d, "pinned") if probe is not None else None
        if not ref:
            rows.append(DetailRow(label, f"{head} {fmt_rate(rate)} (GPU {gpu.index}, {busy_text});"
                                         f" no probe of GPU {gpu.index} yet"))
            continue
        style = "warning" if _active(found, "slow-pinned-copies", direction=d) else ""
        rows.append(DetailRow(label, f"{head} {fmt_rate(rate)} = {fmt_share(rate, ref)} of probe {fmt_rate(ref)}"
                                     f" (GPU {gpu.index}, {busy_text})", style))
    share = p.pinned_bulk_default_stream_share
    if share is not None:
        rows.append(DetailRow("", f"{fmt_pct(share)} of these bytes on the legacy default stream"))
    return rows


def _pinned_text(p: ProcessPinned) -> str:
    text = f"{fmt_bytes(p.pinned_bytes)} held"
    if p.source == "traced" and p.registered_bytes:
        text += f" ({fmt_bytes(p.registered_bytes)} registered)"
    elif p.source != "traced" and p.pinned_mappings is not None:
        text += f" in {fmt_int(p.pinned_mappings)} mapping{'' if p.pinned_mappings == 1 else 's'}"
    text += f", write-combined {fmt_bytes(p.write_combined_bytes)}"
    return text + (" (capped at its resident memory)" if p.estimate_capped else "")


def _alloc_text(p: ProcessPinned) -> Optional[str]:
    if p.pinned_allocs_per_s is None and p.median_alloc_bytes is None:
        return None
    rate = "n/a" if p.pinned_allocs_per_s is None else f"{p.pinned_allocs_per_s:.1f}/s"
    return f"{rate}, median {fmt_bytes(p.median_alloc_bytes)}"


def _gpus_text(p: ProcessPinned, gpus: Sequence[Gpu]) -> str:
    """"518.0 MiB on GPU 0 (node 1)": the GPU named with its index, never a bare number after "GPUs"
    (which reads as a count)."""
    if not p.gpu_indices:
        return f"{fmt_bytes(p.gpu_memory_bytes)} (which GPU: n/a)"
    nodes = {g.index: g.numa_node for g in gpus}
    names = ", ".join(f"{i}" + (f" (node {nodes[i]})" if nodes.get(i) is not None else "") for i in p.gpu_indices)
    return f"{fmt_bytes(p.gpu_memory_bytes)} on GPU{'s' if len(p.gpu_indices) > 1 else ''} {names}"


def detail_rows(p: ProcessPinned, snapshot: Optional[Snapshot] = None,
                findings: Sequence[Finding] = ()) -> list[DetailRow]:
    """The pop-up's rows for ``p``; ``snapshot`` gives its GPUs and the probe, ``findings`` what to
    highlight."""
    gpus = snapshot.gpus if snapshot is not None else ()
    found = _findings_of(p, findings)
    rows = [DetailRow("process", f"{p.pid}  {user_text(p)}  {_engine(p)}", "head"),
            DetailRow("command", command_text(p, 2000)),
            DetailRow("pinned", _pinned_text(p))]
    alloc = _alloc_text(p)
    if alloc is not None:
        rows.append(DetailRow("allocs", alloc))
    if p.source == "traced":
        rows += transfer_rows(p, found)
        rows += probe_rows(p, snapshot, found)
    else:
        rows.append(DetailRow("copies", "not traced (`pinmon trace` gives its copies and rates)", "dim"))
    rows.append(DetailRow("GPU memory", _gpus_text(p, gpus)))
    if p.pinned_bytes_by_node:
        local = local_share(p, gpus)
        tail = f"; local to its GPUs {fmt_pct(local)}" if local is not None else ""
        rows.append(DetailRow("NUMA", fmt_nodes(p.pinned_bytes_by_node) + tail,
                              "warning" if _active(found, "pinned-numa-remote") else ""))
    if p.vm_pinned_bytes:
        rows.append(DetailRow("VmPin", f"{fmt_bytes(p.vm_pinned_bytes)} pinned through io_uring or RDMA"
                                       " (the kernel's count; CUDA's pins are not in it)"))
    group = group_of(p, snapshot)
    if group is not None:
        rows.append(DetailRow("group", group_summary(group) + " (7: Containers)",
                              "warning" if group_findings(group, findings) else ""))
    if p.vm_locked_bytes:
        rows.append(DetailRow("VmLck", f"{fmt_bytes(p.vm_locked_bytes)} mlock()ed (locked is not pinned for CUDA)",
                              "warning" if _active(found, "mlock-not-pinned") else ""))
    if p.call_sites:
        for i, (category, site) in enumerate(sorted(p.call_sites.items())):
            rows.append(DetailRow("sites" if not i else "",
                                  f"{printable(category, 20)} \"{printable(site, SITE_CHARS)}\""))
    if found:
        rules = ", ".join(dict.fromkeys(printable(f.rule, 40) for f in found))
        rows.append(DetailRow("findings", rules + " (6: Advisor)", "warning"))
    return rows
