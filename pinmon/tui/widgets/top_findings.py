"""The worst findings for the overview: one line each, or with the advice on large terminals."""
from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ..state import ViewState
from .base import View, lines, set_content
from .findings import badge


class TopFindings(Static, View):
    def __init__(self, limit: int = 3, detailed: bool = False, **kw):
        super().__init__(**kw)
        self.limit = limit
        self.detailed = detailed

    def show(self, state: ViewState) -> None:
        if state.snapshot is None:
            set_content(self, Content.styled("waiting for the first snapshot…", "dim"))
            return
        if not state.findings:
            set_content(self, Content.styled("No findings.", "$success"))
            return
        rows: list[Content] = []
        for f in state.findings[: self.limit]:
            rows.append(Content.assemble(badge(f), " ", f.message))
            if self.detailed:
                rows.append(Content.assemble(("       → ", "bold $accent"), (f.advice, "italic")))
        if len(state.findings) > self.limit:
            rows.append(Content.styled(f"… {len(state.findings) - self.limit} more (6: Advisor)", "dim"))
        set_content(self, lines(*rows))
