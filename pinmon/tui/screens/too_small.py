"""What the app shows on a terminal smaller than it can draw in (``sizing.MIN_WIDTH`` x ``MIN_HEIGHT``):
the size it needs and the one it has, how to quit, and what prints a report instead. The app puts
it on top while the terminal is too small and takes it away once it is large enough again; while it
shows, only q (and Ctrl-Z) act."""
from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.screen import Screen

from ..view.sizing import MIN_HEIGHT, MIN_WIDTH
from ..widgets.base import TextBlock


def too_small_text(width: int, height: int) -> Content:
    return Content.assemble(("Terminal too small", "bold $warning"), f" ({width}x{height}).\n",
                            f"pinmon needs {MIN_WIDTH}x{MIN_HEIGHT} or more: enlarge it, or press ",
                            ("q", "bold"), " to quit.\n",
                            ("`pinmon check` prints a report without the app.", "dim"))


class TooSmallScreen(Screen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "app.quit", "Quit")]

    def __init__(self, width: int, height: int):
        super().__init__()
        self.shown_size = (width, height)

    def compose(self) -> ComposeResult:
        yield TextBlock(id="too-small-text")

    def show_size(self, width: int, height: int) -> None:
        self.shown_size = (width, height)
        if self.is_mounted:
            self.query_one("#too-small-text", TextBlock).set_text(too_small_text(width, height))

    def on_mount(self) -> None:
        self.show_size(*self.shown_size)
