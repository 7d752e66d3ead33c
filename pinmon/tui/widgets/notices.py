"""Notices from the collector (missing NVML, unreadable /proc) and from the app (source errors).

The bar is one line whatever comes in: the first notice, cut to the width, and "+N more (n)" where
there are others; ``n`` opens them all (``NoticesScreen``). A notice of two lines, or three notices,
would otherwise push every panel down and the last rows off an 80x24 screen.
"""
from __future__ import annotations

from typing import Optional, Sequence

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widget import Widget

from ...units import printable
from ..state import ViewState
from .base import View
from .wrap import HangingText

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


class NoticeBar(Widget, View):
    """Drawn at paint time, from the width it has then: a bar that was hidden has no width when
    the notices arrive, and the resize that follows may come after the first paint."""

    hides_itself = True  # hidden while there is nothing to say, so the app must still feed it

    def __init__(self, **kw):
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


class NoticesScreen(ModalScreen[None]):
    """Every notice in full; the close keys sit in the border, always on screen."""

    BINDINGS = [Binding("escape,n,q", "dismiss", "Close")]

    def __init__(self, notices: Sequence[str]):
        super().__init__()
        self.notices = tuple(notices)

    def compose(self):
        with VerticalScroll(id="notices-box") as box:
            box.border_title = f"notices ({len(self.notices)})"
            box.border_subtitle = "Esc / n / q: close"
            items = [(Content.styled(*MARK), printable(n, 2000)) for n in self.notices]
            yield HangingText(items or [Content.styled("no notices", "dim")], id="notices-text")
