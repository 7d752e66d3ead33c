"""The GPUs in one line each, for the overview on small terminals.

At most ``MAX_ROWS`` lines: an 8-GPU box would otherwise push the panels below off an 80x24 screen.
The selected GPU is always among those listed; the GPUs tab has all of them. Where some process's
copies are measured (attached, traced), each line says how much of its link they explain, in short
("copies RX 88% TX 43%"): the GPUs tab has it in full.
"""
from __future__ import annotations

from textual.content import Content

from ...units import fmt_link, fmt_traffic, printable
from ..view.format import COLLECTING, NO_GPU_HINT, error_total, link_state
from ..view.state import ViewState
from ..view.traffic import brief, gpu_copies
from .base import NoLinks, TextBlock, View, lines, set_content
from .gpu_row import _LINK_NOTE, _LINK_STYLE

MAX_ROWS = 4


def listed_positions(count: int, selected: int, max_rows: int = MAX_ROWS) -> list[int]:
    """Which GPUs (positions) get a line: all when they fit, else the first ``max_rows - 1`` with
    the selected one among them (the last line then says how many more)."""
    if count <= max_rows:
        return list(range(count))
    keep = max_rows - 1
    first = list(range(keep))
    if selected >= keep:
        first[-1] = selected
    return first


class GpuSummary(NoLinks, TextBlock, View):
    def show(self, state: ViewState) -> None:
        if state.snapshot is None:
            set_content(self, Content.styled(COLLECTING, "dim"))
            return
        if not state.gpus:
            set_content(self, Content.styled(NO_GPU_HINT if state.live else "no NVIDIA GPU in this recording", "dim"))
            return
        rows = []
        positions = listed_positions(len(state.gpus), state.selected_gpu)
        for pos in positions:
            g = state.gpus[pos]
            marker = ("▶ ", "bold $accent") if pos == state.selected_gpu else "  "
            name = printable(g.name or None, 60)
            if g.lost:
                rows.append(Content.assemble(marker, f"GPU {g.index} {name} ", (" LOST ", "bold reverse $error")))
                continue
            st = link_state(g, state.thresholds)
            est = " est." if g.pcie.method == "sampled" else ""
            copies = gpu_copies(state.traffic, g.index)
            explained = brief(copies) if copies is not None else ""
            rows.append(Content.assemble(
                marker, (f"GPU {g.index}", "bold"), " ",
                (fmt_link(g.link.gen, g.link.width) + _LINK_NOTE.get(st, ""), _LINK_STYLE[st]),
                f"  {fmt_traffic(g.pcie.rx_bytes_per_s, g.pcie.tx_bytes_per_s)}{est}",
                (f"  errors +{error_total(g)}", "bold $error") if error_total(g) else "",
                ("  " + explained, "$accent") if explained else "",
                ("  " + printable(g.name or "", 60), "dim")))
        if len(positions) < len(state.gpus):
            rows.append(Content.styled(f"… {len(state.gpus) - len(positions)} more GPUs (2: GPUs, g: next)", "dim"))
        set_content(self, lines(*rows))
