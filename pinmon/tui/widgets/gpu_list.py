"""All GPUs, one ``GpuRow`` each; rows are rebuilt only when the set of GPUs changes."""
from __future__ import annotations

from textual.containers import Vertical
from textual.widgets import Static

from ..format import NO_GPU_HINT
from ..state import ViewState
from .base import CompositeView, set_content
from .gpu_row import GpuRow


class GpuList(Vertical, CompositeView):
    """The rows of the GPUs; on the GPUs tab a panel of its own."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self._indices: tuple[int, ...] | None = None
        self._rows: list[GpuRow] = []
        self._empty = Static("no GPUs", classes="empty")

    def compose(self):
        yield self._empty

    def draw(self, state: ViewState) -> None:
        gpus = state.gpus
        indices = tuple(g.index for g in gpus)
        self._empty.display = not gpus
        if not gpus:
            set_content(self._empty, "no NVIDIA GPU in this snapshot (see the notice above)"
                        + (f"\n{NO_GPU_HINT}" if state.live else ""))
        if indices != self._indices:
            self._indices = indices
            for row in self._rows:
                row.remove()
            self._rows = [GpuRow(i) for i in range(len(gpus))]
            self.mount_all(self._rows)
        for row, g in zip(self._rows, gpus):
            row.set_gpu(g, state.rx_series.get(g.index, ()), state.tx_series.get(g.index, ()),
                        row.position == state.selected_gpu, state.thresholds)


class BareGpuList(GpuList):
    """The overview's list, inside the GPUs panel: no border or text of its own, so ``BLANK``
    (see ``layout.py``)."""

    BLANK = True
