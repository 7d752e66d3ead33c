"""A probe result as text for a terminal: the headline, copy bandwidth by size, allocation cost and
break-even, the cudaHostAlloc modes, the NUMA nodes. Bandwidth in decimal GB/s, sizes in binary units.

Only what was measured is printed; a missing figure reads "n/a". The figures derived from the rows
(speedups, share of the link, break-even, NUMA ratios) come from ``probe.analysis``.
"""
from __future__ import annotations

import textwrap

from ..model import ProbeResult
from ..model.link import link_name
from ..probe import analysis as A
from ..units import NA, fmt_bytes, fmt_pct, fmt_rate, fmt_ratio, fmt_seconds


def unavailable_text(reason: str | None) -> str:
    reason = (reason or "no reason given").strip()
    # Refusals already read "probe refused: ..." / "probe disabled: ...".
    return reason if reason.startswith("probe ") else f"probe unavailable: {reason}"


def headline(result: ProbeResult) -> str:
    """One line: 'pinned H2D 55.0 GB/s vs pageable 6.3 GB/s: 8.7x; 87% of Gen5 x16 (63.0 GB/s)'."""
    if result.status != "ok":
        return unavailable_text(result.reason)
    if result.kind == "numa":
        return numa_headline(result)
    p, g = A.h2d_pinned_vs_pageable(result)
    if p is not None and g is not None:
        text = f"pinned H2D {fmt_rate(p)} vs pageable {fmt_rate(g)}: {fmt_ratio(A.ratio(p, g))}"
    elif p is not None:
        text = f"pinned H2D {fmt_rate(p)}"
    else:
        text = f"{result.kind} probe: no H2D copy measured"
    link = result.link_theoretical_bytes_per_s
    if p is not None and link:
        text += f"; {fmt_pct(A.ratio(p, link))} of {link_name(link)} ({fmt_rate(link)})"
    if result.reason:
        text += f" ({result.reason})"
    return text


def _wrap(text: str, width: int, indent: str) -> list[str]:
    return textwrap.wrap(text, width=max(20, width), initial_indent=indent, subsequent_indent=indent,
                         break_on_hyphens=False) or [indent.rstrip()]


def _copy_table(result: ProbeResult) -> list[str]:
    rows = {(d, mem): A.copies(result, mem, d) for d in A.DIRECTIONS for mem in ("pinned", "pageable")}
    sizes = sorted({s for table in rows.values() for s in table})
    if not sizes:
        return []
    # An alloc probe copies H2D only: no empty D2H columns for it.
    directions = [d for d in A.DIRECTIONS if rows[(d, "pinned")] or rows[(d, "pageable")]]
    header = "  ".join(f"{d.upper() + ' pinned':>10} {'pageable':>10} {'gain':>6}" for d in directions)
    out = ["Copies (CUDA events, median)", f"  {'SIZE':<9} {header}"]
    for size in sizes:
        cells = []
        for d in directions:
            p = rows[(d, "pinned")].get(size)
            g = rows[(d, "pageable")].get(size)
            pr = p.bytes_per_s if p else None
            gr = g.bytes_per_s if g else None
            cells.append(f"{fmt_rate(pr):>10} {fmt_rate(gr):>10} {fmt_ratio(A.ratio(pr, gr)):>6}")
        out.append(f"  {fmt_bytes(size):<9} {'  '.join(cells)}")
    return out


def _alloc_table(result: ProbeResult, width: int) -> list[str]:
    sizes = sorted({m.size_bytes for m in result.measurements if m.kind == "alloc"})
    if not sizes:
        return []

    def pair(kind: str, memory: str, size: int) -> str:
        first = A.cost_s(result, kind, memory, size, "first")
        steady = A.cost_s(result, kind, memory, size, "steady")
        return f"{fmt_seconds(first)} / {fmt_seconds(steady)}"

    out = ["Allocation cost (first call / steady median)",
           f"  {'SIZE':<9} {'pinned alloc':>19} {'free':>9}  {'pageable+touch':>19} {'free':>9}"]
    for size in sizes:
        out.append(f"  {fmt_bytes(size):<9} {pair('alloc', 'pinned', size):>19}"
                   f" {fmt_seconds(A.cost_s(result, 'free', 'pinned', size, 'steady')):>9}"
                   f"  {pair('alloc', 'pageable', size):>19}"
                   f" {fmt_seconds(A.cost_s(result, 'free', 'pageable', size, 'steady')):>9}")
    lines = []
    for size in sizes:
        n = A.break_even_transfers(result, size)
        if n is None:
            continue
        pinned = A.alloc_free_s(result, "pinned", size)
        pageable = A.alloc_free_s(result, "pageable", size)
        if n == float("inf"):
            verdict = "pinning never pays: a pinned H2D copy was not faster"
        elif n == 0:
            verdict = "pinning pays from the first transfer"
        else:
            verdict = f"pinning pays off after {n:.1f} H2D transfers"
        lines += _wrap(f"{fmt_bytes(size)}: {verdict} (alloc+free {fmt_seconds(pinned)} pinned vs"
                       f" {fmt_seconds(pageable)} pageable)", width, "  ")
    if lines:
        out += ["Break-even (H2D transfers before a new pinned buffer has paid for itself)"]
        out += lines
    return out


def _modes_table(result: ProbeResult, width: int) -> list[str]:
    rows = [m for m in result.measurements
            if m.kind in ("cpu_read", "cpu_write", "kernel_read", "register")
            or (m.kind == "free" and m.memory == "registered")
            or (m.kind == "copy" and m.memory not in ("pinned", "pageable"))
            or (result.kind == "modes" and m.kind == "copy" and m.memory == "pinned")]
    if not rows:
        return []
    out = ["Modes (cudaHostAlloc flags, cudaHostRegister)",
           f"  {'WHAT':<12} {'MEMORY':<14} {'SIZE':>9} {'RATE':>10} {'TIME':>9}"]
    for m in rows:
        what = f"{m.kind} {m.direction}" if m.direction else m.kind
        out.append(f"  {what:<12} {m.memory:<14} {fmt_bytes(m.size_bytes):>9}"
                   f" {fmt_rate(m.bytes_per_s):>10} {fmt_seconds(m.seconds):>9}")
        if m.note:
            out += _wrap(m.note, width, "      ")
    return out


def numa_headline(result: ProbeResult) -> str:
    """'NUMA: H2D remote 0.74x local (40.7 vs 55.0 GB/s), ...', or the rate per node where the GPU's
    node is unknown."""
    rows = A.numa_rows(result)
    if not rows:
        return "NUMA probe: no copy measured" + (f" ({result.reason})" if result.reason else "")
    ratios = A.numa_ratios(result)
    parts = []
    for d in A.DIRECTIONS:
        mine = [m for m in rows if m.direction == d]
        if not mine:
            continue
        if ratios.get(d) is not None:
            local, remote = A.numa_local_remote(result, d)
            parts.append(f"{d.upper()} remote {fmt_ratio(ratios[d], 2)} local"
                         f" ({fmt_rate(remote)} vs {fmt_rate(local)})")
        else:
            parts.append(f"{d.upper()} " + ", ".join(f"node{m.host_numa_node} {fmt_rate(m.bytes_per_s)}" for m in mine))
    text = "NUMA: " + "; ".join(parts)
    if ratios.get("h2d") is None and ratios.get("d2h") is None:
        text += " (the GPU's node is unknown)"
    if result.reason:
        text += f" ({result.reason})"
    return text


def _numa_table(result: ProbeResult, width: int) -> list[str]:
    rows = A.numa_rows(result)
    if not rows:
        return []
    nodes = sorted({m.host_numa_node for m in rows if m.host_numa_node is not None})
    out = ["Host buffer per NUMA node (cudaHostRegister'ed, CUDA events, median)",
           f"  {'NODE':<5} {'WHERE':<17} {'SIZE':>9} {'H2D':>10} {'D2H':>10}"]
    for n in nodes:
        mine = {m.direction: m for m in rows if m.host_numa_node == n}
        any_row = next(iter(mine.values()))
        role = (any_row.note or "").split(";")[0]
        out.append(f"  {n:<5} {role:<17} {fmt_bytes(any_row.size_bytes):>9}"
                   f" {fmt_rate(mine['h2d'].bytes_per_s if 'h2d' in mine else None):>10}"
                   f" {fmt_rate(mine['d2h'].bytes_per_s if 'd2h' in mine else None):>10}")
        placed = (any_row.note or "").partition("; ")[2]
        if placed:
            out += _wrap(placed, width, "        ")
    return out


def format_probe(result: ProbeResult, width: int = 80) -> str:
    """The whole result as text. Tables are at most 72 columns; wrapped text fits ``width``."""
    if result.status != "ok":
        return "\n".join(_wrap(unavailable_text(result.reason), width, "")) + "\n"
    init = next((m for m in result.measurements if m.kind == "init"), None)
    gpu = result.gpu_index if result.gpu_index is not None else NA
    head = f"Probe {result.kind}, CUDA device {gpu}: {fmt_seconds(result.duration_s)}"
    if init is not None:
        head += f" (context {fmt_seconds(init.seconds)})"
    if result.max_pinned_bytes is not None:
        head += f", cap {fmt_bytes(result.max_pinned_bytes)}"
    out = _wrap(head, width, "")
    out += _wrap(headline(result), width, "  ")
    # A modes probe has no pageable copies: its default-pinned H2D sits in the modes table instead.
    copies = _copy_table(result) if result.kind != "modes" else []
    sections: tuple[list[str], ...] = (copies, _alloc_table(result, width), _modes_table(result, width))
    if result.kind == "numa":
        sections = (_numa_table(result, width),)
    for section in sections:
        if section:
            out += [""] + section
    if init is not None and init.note:
        out += ["", "Notes"]
        for part in init.note.split("; "):
            out += _wrap(part, width, "  ")
    return "\n".join(out) + "\n"
