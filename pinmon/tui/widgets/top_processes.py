"""The processes holding the most pinned memory, for the overview."""
from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ...units import fmt_bytes
from ..format import SORT_COLUMNS, command_text, sort_processes
from ..state import ViewState
from .base import View, lines, set_content


class TopProcesses(Static, View):
    def __init__(self, limit: int = 5, **kw):
        super().__init__(**kw)
        self.limit = limit

    def show(self, state: ViewState) -> None:
        procs = state.snapshot.processes if state.snapshot is not None else ()
        if not procs:
            set_content(self, Content.styled("no CUDA processes with pinned memory", "dim"))
            return
        rows = [Content.styled(f"{'PID':>8} {'USER':<9} {'PINNED':>10} {'GPU MEM':>10}  COMMAND", "bold")]
        for p in sort_processes(procs, SORT_COLUMNS[0])[: self.limit]:
            src = "" if p.source == "est." else f" [{p.source}]"
            rows.append(Content(f"{p.pid:>8} {(p.user or 'n/a')[:9]:<9} {fmt_bytes(p.pinned_bytes):>10}"
                                f" {fmt_bytes(p.gpu_memory_bytes):>10}  {p.name or command_text(p)}{src}"))
        if len(procs) > self.limit:
            rows.append(Content.styled(f"… {len(procs) - self.limit} more (4: Processes)", "dim"))
        set_content(self, lines(*rows))
