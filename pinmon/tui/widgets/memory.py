"""Host memory: RAM used/available, pinned against effective RAM with a mark at the critical share of
``pinned-ram-share`` (50% by default), the rest.

Pinned is the snapshot's best figure (``pinned_bytes_total``), labelled by its source: "kernel"
(the kernel's exact count of pinned pages plus write-combined memory, which it does not count) or
"est." (the ``/proc/PID/maps`` estimates). With the kernel's count a line says how much of it the
process rows explain and how much no process does; that figure is highlighted while the advisor's
``pinned-unattributed`` finding is active, and the pinned bar is coloured by the thresholds of
``pinned-ram-share``, so the view follows the thresholds the user configured.
Multi-node hosts get the count's split by NUMA node. Wording as in ``pinmon check``.

The compact form (the overview) fits its column: on a narrow one the bars are shorter and the RAM
and pinned lines drop their words before their figures. In the wide overview (``graph``) a graph
of the pinned share over the last minutes follows, drawn against the critical share's line.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.content import Content

from ...advise.thresholds import Thresholds
from ...model import Finding, HostMemory
from ...units import fmt_bytes, fmt_nodes, fmt_pct, share
from ..view.format import COLLECTING
from ..view.history import ColumnCache, GraphHistory, columns, per_column_for, pinned_figure
from ..view.sizing import pinned_band_rows
from ..view.state import ViewState
from .bar import bar
from .base import View
from .rows import RowsWidget
from .sparkline import BARS, axis_text

BAR_CELLS = 20
BAR_CELLS_COMPACT = 14
# A compact column narrower than this takes shorter bars.
SHORT_BARS_BELOW = 56
BAR_CELLS_SHORT = 10
# The pinned graph's scale labels ("100%", " 50%", "  0%") and a space.
GRAPH_LABEL_CELLS = 5
# The overview's node line names at most this many nodes (fewer where its width holds fewer), then
# "+N more" (the Memory tab has them all).
COMPACT_NODES = 4
UNATTRIBUTED_RULE = "pinned-unattributed"


def _level(fraction: float | None, warn: float, crit: float) -> str:
    if fraction is None or fraction < warn:
        return "$success"
    return "$warning" if fraction < crit else "$error"


def pinned_level(fraction: float | None, t: Thresholds) -> str:
    """The pinned bar's colour: the severity ``pinned-ram-share`` gives that share of effective RAM
    (pinned memory cannot be swapped or reclaimed; past the critical share the kernel and every
    other process fight over what is left)."""
    if fraction is None or fraction < t.pinned_ram_warning_fraction:
        return "$success"
    return "$error" if fraction > t.pinned_ram_critical_fraction else "$warning"


def memory_title(t: Thresholds) -> str:
    """The panel's border title: what the bar's mark stands for."""
    return f"Host memory (┃ = {fmt_pct(t.pinned_ram_critical_fraction)} of RAM)"


def explained_bytes(h: HostMemory) -> int | None:
    """What the process rows explain of the kernel's count (as ``pinmon check`` prints it)."""
    if h.kernel_pinned_bytes is None or h.unattributed_pinned_bytes is None:
        return None
    return max(0, h.kernel_pinned_bytes - h.unattributed_pinned_bytes)


def unattributed_alert(findings: Sequence[Finding]) -> bool:
    return any(f.rule == UNATTRIBUTED_RULE for f in findings)


def kernel_rows(h: HostMemory, compact: bool, alert: bool, width: int | None = None) -> list[Content]:
    """The kernel's count, what explains it, and its split by node; none without the count. A
    compact line wider than ``width`` (the wide overview's column) takes the short labels."""
    if h.kernel_pinned_bytes is None:
        if h.pinned_bytes_source == "est." and not compact:  # the collector looked: say why it is est.
            return [Content.assemble(("kernel       ", "dim"), "n/a (no FOLL_PIN counters in /proc/vmstat)")]
        return []
    unattributed = Content.styled(fmt_bytes(h.unattributed_pinned_bytes), "bold $warning" if alert else "bold")
    if compact:
        line = Content.assemble(("kernel  ", "dim"), fmt_bytes(h.kernel_pinned_bytes), ("  explained ", "dim"),
                                fmt_bytes(explained_bytes(h)), ("  unattributed ", "dim"), unattributed)
        if width and line.cell_length > width:
            line = Content.assemble(("kernel  ", "dim"), fmt_bytes(h.kernel_pinned_bytes), ("  expl. ", "dim"),
                                    fmt_bytes(explained_bytes(h)), ("  unattr. ", "dim"), unattributed)
        rows = [line]
    else:
        rows = [Content.assemble(("kernel       ", "dim"), (fmt_bytes(h.kernel_pinned_bytes), "bold"),
                                 " (kernel's count): CUDA processes explain ", fmt_bytes(explained_bytes(h))),
                Content.assemble(("unattributed ", "dim"), unattributed, " explained by no process")]
    by_node = h.kernel_pinned_bytes_by_node
    if by_node and len(by_node) > 1:
        if not compact:
            rows.append(Content.assemble(("by node      ", "dim"), fmt_nodes(by_node)))
            return rows
        for limit in range(COMPACT_NODES, 0, -1):  # as many nodes as the line has room for
            line = Content.assemble(("by node ", "dim"), fmt_nodes(by_node, limit))
            if not width or line.cell_length <= width:
                break
        rows.append(line)
    return rows


def memory_rows(h: HostMemory, compact: bool = False, findings: Sequence[Finding] = (),
                width: int | None = None, thresholds: Thresholds = Thresholds()) -> list[Content]:
    # Pinned memory cannot be swapped or reclaimed; past the rule's critical share the kernel and
    # every other process fight over what is left.
    mark = thresholds.pinned_ram_critical_fraction
    effective = h.effective_mem_limit_bytes or h.mem_total_bytes
    used = h.used_bytes
    used_share = share(used, h.mem_total_bytes)
    pinned, source = pinned_figure(h)
    pinned_share = share(pinned, effective)
    cells = BAR_CELLS if not compact else BAR_CELLS_SHORT if width and width < SHORT_BARS_BELOW else BAR_CELLS_COMPACT
    ram_tail: list[str | tuple[str, str]] = (
        [f"used {fmt_bytes(used)}  ", ("avail ", "dim"), (fmt_bytes(h.mem_available_bytes), "bold")]
                if compact else
                [f"{fmt_bytes(used)} used, ", (fmt_bytes(h.mem_available_bytes), "bold"),
                 f" available of {fmt_bytes(h.mem_total_bytes)}"])
    ram = Content.assemble(("RAM    ", "bold"), bar(used_share, cells, _level(used_share, 0.8, 0.95)),
                           f" {fmt_pct(used_share):>4}  ", *ram_tail)
    if compact and width and ram.cell_length > width:  # the share says what "used" did
        ram = Content.assemble(("RAM    ", "bold"), bar(used_share, cells, _level(used_share, 0.8, 0.95)),
                               f" {fmt_pct(used_share):>4}  ", ("avail ", "dim"),
                               (fmt_bytes(h.mem_available_bytes), "bold"))
    pinned_bar = bar(pinned_share, cells, pinned_level(pinned_share, thresholds), mark=mark)
    pinned_line = Content.assemble(("pinned ", "bold"), pinned_bar, f" {fmt_pct(pinned_share):>4}  ",
                                   (fmt_bytes(pinned), "bold"), f" {source} of ", fmt_bytes(effective),
                                   "" if compact else " effective RAM")
    if compact and width and pinned_line.cell_length > width:  # the title says what it is a share of
        pinned_line = Content.assemble(("pinned ", "bold"), pinned_bar, f" {fmt_pct(pinned_share):>4}  ",
                                       (fmt_bytes(pinned), "bold"), f" {source}")
    rows = [ram, pinned_line]
    rows += kernel_rows(h, compact, unattributed_alert(findings), width)
    kernel = h.kernel_pinned_bytes is not None
    memlock = "unlimited" if h.memlock_unlimited else fmt_bytes(h.memlock_limit_bytes)
    wc = f"{fmt_bytes(h.write_combined_bytes_est)} est."
    if not compact and h.pinned_bytes_total is not None:
        wc += " (in pinned; the kernel does not count it)" if kernel else " (in pinned)"
    extra = [("WC", wc),
             ("Shmem", fmt_bytes(h.shmem_bytes)), ("Mlocked", fmt_bytes(h.mlocked_bytes)), ("memlock", memlock)]
    if h.cgroup_limit_bytes is not None:
        extra.append(("cgroup limit", fmt_bytes(h.cgroup_limit_bytes)))
    if h.swap_used_bytes:
        extra.append(("swap used", fmt_bytes(h.swap_used_bytes)))
    if compact:
        for pair in (extra[i:i + 2] for i in range(0, len(extra), 2)):
            # A label at least one space from its value, even one longer than the column ("cgroup limit").
            rows.append(Content.assemble(*[p for k, v in pair for p in ((f"{k} ".ljust(8), "dim"), f"{v:<18}")])
                        .rstrip())
    else:
        rows += [Content.assemble((f"{k:<13}", "dim"), v) for k, v in extra]
        if kernel:
            note = ("pinned: the kernel's count of pinned pages (FOLL_PIN, host-wide: cudaHostAlloc,"
                    " cudaHostRegister, RDMA, io_uring) + write-combined (est.)")
        else:
            note = "pinned: CUDA host allocations seen in /proc/PID/maps (est.)"
            if h.pinned_bytes_total is not None:
                note += " + write-combined (est.)"
        rows.append(Content.styled(note + f"; ┃ marks {fmt_pct(mark)} of effective RAM (MemTotal or the cgroup"
                                   " limit, whichever is lower)", "dim"))
    return rows


def _cell_runs(cells: list[tuple[str, str]]) -> Content:
    """Cells of (character, style) as Content, one span per run of equal cells."""
    parts: list[tuple[str, str]] = []
    for char, style in cells:
        if parts and parts[-1][1] == style:
            parts[-1] = (parts[-1][0] + char, style)
        else:
            parts.append((char, style))
    return Content.assemble(*parts)


def _eighths(fraction: float, rows: int) -> int:
    return 8 * rows if fraction >= 1 else max(0, int(fraction * 8 * rows))


def pinned_graph(graphs: GraphHistory, t: Thresholds, band: int, width: int,
                 values: Sequence[float | None] | None = None) -> list[Content]:
    """The pinned share of effective RAM over the last minutes: ``band`` rows above the critical
    share's line (up to 100%), the line, ``band`` rows below it, and the time axis; each column the
    mean of a few readings, coloured as the pinned bar colours that share. [] without the room."""
    cells = width - GRAPH_LABEL_CELLS
    if band <= 0 or cells < 12:
        return []
    mark = t.pinned_ram_critical_fraction
    per_column = per_column_for(cells, graphs.interval_s)
    if values is None:
        values = columns(graphs.pinned, graphs.first_index, per_column, cells)
    upper = [None if v is None else _eighths((v - mark) / (1 - mark), band) if v > mark and mark < 1 else 0
             for v in values]
    lower = [None if v is None else _eighths(v / mark, band) if mark > 0 else 8 * band for v in values]
    rows: list[Content] = []

    def band_row(levels: Sequence[int | None], r: int, bottom: bool, styles: Sequence[str]) -> Content:
        out = []
        for e, style in zip(levels, styles):
            fill = None if e is None else min(8, e - 8 * r)
            if fill is not None and fill > 0:
                out.append((BARS[fill - 1], style))
            elif fill is not None and bottom and r == 0:
                out.append((BARS[0], style))  # a known share too small to see: the floor
            else:
                out.append((" ", ""))
        return _cell_runs(out)

    label = lambda text: Content.styled(f"{text:>4} ", "dim")
    low_styles = [pinned_level(v, t) for v in values]
    for r in range(band - 1, -1, -1):
        rows.append(label("100%" if r == band - 1 else "") + band_row(upper, r, False, ["$error"] * cells))
    line = [("█", "$error") if v is not None and v >= mark else ("┄", "$error 60%") for v in values]
    rows.append(label(fmt_pct(mark)) + _cell_runs(line))
    for r in range(band - 1, -1, -1):
        rows.append(label("0%" if r == 0 else "") + band_row(lower, r, True, low_styles))
    axis = axis_text(per_column * cells * graphs.interval_s, "pinned, share of RAM", cells)
    rows.append(Content(" " * GRAPH_LABEL_CELLS) + Content.styled(axis, "dim"))
    return rows


def pinned_graph_key(graphs: GraphHistory, t: Thresholds, band: int, width: int,
                     cache: ColumnCache | None = None) -> tuple:
    """What ``pinned_graph`` draws from, as far as it can change what it draws: the columns' values
    (through ``cache`` where given)."""
    cells = width - GRAPH_LABEL_CELLS
    per_column = per_column_for(cells, graphs.interval_s)
    values = (cache.values if cache is not None else columns)(graphs.pinned, graphs.first_index, per_column, cells)
    return (tuple(values), per_column, graphs.interval_s,
            t.pinned_ram_critical_fraction, t.pinned_ram_warning_fraction, band, width)


class MemoryPanel(RowsWidget, View):
    """Row by row: each second mostly the RAM line changes, and only it is redrawn. ``graph``: the
    pinned share's history below the figures, as tall as the terminal's height allows."""

    def __init__(self, compact: bool = False, graph: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.compact = compact
        self.graph = graph
        self._state: ViewState | None = None
        self._graph_rows: tuple = (None, [])  # (what they were drawn from, the rows)
        self._graph_columns = ColumnCache()

    def on_resize(self) -> None:
        if self.compact and self._state is not None:
            self.show(self._state)

    def show(self, state: ViewState) -> None:
        self._state = state
        if state.snapshot is None:
            self.set_rows([Content.styled(COLLECTING, "dim")])
            return
        width = self.content_size.width if self.is_mounted else None
        rows = memory_rows(state.snapshot.host, self.compact, state.findings, width or None, state.thresholds)
        if self.graph and width:
            rows += self._pinned_graph(state, width)
        self.set_rows(rows)

    def _pinned_graph(self, state: ViewState, width: int) -> list[Content]:
        """``pinned_graph``, built again only when its columns change (at 1 Hz they mostly do not)."""
        band = pinned_band_rows(self.app.size.height)
        key = pinned_graph_key(state.graphs, state.thresholds, band, width, self._graph_columns)
        if self._graph_rows[0] != key:
            self._graph_rows = (key, pinned_graph(state.graphs, state.thresholds, band, width, key[0]))
        return self._graph_rows[1]
