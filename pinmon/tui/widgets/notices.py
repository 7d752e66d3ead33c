"""Notices from the collector (missing NVML, unreadable /proc) and from the app (source errors).

The bar is one line whatever comes in: the first notice, cut to the width, and "+N more (n)" where
there are others; ``n`` opens them all (``screens/notices.py``). A notice of two lines, or three notices,
would otherwise push every panel down and the last rows off an 80x24 screen.
"""
from __future__ import annotations

from typing import Optional, Sequence

from textual.content import Content
from textual.widgets import Static

from ...units import printable
from ..state import ViewState
from .base import NoLinks, View, set_content

MARK = ("! ", "bold $warning")


def notice_line(notices: Sequence[str], width: Optional[int]) -> Content:
    """One line: the first notice (printable, cut with "…" to leave room) and how many more."""
    first = printable(notices[0], 500)
    more = Content.styled(f"  +{len(notices) - 1} more (n)", "bold") if len(notices) > 1 else Content("")
    if width:
        room = max(1, width - 2 - more.cell_length)
        if len(first) > room:
            first = first[:max(0, room - 1)] + "…"
    return Content.assemble(MARK, first, more)


class NoticeBar(NoLinks, Static, View):
    hides_itself = True  # hidden while there is nothing to say, so the app must still feed it

    def __init__(self, **kw):
        super().__init__(**kw)
        self.notices: tuple[str, ...] = ()

    def show(self, state: ViewState) -> None:
        self.notices = state.notices
        self.display = bool(self.notices)
        if self.notices:
            set_content(self, notice_line(self.notices, self.content_size.width if self.is_mounted else None))

    def on_resize(self) -> None:
        if self.notices:
            set_content(self, notice_line(self.notices, self.content_size.width))

