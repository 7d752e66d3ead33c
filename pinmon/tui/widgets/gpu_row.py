"""One GPU: link now vs max, RX and TX with a 60-sample sparkline each, method, error deltas."""
from __future__ import annotations

from typing import Optional, Sequence

from textual.binding import Binding
from textual.content import Content
from textual.message import Message
from textual.strip import Strip

from ...advise.thresholds import Thresholds
from ...model import Gpu
from ...units import fmt_link, fmt_pct, fmt_rate, printable, share
from ..format import error_text, error_total, link_state, method_label
from .rows import RowsWidget
from .sparkline import runs_content, spark_runs, spark_segments

_LINK_STYLE = {"degraded": "bold $warning", "downshift": "dim", "full": "", "unknown": "dim", "lost": "bold $error"}
_LINK_NOTE = {"degraded": " DEGRADED", "downshift": " idle"}
# The rate column ("RX H2D  12.3 GB/s  45% exact"); the bars fill the rest of the row.
RATE_CELLS = 32


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


def direction_content(label: str, rate: Optional[float], link_rate: Optional[float],
                      method: Optional[str]) -> Content:
    est = method_label(method)
    pct = share(rate, link_rate)
    pct_text = "" if pct is None else fmt_pct(pct)
    return Content.assemble((label, "bold"), f" {fmt_rate(rate):>10} ", (f"{pct_text:>4}", ""),
                            (f" {est:<5}", "dim"))


class GpuRow(RowsWidget, can_focus=True):
    """One widget for the three lines, bars included: each widget on screen costs the compositor a
    render pass per refresh, and a row redraws every second (8 GPUs: 8 passes, not 56). Its lines
    are redrawn one by one (``RowsWidget``): the head line (name, link, errors) rarely changes.

    Focusable so Enter on the row selects the GPU and shows its detail.
    """

    COMPONENT_CLASSES = {"gpu-row--spark-min", "gpu-row--spark-max"}
    BINDINGS = [Binding("enter", "select_gpu", "Detail", show=False)]

    class Selected(Message):
        def __init__(self, position: int):
            super().__init__()
            self.position = position

    def __init__(self, position: int, **kw):
        super().__init__(**kw)
        self.position = position
        self._data: Optional[tuple] = None
        # row index -> (the row, its rate column, its bars' runs, low colour, high colour)
        self._bar_rows: dict[int, tuple] = {}
        # The bars' colours and the styles they were read under; the bars of each direction as
        # text, with what they were built from: at 1 Hz the styles stay and idle bars repeat.
        self._colours: Optional[tuple] = None
        self._bars: dict[str, tuple] = {}

    def set_gpu(self, gpu: Gpu, rx: Sequence[Optional[float]], tx: Sequence[Optional[float]],
                selected: bool, thresholds: Thresholds) -> None:
        data = (gpu, tuple(rx), tuple(tx), selected, thresholds)
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
            return [Content.styled("waiting for the first snapshot…", "dim")]
        gpu, rx, tx, selected, thresholds = self._data
        head = head_content(gpu, selected, thresholds)
        if focused:
            head = head.stylize_before("bold")
        if gpu.lost:
            return [head]
        low, high = self._spark_colours()
        link_rate = gpu.link.theoretical_bytes_per_s
        # One scale for both directions: the link as rated, so a downshift shows as lower bars.
        scale = gpu.link.max_theoretical_bytes_per_s or link_rate
        p = gpu.pcie
        spark_cells = max(0, width - RATE_CELLS)
        rows = [head]
        self._bar_rows = {}
        for label, rate, series in (("RX H2D", p.rx_bytes_per_s, rx), ("TX D2H", p.tx_bytes_per_s, tx)):
            text = direction_content(label, rate, link_rate, p.method).truncate(RATE_CELLS, pad=True)
            runs = spark_runs(series, scale, spark_cells)
            kept = self._bars.get(label)
            if kept is None or kept[:3] != (runs, low, high):
                kept = self._bars[label] = (runs, low, high, runs_content(runs, low, high))
            row = text + kept[3]
            self._bar_rows[len(rows)] = (row, text, runs, low, high)
            rows.append(row)
        return rows

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
        rate = super()._render_row(index, text, width)
        if len(rate) != 1 or rate[0].cell_length != RATE_CELLS:
            return super()._render_row(index, row, width)
        return [Strip.join([rate[0], Strip(spark_segments(runs, self.visual_style, low, high))])]

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
