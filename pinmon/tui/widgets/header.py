"""The status line: LIVE/REPLAY badge, ATTACH (``--attach``), host, GPU count, effective RAM,
interval, snapshot time, the attach key's countdown, REC.

On a narrow terminal it drops words before numbers: first "every", then the date (the time stays),
then, while the attach key's window counts down, the RAM figure (the Memory tab has it).
"""
from __future__ import annotations

import functools
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
    snap = state.snapshot
    h = snap.host if snap is not None else None
    head = _head(state.live, state.attach_all, state.speed, state.ended, state.paused,
                 None if h is None else printable(h.hostname, 64),
                 None if h is None else (h.effective_mem_limit_bytes or h.mem_total_bytes),
                 0 if snap is None else len(snap.gpus), state.interval_s, compact)
    tail = _tail(state.attach_status, state.recording_path)
    if snap is None:
        return head + tail
    return head + Content.styled(fmt_time(snap.time, with_date=compact < 2), "bold") + tail


@functools.lru_cache(maxsize=32)
def _head(live: bool, attach_all: bool, speed: float, ended: bool, paused: bool, host: str | None,
          effective: int | None, gpus: int, interval_s: float, compact: int) -> Content:
    """The line up to the snapshot's time, which alone moves each second: built once per change."""
    parts: list[Content | tuple[str, str] | str] = []
    if live:
        parts.append((" LIVE ", "bold reverse $success"))
        if attach_all:
            parts += [" ", (" ATTACH ", "bold reverse $accent")]
    else:
        parts.append((f" REPLAY {_speed(speed)} ", "bold reverse $warning"))
    if ended:
        parts.append((" END OF RECORDING ", "bold reverse $error"))
    elif paused:
        parts.append((" PAUSED ", "bold reverse $error"))
    if host is None:
        parts.append(("  collecting the first snapshot…", "dim"))
    else:
        parts += [" ", (host, "bold"),
                  f"  {gpus} GPU{'s' if gpus != 1 else ''}",
                  f"  RAM {fmt_bytes(effective)}" if compact < 3 else "",
                  f"  {'every ' if compact < 1 else ''}{interval_s:g} s",
                  "  "]
    return Content.assemble(*parts)


@functools.lru_cache(maxsize=32)
def _tail(attach_status: str | None, recording_path: str | None) -> Content:
    parts: list[tuple[str, str] | str] = []
    if attach_status:
        parts += ["  ", (attach_status, "bold $accent")]
    if recording_path:
        parts += ["  ", (" REC ", "bold reverse $error"), " ", printable(recording_path)]
    return Content.assemble(*parts)
