"""Every notice in full (``n``): the notice bar shows only the first."""
from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen

from ...units import printable
from ..widgets.notices import MARK
from ..widgets.wrap import HangingText


class NoticesScreen(ModalScreen[None]):
    """Every notice in full; the close keys sit in the border, always on screen."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,n,q", "dismiss", "Close")]

    def __init__(self, notices: Sequence[str]):
        super().__init__()
        self.notices = tuple(notices)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="notices-box") as box:
            box.border_title = f"notices ({len(self.notices)})"
            box.border_subtitle = "Esc / n / q: close"
            items = [(Content.styled(*MARK), printable(n, 2000)) for n in self.notices]
            yield HangingText(items or [Content.styled("no notices", "dim")], id="notices-text")
