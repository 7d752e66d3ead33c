"""One GPU: link now vs max, RX and TX with a 60-sample sparkline each, method, error deltas."""
from __future__ import annotations

from typing import Optional, Sequence

from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import Static

from ...model import Gpu
from ...units import fmt_rate
from ..format import error_text, error_total, link_label, link_state, method_label, share
from .sparkline import RateSparkline
from .base import set_content

_LINK_STYLE = {"degraded": "bold $warning", "downshift": "dim", "full": "", "unknown": "dim", "lost": "bold $error"}
_LINK_NOTE = {"degraded": " DEGRADED", "downshift": " idle"}


def head_content(gpu: Gpu, selected: bool) -> Content:
    marker = ("▶ ", "bold $accent") if selected else "  "
    name = gpu.name or "n/a"
    if gpu.lost:
        return Content.assemble(marker, (f"GPU {gpu.index}", "bold"), f" {name}  ",
                                (" LOST ", "bold reverse $error"), " fell off the bus")
    state = link_state(gpu)
    link = gpu.link
    now = link_label(link.gen, link.width)
    top = link_label(link.gen_max, link.width_max)
    return Content.assemble(
        marker, (f"GPU {gpu.index}", "bold"), f" {name}  ",
        (now + _LINK_NOTE.get(state, ""), _LINK_STYLE[state]), f" (max {top})  ",
        (error_text(gpu, detail=False), "bold $error" if error_total(gpu) else "dim"))


def direction_content(label: str, rate: Optional[float], link_rate: Optional[float],
                      method: Optional[str]) -> Content:
    est = method_label(method)
    pct = share(rate, link_rate)
    pct_text = "" if pct is None else f"{pct * 100:3.0f}%"
    return Content.assemble((label, "bold"), f" {fmt_rate(rate):>10} ", (f"{pct_text:>4}", ""),
                            (f" {est:<5}", "dim"))


class GpuRow(Vertical, can_focus=True):
    """Focusable so Enter on the row selects the GPU and shows its detail."""

    BINDINGS = [Binding("enter", "select_gpu", "Detail", show=False)]

    class Selected(Message):
        def __init__(self, position: int):
            super().__init__()
            self.position = position

    def __init__(self, position: int, **kw):
        super().__init__(**kw)
        self.position = position
        self._data: Optional[tuple] = None

    def compose(self):
        # Children kept by reference: a row redraws every interval, and CSS queries cost more than drawing.
        self._head = Static(classes="gpu-head")
        self._rate = {"rx": Static(classes="gpu-rate"), "tx": Static(classes="gpu-rate")}
        self._spark = {"rx": RateSparkline(), "tx": RateSparkline()}
        self._dirs = [Horizontal(self._rate[d], self._spark[d], classes="gpu-dir") for d in ("rx", "tx")]
        yield self._head
        yield from self._dirs

    def on_mount(self) -> None:
        # is_mounted turns true only after this handler; draw on the next refresh.
        self.call_after_refresh(self._apply_latest)

    def set_gpu(self, gpu: Gpu, rx: Sequence[Optional[float]], tx: Sequence[Optional[float]],
                selected: bool) -> None:
        self._data = (gpu, tuple(rx), tuple(tx), selected)
        self._apply_latest()

    def _apply_latest(self) -> None:
        if self._data is None or not self.is_mounted:
            return  # on_mount applies it
        widgets = (self._head, *self._rate.values(), *self._spark.values())
        if not all(w.is_mounted for w in widgets):
            # Mounted before its grandchildren: draw once they are there.
            self.call_after_refresh(self._apply_latest)
            return
        self._apply(*self._data)

    def _apply(self, gpu: Gpu, rx, tx, selected: bool) -> None:
        self.set_class(selected, "-selected")
        self.set_class(gpu.lost, "-lost")
        set_content(self._head, head_content(gpu, selected))
        for d in self._dirs:
            d.display = not gpu.lost
        link_rate = gpu.link.theoretical_bytes_per_s
        p = gpu.pcie
        set_content(self._rate["rx"], direction_content("RX H2D", p.rx_bytes_per_s, link_rate, p.method))
        set_content(self._rate["tx"], direction_content("TX D2H", p.tx_bytes_per_s, link_rate, p.method))
        # One scale for both directions: the link as rated, so a downshift shows as lower bars.
        scale = gpu.link.max_theoretical_bytes_per_s or link_rate
        self._spark["rx"].set_samples(rx, scale)
        self._spark["tx"].set_samples(tx, scale)

    def action_select_gpu(self) -> None:
        self.post_message(self.Selected(self.position))
