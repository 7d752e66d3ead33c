"""One process in full, as labelled rows of plain text: what the Processes tab's pop-up (Enter) shows.

No Textual here: ``detail_rows`` is a function of the process row, its snapshot (GPUs, the latest
probe) and the advisor's findings, so what the user reads is unit-tested figure by figure.

For a traced or attached process: what measured it, its pinned allocations (count, rate, sizes,
flags, frees) and registrations, its copies per direction and host memory kind
(``ProcessPinned.copies``: the rate over the window and the count, with the copy sizes where uprobes
measured them, and from CUPTI the achieved rate, bytes over GPU time, with the median and 10th
percentile per copy), peer copies, its pinned copies of 1 MiB or more against the latest probe's
pinned rate on the same GPU and direction, and its call sites (quoted, printable). For every process: what it holds (``HeldMemory``:
in all, and its pinned, write-combined and registered parts), its GPUs, its pinned pages per NUMA node,
VmPin, its group (container, pod, job) against the group's limit, VmLck, and the rule ids of the
findings about it. A figure is highlighted ("warning") only while the advisor's finding about it
is active, so the view follows the configured thresholds.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from ...model import Copies, CopyStats, Finding, Gpu, ProbeResult, ProcessPinned, Snapshot
from ...model.kinds import DIRECTIONS, Direction, HostMemoryKind
from ...units import fmt_bytes, fmt_int, fmt_nodes, fmt_pct, fmt_rate, fmt_seconds, fmt_share, printable
from .detail_row import DetailRow
from .format import command_text, local_share, user_text
from .group_detail import group_findings, group_of, group_summary

ENGINE_LABEL = {"cupti": "CUPTI", "hooks": "hooks (CuPy/PyTorch)", "uprobes": "uprobes on libcuda"}
DIRECTION_LABEL: dict[Direction, str] = {"h2d": "H2D", "d2h": "D2H"}
# The copy table's rows: these always (n/a where unknown), then any other host memory kind the copies
# went to. The tracer's write-combined stats carry only a count (it counts their bytes as pinned):
# a write-combined row is shown where its rate is known (uprobes tell it apart).
KIND_ORDER: tuple[tuple[Direction, HostMemoryKind], ...] = (("h2d", "pinned"), ("h2d", "pageable"), ("d2h", "pinned"),
                                                          ("d2h", "pageable"))
TABLE_MEMORIES: tuple[HostMemoryKind, ...] = ("pinned", "pageable", "write_combined", "managed", "other")
MEMORY_LABEL: dict[str, str] = {"write_combined": "WC"}
# A copy figure's width (the widest, "1023.9 GB/s" or "1023.9 GiB", and a space); a count's
# ("9,999,999" and a space). With the label column a copy row of five columns is 14 + 54 cells,
# inside an 80-column pop-up.
FIGURE_CELLS = 11
COUNT_CELLS = 10
SITE_CHARS = 160  # as the collector keeps them (trace_report.MAX_SITE_CHARS)


class Column(NamedTuple):
    """A column of the copy table: its head, its width and its figure of a row's stats."""
    head: str
    cells: int
    figure: Callable[[CopyStats], str]


# Every instrument: the rate over its window and the count. Uprobes see every call's size argument
# (the sizes); CUPTI sees GPU times (the achieved rates: bytes over GPU time, and per copy).
NOW = Column("now", FIGURE_CELLS, lambda s: fmt_rate(s.bytes_per_s))
COUNT = Column("count", COUNT_CELLS, lambda s: fmt_int(s.count))
SIZES = (Column("p50 size", FIGURE_CELLS, lambda s: fmt_bytes(s.size_p50_bytes)),
         Column("p90 size", FIGURE_CELLS, lambda s: fmt_bytes(s.size_p90_bytes)),
         Column("max size", FIGURE_CELLS, lambda s: fmt_bytes(s.size_max_bytes)))
ACHIEVED = (Column("achieved", FIGURE_CELLS, lambda s: fmt_rate(s.achieved_bytes_per_s)),
            Column("p50/copy", FIGURE_CELLS, lambda s: fmt_rate(s.rate_p50_bytes_per_s)),
            Column("p10/copy", FIGURE_CELLS, lambda s: fmt_rate(s.rate_p10_bytes_per_s)))


def _findings_of(p: ProcessPinned, findings: Sequence[Finding]) -> list[Finding]:
    return [f for f in findings if f.values.get("pid") == p.pid]


def _active(found: Sequence[Finding], rule: str, **values: object) -> bool:
    return any(f.rule == rule and all(f.values.get(k) == v for k, v in values.items()) for f in found)


def _engine(p: ProcessPinned) -> str:
    if p.source == "attached":
        return "attached, " + ENGINE_LABEL.get(p.instrument or "", "n/a")
    if p.source != "traced":
        return f"{printable(p.source, 10)} (from /proc/PID/maps)"
    return "traced, engine " + ENGINE_LABEL.get(p.instrument or "", "n/a")


def _shown(s: CopyStats) -> bool:
    return s.memory in TABLE_MEMORIES and (s.memory != "write_combined" or s.bytes_per_s is not None)


def _table_keys(c: Copies) -> list[tuple[Direction, HostMemoryKind]]:
    """The table's rows. A tracer's report leaves out what it did not see, so its usual rows stay
    (n/a); uprobes see every call to the probed functions, so only the kinds that had copies."""
    extra = [(s.direction, s.memory) for s in c.stats if _shown(s) and (s.direction, s.memory) not in KIND_ORDER]
    if c.instrument == "uprobes":
        return [k for k in KIND_ORDER if c.get(*k) is not None] + extra
    return list(KIND_ORDER) + extra


def table_columns(c: Copies) -> tuple[Column, ...]:
    """The columns the copies' instrument fills: now and count, then sizes or achieved rates."""
    columns: tuple[Column, ...] = (NOW, COUNT)
    if any(s.size_p50_bytes is not None or s.size_max_bytes is not None for s in c.stats):
        columns += SIZES
    if c.instrument == "cupti" or any(s.achieved_bytes_per_s is not None for s in c.stats):
        columns += ACHIEVED
    return columns


def _stat_cells(s: CopyStats | None, columns: Sequence[Column]) -> str:
    return "".join(f"{col.figure(s) if s is not None else fmt_rate(None):>{col.cells}}" for col in columns)


def _window_text(c: Copies) -> str:
    if c.instrument == "cupti":
        return "now: last ~5 s; achieved: bytes / GPU time, all copies"
    if c.instrument == "uprobes":
        return (f"now: over its {fmt_seconds(c.window_s)} window; achieved rates need GPU times:"
                " trace with CUPTI")
    return "now: last ~5 s; achieved rates need GPU times: trace with CUPTI"


def transfer_rows(p: ProcessPinned, found: Sequence[Finding] = ()) -> list[DetailRow]:
    """The copy table: per direction and host memory kind, the rate over the window and the count,
    with the sizes (uprobes) or the achieved rates (CUPTI: bytes over GPU time, p50 and p10 per copy)
    the instrument sees; its pageable rows highlighted while ``pageable-bulk-copies`` fires (the
    rate it quotes is their "now" figures added up); then peer copies and what the record says it
    leaves out (its notes)."""
    c = p.copies
    notes = [DetailRow("", printable(n, 200), "dim") for n in (c.notes if c is not None else ())]
    if c is None or not any(_shown(s) for s in c.stats):
        if c is not None and c.instrument == "uprobes":
            return [DetailRow("copies", f"none in its {fmt_seconds(c.window_s)} window", "dim")] + notes
        return [DetailRow("copies", "n/a (no copy figures in the tracer's report)", "dim")] + notes
    flagged = "warning" if _active(found, "pageable-bulk-copies") else ""
    columns = table_columns(c)
    head = "".join(f"{col.head:>{col.cells}}" for col in columns)
    rows = [DetailRow("copies", head, "head")]
    for d, mem in _table_keys(c):
        rows.append(DetailRow(f"{DIRECTION_LABEL[d]} {MEMORY_LABEL.get(mem, mem)}", _stat_cells(c.get(d, mem), columns),
                              flagged if mem == "pageable" else ""))
    rows.append(DetailRow("", _window_text(c), "dim"))
    if c.pageable_may_be_registered:
        rows.append(DetailRow("", "pageable: or registered before the attach (a registration is seen only"
                                  " while attached)", "dim"))
    if c.peer_count:
        rows.append(DetailRow("peer", f"{fmt_rate(c.peer_bytes_per_s)}, {fmt_int(c.peer_count)} copies"
                                      " (GPU to GPU, not on the host link)"))
    return rows + notes


def probe_for(snapshot: Snapshot | None, gpu: Gpu | None) -> ProbeResult | None:
    """The snapshot's probe when it ran fine on ``gpu``."""
    probe = snapshot.probe if snapshot is not None else None
    if probe is None or probe.status != "ok" or gpu is None:
        return None
    return probe if probe.gpu_index in (None, gpu.index) else None


def probe_rows(p: ProcessPinned, snapshot: Snapshot | None, found: Sequence[Finding]) -> list[DetailRow]:
    """Achieved pinned rate of its 1 MiB+ copies against the probe's pinned rate, per direction."""
    c = p.copies
    if c is None or c.instrument != "cupti":
        return []
    gpu = snapshot.copy_gpu(p) if snapshot is not None else None
    probe = probe_for(snapshot, gpu)
    rows: list[DetailRow] = []
    for d in DIRECTIONS:
        bulk = c.bulk_of(d)
        rate = bulk.achieved_bytes_per_s if bulk is not None else None
        busy = bulk.busy_s if bulk is not None else None
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
    share = c.default_stream_share
    if share is not None:
        rows.append(DetailRow("", f"{fmt_pct(share)} of these bytes on the legacy default stream"))
    return rows


def _pinned_text(p: ProcessPinned) -> str:
    """"264.0 MiB held: pinned 8.0 MiB in 5 mappings, write-combined 256.0 MiB": all it holds, then
    its parts (VmPin has a row of its own); "8.0 MiB held in 5 mappings, ..." where all it holds is
    pinned."""
    h = p.held
    text = f"{fmt_bytes(h.bytes)} held"
    if h.bytes != h.pinned_bytes:
        text += f": pinned {fmt_bytes(h.pinned_bytes)}"
    if p.source == "traced" and h.registered_bytes:
        text += f" ({fmt_bytes(h.registered_bytes)} registered)"
    elif p.source == "est." and h.mappings is not None:
        text += f" in {fmt_int(h.mappings)} mapping{'' if h.mappings == 1 else 's'}"
    text += f", write-combined {fmt_bytes(h.write_combined_bytes)}"
    text += " (capped at its resident memory)" if h.capped else ""
    return text + (" (its trace report counts less: its mappings' figure)" if h.report_understated else "")


def _flags_text(flags: dict[str, int]) -> str:
    return ", ".join(f"{printable(k, 20).replace('_', '-')} {fmt_int(v)}" for k, v in sorted(flags.items()))


def _alloc_text(p: ProcessPinned) -> str | None:
    """"12 in 10.0 s (1.2/s), median 4.0 KiB, max 8.0 MiB; write-combined 1; frees 3": what the
    instrument counted of its pinned allocations (a tracer's: the rate and median only)."""
    a = p.allocations
    if a is None or (a.per_s is None and a.median_bytes is None and a.count is None):
        return None
    window = f" in {fmt_seconds(a.window_s)}" if a.window_s else ""
    if a.count == 0 and not a.frees:
        return f"none{window}"
    rate = "n/a" if a.per_s is None else f"{a.per_s:.1f}/s"
    text = rate if a.count is None else f"{fmt_int(a.count)}{window} ({rate})"
    text += f", median {fmt_bytes(a.median_bytes)}"
    if a.size_max_bytes is not None:
        text += f", max {fmt_bytes(a.size_max_bytes)}"
    if a.flags:
        text += f"; {_flags_text(a.flags)}"
    if a.frees is not None:
        text += f"; frees {fmt_int(a.frees)}"
    return text


def _registered_text(p: ProcessPinned) -> str | None:
    """cudaHostRegister calls apart from allocations (uprobes): count, bytes, sizes, flags, and the
    unregistrations."""
    a = p.allocations
    if a is None or not (a.registrations or a.unregistrations):
        return None
    text = (f"{fmt_int(a.registrations)} ({fmt_bytes(a.registered_bytes)}), median"
            f" {fmt_bytes(a.registration_median_bytes)}, max {fmt_bytes(a.registration_max_bytes)}")
    if a.registration_flags:
        text += f"; {_flags_text(a.registration_flags)}"
    return text + f"; unregistered {fmt_int(a.unregistrations)}"


def _gpus_text(p: ProcessPinned, gpus: Sequence[Gpu]) -> str:
    """"518.0 MiB on GPU 0 (node 1)": the GPU named with its index, never a bare number after "GPUs"
    (which reads as a count)."""
    where = p.placement
    if not where.gpu_indices:
        return f"{fmt_bytes(where.gpu_memory_bytes)} (which GPU: n/a)"
    nodes = {g.index: g.numa_node for g in gpus}
    names = ", ".join(f"{i}" + (f" (node {nodes[i]})" if nodes.get(i) is not None else "") for i in where.gpu_indices)
    return f"{fmt_bytes(where.gpu_memory_bytes)} on GPU{'s' if len(where.gpu_indices) > 1 else ''} {names}"


def detail_rows(p: ProcessPinned, snapshot: Snapshot | None = None,
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
    registered = _registered_text(p)
    if registered is not None:
        rows.append(DetailRow("registered", registered))
    if p.source != "est.":
        rows += transfer_rows(p, found)
        rows += probe_rows(p, snapshot, found)
    else:
        rows.append(DetailRow("copies", "not measured: a attaches it for a while (root), `pinmon trace` traces it",
                              "dim"))
    rows.append(DetailRow("GPU memory", _gpus_text(p, gpus)))
    by_node = p.placement.pinned_bytes_by_node
    if by_node:
        local = local_share(p, gpus)
        tail = f"; local to its GPUs {fmt_pct(local)}" if local is not None else ""
        rows.append(DetailRow("NUMA", fmt_nodes(by_node) + tail,
                              "warning" if _active(found, "pinned-numa-remote") else ""))
    if p.held.vm_pinned_bytes:
        rows.append(DetailRow("VmPin", f"{fmt_bytes(p.held.vm_pinned_bytes)} pinned through io_uring or RDMA"
                                       " (the kernel's count; CUDA's pins are not in it)"))
    group = group_of(p, snapshot)
    if group is not None:
        rows.append(DetailRow("group", group_summary(group) + " (7: Containers)",
                              "warning" if group_findings(group, findings) else ""))
    if p.held.vm_locked_bytes:
        rows.append(DetailRow("VmLck", f"{fmt_bytes(p.held.vm_locked_bytes)} mlock()ed (locked is not pinned for CUDA)",
                              "warning" if _active(found, "mlock-not-pinned") else ""))
    if p.call_sites:
        for i, (category, site) in enumerate(sorted(p.call_sites.items())):
            rows.append(DetailRow("sites" if not i else "",
                                  f"{printable(category, 20)} \"{printable(site, SITE_CHARS)}\""))
    if found:
        rules = ", ".join(dict.fromkeys(printable(f.rule, 40) for f in found))
        rows.append(DetailRow("findings", rules + " (6: Advisor)", "warning"))
    return rows
