"""The processes holding the most pinned memory, for the overview.

With ``fit`` the list takes the rows its panel has left (the narrow overview gives it what the
panels above leave over) and says how many more there are, so it never pushes the screen into a
scroll.
"""
from __future__ import annotations

from typing import Optional

from textual.content import Content
from textual.widgets import Static

from ...units import fmt_bytes, printable
from ..format import SORT_COLUMNS, name_text, sort_processes, user_text
from ..state import ViewState
from .base import NoLinks, View, lines, set_content


class TopProcesses(NoLinks, Static, View):
    def __init__(self, limit: int = 5, fit: bool = False, **kw):
        super().__init__(**kw)
        self.limit = limit
        self.fit = fit
        self._state: Optional[ViewState] = None

    def on_resize(self) -> None:
        if self.fit and self._state is not None:
            self.show(self._state)

    def _room(self) -> int:
        """How many processes to list: ``limit``, or fewer where the height (with the header row
        and a "more" row) holds fewer."""
        if not self.fit or not self.is_mounted or not self.size.height:
            return self.limit
        return max(0, min(self.limit, self.content_size.height - 1))

    def show(self, state: ViewState) -> None:
        self._state = state
        procs = state.snapshot.processes if state.snapshot is not None else ()
        if not procs:
            set_content(self, Content.styled("no CUDA processes with pinned memory", "dim"))
            return
        room = self._room()
        shown = room if len(procs) <= room else max(0, room - 1)  # the last row says how many more
        rows = [Content.styled(f"{'PID':>8} {'USER':<9} {'PINNED':>10} {'GPU MEM':>10}  COMMAND", "bold")]
        for p in sort_processes(procs, SORT_COLUMNS[0])[:shown]:
            src = "" if p.source == "est." else f" [{printable(p.source, 10)}]"
            rows.append(Content(f"{p.pid:>8} {user_text(p)[:9]:<9} {fmt_bytes(p.pinned_bytes):>10}"
                                f" {fmt_bytes(p.gpu_memory_bytes):>10}  {name_text(p)}{src}"))
        if len(procs) > shown:
            rows.append(Content.styled(f"… {len(procs) - shown} more (4: Processes)", "dim"))
        set_content(self, lines(*rows))
