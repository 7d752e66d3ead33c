"""What the views share: the one method every view implements (``show``), so the app refreshes them
all the same way; pinmon's text widget that draws only new text (``TextBlock``); the layout pass
for a widget whose height may change (``FollowsHeight``); and the pop-up and table helpers.

pinmon's state lives in pinmon's own subclasses (fields set in their ``__init__``), never in names
set on Textual's objects, and only Textual's public API is used here."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from textual.app import App
from textual.content import Content
from textual.reactive import Reactive
from textual.widget import Widget
from textual.widgets import DataTable, Static

from ..view.state import ViewState

if TYPE_CHECKING:
    # The mixins below go into Textual widgets only: the type checker reads them as widgets, so what
    # they use of one is checked. At run time they stay plain classes: Textual takes a widget's CSS
    # type names and default CSS from its first Textual base, which they must not become.
    WidgetMixin = Widget
else:
    WidgetMixin = object


class View(WidgetMixin):
    """Mixin for widgets the app refreshes with each new ``ViewState``."""

    # A view hidden while it has nothing to say (the notice bar): the app feeds it while hidden too.
    hides_itself = False

    def show(self, state: ViewState) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class NoLinks:
    """Mixin (first among the bases) for widgets whose text holds no links: Textual looks for
    links to highlight in every line it renders (``auto_links``), a third of the cost of rendering
    a short line, and the panels redraw lines every second."""

    auto_links = Reactive(False)


class CompositeView(View):
    """A view with children of its own: a state that comes before they are mounted waits for them."""

    _pending: ViewState | None = None

    def show(self, state: ViewState) -> None:
        children = self.children
        if self.is_mounted and children and all(child.is_mounted for child in children):
            self._pending = None
            self.draw(state)
        else:
            first = self._pending is None
            self._pending = state
            if first:
                self.call_after_refresh(self._draw_pending)

    def _draw_pending(self) -> None:
        if self._pending is not None:
            self.show(self._pending)

    def draw(self, state: ViewState) -> None:  # pragma: no cover - interface
        raise NotImplementedError


def _shape(content: Content | str) -> tuple[int, int]:
    text = content.plain if isinstance(content, Content) else str(content)
    rows = text.split("\n")
    return len(rows), max(len(r) for r in rows)


# Looks at a widget's height after a layout was asked for, each after a refresh.
HEIGHT_CHECKS = 3


class FollowsHeight(WidgetMixin):
    """Mixin (before the Textual widget among the bases) for pinmon's widgets whose new text may take
    another height. ``ask_layout`` clears the content height Textual caches per width
    (``clear_cached_dimensions``) and asks for a layout pass, then looks at the height after the next
    refreshes and asks again where it differs from the lines drawn: a layout asked for while the
    screen's own one is pending (at start-up in a real terminal, as the breakpoint class arrives) was
    seen to be lost. Wrong here means a stale size for a refresh, never a wrong text."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._height_checks_left = 0

    def drawn_lines(self) -> int | None:  # pragma: no cover - interface
        """The lines the widget draws at its width now; None while not known."""
        raise NotImplementedError

    def ask_layout(self) -> None:
        self.clear_cached_dimensions()
        self.refresh(layout=True)
        self._height_checks_left = HEIGHT_CHECKS
        self.call_after_refresh(self._check_height)

    def _check_height(self) -> None:
        if self._height_checks_left <= 0 or not self.is_mounted:
            return
        self._height_checks_left -= 1
        height = self.styles.height
        if height is not None and not height.is_auto:
            return  # a set height: the content does not size it
        count = self.drawn_lines()
        if count is None:
            self.call_after_refresh(self._check_height)  # not drawn yet
        elif self.content_size.height != count:
            self.clear_cached_dimensions()
            self.refresh(layout=True)
            self.call_after_refresh(self._check_height)


def needs_layout(widget: Widget, old: tuple[int, int], new: tuple[int, int]) -> bool:
    """Whether new text of shape ``new`` (lines, widest line) could change a ``Static``'s size
    (``old``: the last one).

    A layout pass costs far more than a repaint (the whole screen is arranged again), and at 1 Hz
    most new text is the same lines with other numbers in them. Only an auto width follows the
    widest line; an auto height follows the line count, and also the widest line where a line
    longer than the widget wraps onto a row of its own.
    """
    if old[0] != new[0]:
        return True
    if old[1] == new[1]:
        return False
    width = getattr(widget.styles, "width", None)  # None: not set, the widget fills its parent
    if width is not None and width.is_auto:
        return True
    if getattr(widget.styles, "text_wrap", "wrap") == "nowrap":
        return False  # long lines are cut (ellipsis), never wrapped onto more rows
    room = widget.content_region.width
    return room <= 0 or max(old[1], new[1]) > room


class TextBlock(FollowsHeight, Static):
    """A ``Static`` that remembers the text it was last given: ``set_text`` updates it only when the
    text or its styles changed, and asks for a layout pass only when its size could change with it
    (``needs_layout``): most of a 1 s refresh repeats what is on screen, and most of the rest is new
    numbers in lines of the same count."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._text_key: tuple | None = None
        self._text_shape: tuple[int, int] | None = None

    def set_text(self, content: Content | str) -> None:
        """A ``str`` is plain text, never markup: a "[cuda12]" in a message is shown, not swallowed."""
        if not isinstance(content, Content):
            content = Content(content)
        key = (content.plain, tuple(content.spans))
        if key == self._text_key:
            return
        last = self._text_shape
        shape = _shape(content)
        self._text_key, self._text_shape = key, shape
        layout = last is None or needs_layout(self, last, shape)
        self.update(content, layout=layout)
        if layout and self.is_mounted:
            self.ask_layout()

    def drawn_lines(self) -> int | None:
        width = self.content_size.width
        if not width:
            return None
        return self.get_content_height(self.size, self.app.size, width)


def set_content(widget: TextBlock, content: Content | str) -> None:
    """``widget.set_text(content)``: new text for a ``TextBlock``, drawn only where it changed."""
    widget.set_text(content)


class Popup(Protocol):
    """A pop-up a view keeps up to date: a screen with ``update`` (its own arguments)."""

    @property
    def app(self) -> App[Any]: ...

    def update(self, *args: Any, **kw: Any) -> None: ...


PopupT = TypeVar("PopupT", bound=Popup)


def follow_popup(popup: PopupT | None, *update_args: object) -> PopupT | None:
    """Hand the view's new figures to its open pop-up (``popup.update(*update_args)``); returns the
    pop-up while it is open, None once it has been closed (the view then forgets it)."""
    if popup is None or popup not in popup.app.screen_stack:
        return None
    popup.update(*update_args)
    return popup


def cursor_row_key(table: DataTable[Any]) -> str | None:
    """The key of the DataTable row under the cursor; None without rows or with the cursor outside."""
    if not table.row_count:
        return None
    try:
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    except Exception:  # cursor outside the rows
        return None


def refill_rows(table: DataTable[Any], rows: Iterable[tuple[str, Sequence[object]]]) -> None:
    """The DataTable's rows replaced by ``rows`` ((key, cells) pairs), the cursor staying on the row
    of the same key where that row is still there."""
    keep = cursor_row_key(table)
    table.clear()
    for key, cells in rows:
        table.add_row(*cells, key=key)
    if keep is not None:
        try:
            table.move_cursor(row=table.get_row_index(keep), animate=False)
        except Exception:  # that row is gone
            pass


def lines(*rows: Content | str) -> Content:
    return Content("\n").join(r if isinstance(r, Content) else Content(r) for r in rows)
