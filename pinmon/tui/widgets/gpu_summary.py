"""The GPUs in one line each, for the overview on small terminals."""
from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ...units import fmt_rate
from ..format import error_total, link_label, link_state
from ..state import ViewState
from .base import View, lines, set_content
from .gpu_row import _LINK_NOTE, _LINK_STYLE


class GpuSummary(Static, View):
    def show(self, state: ViewState) -> None:
        if not state.gpus:
            set_content(self, Content.styled("no NVIDIA GPU", "dim"))
            return
        rows = []
        for pos, g in enumerate(state.gpus):
            marker = ("▶", "bold $accent") if pos == state.selected_gpu else " "
            if g.lost:
                rows.append(Content.assemble(marker, f"{g.index} {g.name or 'n/a'} ", (" LOST ", "bold reverse $error")))
                continue
            st = link_state(g)
            est = " est." if g.pcie.method == "sampled" else ""
            rows.append(Content.assemble(
                marker, (f"{g.index}", "bold"), " ",
                (link_label(g.link.gen, g.link.width) + _LINK_NOTE.get(st, ""), _LINK_STYLE[st]),
                f"  RX {fmt_rate(g.pcie.rx_bytes_per_s)}  TX {fmt_rate(g.pcie.tx_bytes_per_s)}{est}",
                (f"  errors +{error_total(g)}", "bold $error") if error_total(g) else "",
                ("  " + (g.name or ""), "dim")))
        set_content(self, lines(*rows))
