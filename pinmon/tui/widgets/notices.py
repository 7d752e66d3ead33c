"""Notices from the collector (missing NVML, unreadable /proc) and from the app (source errors)."""
from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ..state import ViewState
from .base import View, lines, set_content


class NoticeBar(Static, View):
    hides_itself = True  # hidden while there is nothing to say, so the app must still feed it

    def show(self, state: ViewState) -> None:
        self.display = bool(state.notices)
        if state.notices:
            set_content(self, lines(*(Content.assemble(("! ", "bold $warning"), n) for n in state.notices)))
