"""All GPUs, one ``GpuRow`` each; rows are rebuilt only when the set of GPUs changes.

Under 120 columns each row has a one-line sparkline of the last readings, one per cell. From 120
each has the last minutes, a few readings per column: a graph as tall as the terminal leaves room
for (``sizing.gpu_graph_rows``), or where there is room for one line only (many GPUs), a sparkline
of the same minutes; on the GPUs tab and in the wide overview (``BareGpuList``) alike. Where some
process's copies are measured, each row has a line more (what they explain of its link), which the
graphs make room for.
"""
from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content

from ..view.format import COLLECTING, NO_GPU_HINT
from ..view.sizing import WIDE_CELLS, gpu_graph_rows
from ..view.state import ViewState
from ..view.traffic import gpu_copies, line_count
from .base import CompositeView, TextBlock, set_content
from .gpu_row import GpuRow, GraphSpec


class GpuList(Vertical, CompositeView):
    """The rows of the GPUs; on the GPUs tab a panel of its own."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._indices: tuple[int, ...] | None = None
        self._rows: list[GpuRow] = []
        self._empty = TextBlock("no GPUs", classes="empty")
        self._state: ViewState | None = None

    def compose(self) -> ComposeResult:
        yield self._empty

    def graph_rows(self, gpu_count: int, extra_lines: int = 0) -> int:
        """Rows of graph per direction; 1: the sparkline. ``extra_lines``: each row's lines besides
        its head, graphs and axis."""
        size = self.app.size
        return gpu_graph_rows(size.width, size.height, gpu_count, extra_lines)

    def draw(self, state: ViewState) -> None:
        self._state = state
        gpus = state.gpus
        indices = tuple(g.index for g in gpus)
        self._empty.display = not gpus
        if state.snapshot is None:
            set_content(self._empty, Content.styled(COLLECTING, "dim"))
        elif not gpus:
            set_content(self._empty, "no NVIDIA GPU in this snapshot (see the notice above)"
                        + (f"\n{NO_GPU_HINT}" if state.live else ""))
        if indices != self._indices:
            self._indices = indices
            for row in self._rows:
                row.remove()
            self._rows = [GpuRow(i) for i in range(len(gpus))]
            self.mount_all(self._rows)
        size = self.app.size
        copies = [gpu_copies(state.traffic, g.index) for g in gpus]
        wide = size.width >= WIDE_CELLS
        extra = max((line_count(c, wide) for c in copies), default=0)
        graph = GraphSpec(self.graph_rows(len(gpus), extra), state.graphs) if wide else None
        for row, g, c in zip(self._rows, gpus, copies):
            row.set_gpu(g, state.rx_series.get(g.index, ()), state.tx_series.get(g.index, ()),
                        row.position == state.selected_gpu, state.thresholds, graph, c)


class BareGpuList(GpuList):
    """The wide overview's list, inside the GPUs panel: no border or text of its own, so ``BLANK``
    (see ``layout.py``)."""

    BLANK = True
