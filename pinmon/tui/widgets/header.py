"""The status line: LIVE/REPLAY badge, host, GPU count, effective RAM, interval, snapshot time, REC."""
from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ...units import fmt_bytes
from ..format import fmt_time
from ..state import ViewState
from .base import View


def _speed(x: float) -> str:
    return f"{x:g}x"


class StatusHeader(Static, View):
    def show(self, state: ViewState) -> None:
        self.update(header_content(state))


def header_content(state: ViewState) -> Content:
    parts: list[Content | tuple[str, str] | str] = []
    if state.live:
        parts.append((" LIVE ", "bold reverse $success"))
    else:
        parts.append((f" REPLAY {_speed(state.speed)} ", "bold reverse $warning"))
    if state.ended:
        parts.append((" END OF RECORDING ", "bold reverse $error"))
    elif state.paused:
        parts.append((" PAUSED ", "bold reverse $error"))
    snap = state.snapshot
    if snap is None:
        parts.append("  waiting for the first snapshot…")
    else:
        h = snap.host
        effective = h.effective_mem_limit_bytes or h.mem_total_bytes
        n = len(snap.gpus)
        parts += [" ", (h.hostname, "bold"),
                  f"  {n} GPU{'s' if n != 1 else ''}",
                  f"  RAM {fmt_bytes(effective)}",
                  f"  every {state.interval_s:g} s" + (f"/{_speed(state.speed)}" if not state.live else ""),
                  "  ", (fmt_time(snap.time), "bold")]
    if state.recording_path:
        parts += ["  ", (" REC ", "bold reverse $error"), " ", state.recording_path]
    return Content.assemble(*parts)
