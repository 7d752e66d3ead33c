"""The worst findings for the overview: one line each, or with the advice on large terminals.

Bounded so a long finding never pushes the panels below it off screen: without ``detailed`` each
finding is one line (cut with "…" by the CSS); with it the message and the advice take at most
``MAX_LINES`` lines each, wrapped under their own start. The Advisor tab has the rest.
"""
from __future__ import annotations

from typing import Optional

from textual.content import Content
from textual.widgets import Static

from ...units import printable
from ..state import ViewState
from .base import NoLinks, View, lines, set_content
from .findings import badge
from .wrap import hanging

MAX_LINES = 2
ADVICE_LEAD = "       → "


class TopFindings(NoLinks, Static, View):
    def __init__(self, limit: int = 3, detailed: bool = False, **kw):
        super().__init__(**kw)
        self.limit = limit
        self.detailed = detailed
        self._state: Optional[ViewState] = None

    def on_resize(self) -> None:
        if self.detailed and self._state is not None:
            self.show(self._state)  # wrapped to the new width

    def show(self, state: ViewState) -> None:
        self._state = state
        if state.snapshot is None:
            set_content(self, Content.styled("waiting for the first snapshot…", "dim"))
            return
        if not state.findings:
            set_content(self, Content.styled("No findings.", "$success"))
            return
        width = self.content_size.width if self.is_mounted else 0
        rows: list[Content] = []
        for f in state.findings[: self.limit]:
            lead = badge(f) + " "
            if not self.detailed:
                rows.append(lead + printable(f.message))
                continue
            rows += hanging(lead, printable(f.message), width, MAX_LINES)
            rows += hanging(Content.styled(ADVICE_LEAD, "bold $accent"), Content.styled(printable(f.advice), "italic"),
                            width, MAX_LINES)
        if len(state.findings) > self.limit:
            rows.append(Content.styled(f"… {len(state.findings) - self.limit} more (6: Advisor)", "dim"))
        set_content(self, lines(*rows))
