"""One GPU: link now vs max, RX and TX with their history, method, error deltas.

The history is a one-line sparkline of the last readings (one per cell), or with ``GraphSpec`` a
bar graph some rows tall of the last minutes (``history.GRAPH_SPAN_S``), each column the mean of a
few readings, under a time axis; both are scaled to the link's rated rate, so a downshifted or idle
link shows as low bars. RX is what the GPU's link received, TX what it sent: TX carries the read
requests of host-to-device copies as well as device-to-host data (see the help's terms).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

from textual.binding import Binding, BindingType
from textual.color import Color
from textual.content import Content
from textual.message import Message
from textual.strip import Strip

from ...advise.thresholds import Thresholds
from ...model import Gpu
from ...units import fmt_link, fmt_pct, fmt_rate, printable, share
from ..view.format import COLLECTING, error_text, error_total, link_state, method_label
from ..view.history import ColumnCache, GraphHistory, per_column_for
from ..view.memo import Memo
from ..view.traffic import GpuCopies, row_line, row_lines
from .rows import RowsWidget
from .sparkline import Run, axis_text, graph_levels, level_runs, runs_content, spark_runs, spark_segments

_LINK_STYLE = {"degraded": "bold $warning", "downshift": "dim", "full": "", "unknown": "dim", "lost": "bold $error"}
_LINK_NOTE = {"degraded": " DEGRADED", "downshift": " idle"}
# The rate column ("RX in   12.3 GB/s  45% exact"); the bars fill the rest of the row.
RATE_CELLS = 32
# The two directions: (label, Pcie field). RX: received by the GPU's link; TX: sent by it.
DIRECTIONS = (("RX in ", "rx_bytes_per_s"), ("TX out", "tx_bytes_per_s"))


class GraphSpec(NamedTuple):
    """A graph instead of the sparkline: ``rows`` per direction, drawn from ``history``."""
    rows: int
    history: GraphHistory


def head_content(gpu: Gpu, selected: bool, thresholds: Thresholds) -> Content:
    marker = ("▶ ", "bold $accent") if selected else "  "
    name = printable(gpu.name or None, 60)
    if gpu.lost:
        return Content.assemble(marker, (f"GPU {gpu.index}", "bold"), f" {name}  ",
                                (" LOST ", "bold reverse $error"), " fell off the bus")
    state = link_state(gpu, thresholds)
    link = gpu.link
    now = fmt_link(link.gen, link.width)
    top = fmt_link(link.gen_max, link.width_max)
    return Content.assemble(
        marker, (f"GPU {gpu.index}", "bold"), f" {name}  ",
        (now + _LINK_NOTE.get(state, ""), _LINK_STYLE[state]), f" (max {top})  ",
        (error_text(gpu, detail=False), "bold $error" if error_total(gpu) else "dim"))


def direction_parts(label: str, rate: float | None, link_rate: float | None,
                    method: str | None) -> tuple[str, str, str, str]:
    """The rate column's text as it will read: what its Content is built from (``direction_from``)."""
    pct = share(rate, link_rate)
    pct_text = "" if pct is None else fmt_pct(pct)
    return label, f" {fmt_rate(rate):>10} ", f"{pct_text:>4}", f" {method_label(method):<5}"


def direction_from(parts: tuple[str, str, str, str]) -> Content:
    label, rate, pct, est = parts
    return Content.assemble((label, "bold"), rate, (pct, ""), (est, "dim"))


def direction_content(label: str, rate: float | None, link_rate: float | None,
                      method: str | None) -> Content:
    return direction_from(direction_parts(label, rate, link_rate, method))


def rate_column(parts: tuple[str, ...]) -> Content:
    """A bars row's rate column from its parts (``GpuRow._rate_text``), cut or padded to its cells."""
    if len(parts) == 4:
        label, rate, pct, est = parts
        text = direction_from((label, rate, pct, est))
    elif parts:
        text = Content.assemble((parts[0], "dim"), parts[1])
    else:
        text = Content("")
    return text.truncate(RATE_CELLS, pad=True)


def head_key(gpu: Gpu, selected: bool, thresholds: Thresholds) -> tuple:
    """What ``head_content`` reads of its arguments: the head line is built again only when it changes."""
    total = error_total(gpu)
    return (selected, gpu.index, gpu.name, gpu.lost, gpu.link, link_state(gpu, thresholds),
            error_text(gpu, detail=False), bool(total))


def copies_content(copies: GpuCopies, width: int | None, wide: bool = False) -> list[Content]:
    """What the measured copies explain of the link: one line, or with ``wide`` a line per direction;
    "copies" bold as the rate rows' labels."""
    out = []
    for text in (row_lines(copies, width) if wide else [row_line(copies, width)]):
        head, rest = text[:6], text[6:]
        out.append(Content.assemble((head, "bold"), (rest, "" if copies.links else "dim")))
    return out


def axis_content(span_s: float, scale: float | None, cells: int) -> Content:
    """The graphs' time axis under their columns: how long ago the left edge is, the scale, now."""
    middle = f"top: {fmt_rate(scale)}, the link's rate" if scale else "top: the peak"
    return Content(" " * RATE_CELLS) + Content.styled(axis_text(span_s, middle, cells), "dim")


class GpuRow(RowsWidget, can_focus=True):
    """One widget for the three lines, bars included: each widget on screen costs the compositor a
    render pass per refresh, and a row redraws every second (8 GPUs: 8 passes, not 56). Its lines
    are redrawn one by one (``RowsWidget``): the head line (name, link, errors) rarely changes.

    Focusable so Enter on the row selects the GPU and shows its detail.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {"gpu-row--spark-min", "gpu-row--spark-max"}
    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_gpu", "Detail", show=False)]

    class Selected(Message):
        def __init__(self, position: int):
            super().__init__()
            self.position = position

    def __init__(self, position: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.position = position
        self._data: tuple | None = None
        # row index -> (the row, its rate column, its bars' runs, low colour, high colour)
        self._bar_rows: dict[int, tuple] = {}
        # The bars' colours and the styles they were read under; the bars of each direction as
        # text, with what they were built from: at 1 Hz the styles stay and idle bars repeat. A
        # sparkline's bars are kept by direction, a graph's by (direction, row).
        self._colours: tuple | None = None
        self._bars: dict[str | tuple[str, int], tuple] = {}
        self._columns = {label: ColumnCache() for label, _ in DIRECTIONS}  # the graphs' column values
        # The row's pieces (head, rate texts, graph runs, whole rows), each built again only when
        # what it reads changed: at 1 Hz most of them did not (view/memo.py).
        self._memo = Memo()
        # Per row index, its rate text and bars and the row joined from them (held, so the
        # identity of what was kept is the identity of what it was built from).
        self._bar_pieces: dict[int, tuple[Content, Content, Content]] = {}
        # Per row index, the rate column's strip with the text and styles it was rendered from.
        self._rate_strips: dict[int, tuple[Content, int, object, Strip]] = {}

    def set_gpu(self, gpu: Gpu, rx: Sequence[float | None], tx: Sequence[float | None],
                selected: bool, thresholds: Thresholds, graph: GraphSpec | None = None,
                copies: GpuCopies | None = None) -> None:
        """``rx``/``tx``: the sparkline's readings, newest last; ``graph``: draw a graph instead;
        ``copies``: what the measured copies explain of this GPU's link (a line of its own)."""
        data = (gpu, tuple(rx), tuple(tx), selected, thresholds, graph, copies)
        if data == self._data:
            return
        self._data = data
        self.set_class(selected, "-selected")
        self.set_class(gpu.lost, "-lost")
        if self.is_mounted:
            self._draw()  # else on_mount draws it

    def _draw(self) -> None:
        self.set_rows(self._build(self.content_size.width, self.has_focus))

    def _build(self, width: int, focused: bool) -> list[Content]:
        if self._data is None:
            return [Content.styled(COLLECTING, "dim")]
        gpu, rx, tx, selected, thresholds, graph, copies = self._data
        head = self._memo.get("head", (head_key(gpu, selected, thresholds), focused),
                              self._head, gpu, selected, thresholds, focused)
        if gpu.lost:
            return [head]
        link_rate = gpu.link.theoretical_bytes_per_s
        # One scale for both directions: the link as rated, so a downshift shows as lower bars.
        scale = gpu.link.max_theoretical_bytes_per_s or link_rate
        p = gpu.pcie
        spark_cells = max(0, width - RATE_CELLS)
        rows = [head]
        if copies is not None:
            rows += copies_content(copies, width or None, wide=graph is not None)
        self._bar_rows = {}
        if graph is not None and graph.rows > 1 and spark_cells > 0:
            return self._graph(rows, gpu, graph, scale, spark_cells)
        if graph is not None:  # one line each, over the graph's minutes: a column per few readings
            h = graph.history
            per_column = per_column_for(spark_cells, h.interval_s)
            rx = self._columns[DIRECTIONS[0][0]].values(h.rx.get(gpu.index, ()), h.first_index, per_column,
                                                        spark_cells)
            tx = self._columns[DIRECTIONS[1][0]].values(h.tx.get(gpu.index, ()), h.first_index, per_column,
                                                        spark_cells)
        low, high = self._spark_colours()
        for (label, field), series in zip(DIRECTIONS, (rx, tx)):
            text = self._rate_text((label, 0), direction_parts(label, getattr(p, field), link_rate, p.method))
            runs = spark_runs(series, scale, spark_cells)
            kept = self._bars.get(label)
            if kept is None or kept[:3] != (runs, low, high):
                kept = self._bars[label] = (runs, low, high, runs_content(runs, low, high))
            self._add_bars(rows, text, runs, low, high, kept[3])
        return rows

    def _graph(self, rows: list[Content], gpu: Gpu, graph: GraphSpec, scale: float | None,
               cells: int) -> list[Content]:
        """The head, then per direction ``graph.rows`` rows of bars (the rate and the span's peak
        beside them), then the time axis. The peak, not a mean: a mean over minutes moves every
        second and would redraw its row each time, where the bars already show the level."""
        h = graph.history
        per_column = per_column_for(cells, h.interval_s)
        span = per_column * cells  # readings the graph covers
        colours = self._row_colours(graph.rows)
        p = gpu.pcie
        memo = self._memo
        for (label, field), by_gpu in zip(DIRECTIONS, (h.rx, h.tx)):
            series = by_gpu.get(gpu.index, ())
            values = self._columns[label].values(series, h.first_index, per_column, cells)
            known = [v for v in series[-span:] if v is not None]
            peak = max(known) if known else None
            parts = [direction_parts(label, getattr(p, field), gpu.link.theoretical_bytes_per_s, p.method),
                     ("  peak ", fmt_rate(peak))]
            levels = graph_levels(values, scale, graph.rows)
            # Runs per row from the bar heights: at 1 Hz most seconds leave every height as it was.
            all_runs = memo.get(("runs", label), (levels, graph.rows), level_runs, levels, graph.rows)
            for r, runs in enumerate(all_runs):
                text = self._rate_text((label, r), parts[r] if r < len(parts) else ())
                colour = colours[graph.rows - 1 - r]
                key = (label, r)
                kept = self._bars.get(key)
                if kept is None or kept[:3] != (runs, colour, colour):
                    kept = self._bars[key] = (runs, colour, colour, runs_content(runs, colour, colour))
                self._add_bars(rows, text, runs, colour, colour, kept[3])
        axis_key = (span * h.interval_s, scale, cells)
        rows.append(memo.get("axis", axis_key, axis_content, *axis_key))
        return rows

    def _head(self, gpu: Gpu, selected: bool, thresholds: Thresholds, focused: bool) -> Content:
        head = head_content(gpu, selected, thresholds)
        return head.stylize_before("bold") if focused else head

    def _rate_text(self, slot: tuple[str, int], parts: tuple[str, ...]) -> Content:
        """The rate column of a bars row, cut or padded to its cells: a direction's rate
        (``direction_parts``), the peak (two parts: label, figure) or nothing."""
        return self._memo.get(("rate", *slot), parts, rate_column, parts)

    def _add_bars(self, rows: list[Content], text: Content, runs: Sequence[Run], low: Color, high: Color,
                  bars: Content) -> None:
        index = len(rows)
        kept = self._bar_pieces.get(index)
        if kept is not None and kept[0] is text and kept[1] is bars:
            row = kept[2]  # the same two pieces: the same row, which the widget then finds unchanged
        else:
            row = text + bars
            self._bar_pieces[index] = (text, bars, row)
        self._bar_rows[index] = (row, text, runs, low, high)
        rows.append(row)

    def _row_colours(self, count: int) -> list:
        """Each graph row's colour, the bottom one first: from the low colour up to the high one."""
        low, high = self._spark_colours()
        return [low.blend(high, r / max(1, count - 1)) for r in range(count)]

    def _spark_colours(self) -> tuple:
        """(low, high) colours of the bars on this row's background, read again when its styles
        change (Textual keeps ``visual_style`` until they do: focus, selection, theme)."""
        style = self.visual_style
        if self._colours is None or self._colours[0] is not style:
            _, base = self.background_colors
            self._colours = (style, base + self.get_component_styles("gpu-row--spark-min").color,
                             base + self.get_component_styles("gpu-row--spark-max").color)
        return self._colours[1:]

    def _render_row(self, index: int, row: Content, width: int) -> list[Strip]:
        # A bars row: the rate column through Textual, the bars straight to segments (the same
        # cells; tests/tui/test_gpu_row_render.py compares both). Anything else, or a row built
        # for another width, the usual way.
        bars = self._bar_rows.get(index)
        if (bars is None or RATE_CELLS + sum(n for _, n in bars[2]) != width
                or not (bars[0] is row or bars[0].is_same(row))):  # kept: an update found no change
            return super()._render_row(index, row, width)
        _, text, runs, low, high = bars
        style = self.visual_style
        kept = self._rate_strips.get(index)
        if kept is not None and kept[0] is text and kept[1] == width and kept[2] is style:
            rate_strip = kept[3]  # a row whose bars alone changed: its rate column as it was drawn
        else:
            rate = super()._render_row(index, text, width)
            if len(rate) != 1 or rate[0].cell_length != RATE_CELLS:
                return super()._render_row(index, row, width)
            rate_strip = rate[0]
            self._rate_strips[index] = (text, width, style, rate_strip)
        return [Strip.join([rate_strip, Strip(spark_segments(runs, style, low, high))])]

    def on_mount(self) -> None:
        self._draw()

    def on_resize(self) -> None:
        self._draw()  # the bars fill the new width

    def on_focus(self) -> None:
        self._draw()

    def on_blur(self) -> None:
        self._draw()

    def action_select_gpu(self) -> None:
        self.post_message(self.Selected(self.position))
