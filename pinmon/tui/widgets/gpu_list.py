"""All GPUs, one ``GpuRow`` each; rows are rebuilt only when the set of GPUs changes."""
from __future__ import annotations

from textual.containers import Vertical
from textual.widgets import Static

from ..state import ViewState
from .base import CompositeView
from .gpu_row import GpuRow


class GpuList(Vertical, CompositeView):
    def __init__(self, **kw):
        super().__init__(**kw)
        self._indices: tuple[int, ...] | None = None

    def compose(self):
        yield Static("no GPUs", classes="empty")

    def draw(self, state: ViewState) -> None:
        gpus = state.gpus
        indices = tuple(g.index for g in gpus)
        empty = self.query_one(".empty", Static)
        empty.display = not gpus
        if not gpus:
            empty.update("no NVIDIA GPU in this snapshot (see the notice above)")
        if indices != self._indices:
            self._indices = indices
            self.query(GpuRow).remove()
            self.mount_all(GpuRow(i) for i in range(len(gpus)))
        for row in self.query(GpuRow):
            if row.position < len(gpus):
                g = gpus[row.position]
                row.set_gpu(g, state.rx_series.get(g.index, ()), state.tx_series.get(g.index, ()),
                            row.position == state.selected_gpu)
