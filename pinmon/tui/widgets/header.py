"""The status line: LIVE/REPLAY badge, ATTACH (``--attach``), host, GPU count, effective RAM,
interval, snapshot time, the attach key's countdown, REC.

On a narrow terminal it drops words before numbers: first "every", then the date (the time stays),
then, while the attach key's window counts down, the RAM figure (the Memory tab has it).
"""
from __future__ import annotations

from typing import Any

from textual.content import Content

from ...units import fmt_bytes, printable
from ..view.format import fmt_time
from ..view.state import ViewState
from .base import View
from .rows import RowsWidget


def _speed(x: float) -> str:
    return f"{x:g}x"


class StatusHeader(RowsWidget, View):
    """One row, redrawn on its own each second as the clock moves (``RowsWidget``)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._state: ViewState | None = None

    def show(self, state: ViewState) -> None:
        self._state = state
        self.set_rows([header_content(state, self.content_size.width or None)])

    def on_resize(self) -> None:
        if self._state is not None:
            self.set_rows([header_content(self._state, self.content_size.width or None)])


def header_content(state: ViewState, width: int | None = None) -> Content:
    for compact in range(4 if state.attach_status else 3):
        content = _header(state, compact)
        if width is None or content.cell_length <= width:
            return content
    return content  # still too long: it wraps, nothing is cut


def _header(state: ViewState, compact: int) -> Content:
    parts: list[Content | tuple[str, str] | str] = []
    if state.live:
        parts.append((" LIVE ", "bold reverse $success"))
        if state.attach_all:
            parts += [" ", (" ATTACH ", "bold reverse $accent")]
    else:
        parts.append((f" REPLAY {_speed(state.speed)} ", "bold reverse $warning"))
    if state.ended:
        parts.append((" END OF RECORDING ", "bold reverse $error"))
    elif state.paused:
        parts.append((" PAUSED ", "bold reverse $error"))
    snap = state.snapshot
    if snap is None:
        parts.append(("  collecting the first snapshot…", "dim"))
    else:
        h = snap.host
        effective = h.effective_mem_limit_bytes or h.mem_total_bytes
        n = len(snap.gpus)
        parts += [" ", (printable(h.hostname, 64), "bold"),
                  f"  {n} GPU{'s' if n != 1 else ''}",
                  f"  RAM {fmt_bytes(effective)}" if compact < 3 else "",
                  f"  {'every ' if compact < 1 else ''}{state.interval_s:g} s",
                  "  ", (fmt_time(snap.time, with_date=compact < 2), "bold")]
    if state.attach_status:
        parts += ["  ", (state.attach_status, "bold $accent")]
    if state.recording_path:
        parts += ["  ", (" REC ", "bold reverse $error"), " ", printable(state.recording_path)]
    return Content.assemble(*parts)
