"""Notices from the collector (missing NVML, unreadable /proc) and from the app (source errors).

The bar is one line whatever comes in: the first notice, cut to the width, and "+N more (n)" where
there are others; ``n`` opens them all (``screens/notices.py``). A notice of two lines, or three notices,
would otherwise push every panel down and the last rows off an 80x24 screen.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.content import Content
from textual.widget import Widget

from ...units import printable
from ..view.state import ViewState
from .base import NoLinks, View

MARK = ("! ", "bold $warning")


def notice_line(notices: Sequence[str], width: int | None) -> Content:
    """One line: the first notice (printable, cut with "…" to leave room) and how many more."""
    first = printable(notices[0], 500)
    more = Content.styled(f"  +{len(notices) - 1} more (n)", "bold") if len(notices) > 1 else Content("")
    if width:
        room = max(1, width - 2 - more.cell_length)
        if len(first) > room:
            first = first[:max(0, room - 1)] + "…"
    return Content.assemble(MARK, first, more)


class NoticeBar(NoLinks, View, Widget):
    """Drawn at paint time, from the width it has then: a bar that was hidden has no width when
    the notices arrive, and the resize that follows may come after the first paint."""

    hides_itself = True  # hidden while there is nothing to say, so the app must still feed it

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.notices: tuple[str, ...] = ()

    def show(self, state: ViewState) -> None:
        if state.notices != self.notices:
            self.notices = state.notices
            self.refresh()
        self.display = bool(self.notices)

    def render(self) -> Content:
        if not self.notices:
            return Content("")
        return notice_line(self.notices, self.content_size.width or None)

