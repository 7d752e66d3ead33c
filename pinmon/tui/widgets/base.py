"""The one method every view implements, so the app can refresh them all the same way."""
from __future__ import annotations

from functools import partial
from typing import Optional

from textual.content import Content
from textual.reactive import Reactive

from ..state import ViewState
from ..textual_compat import ask_layout, drawn, needs_layout, remember_drawn


class View:
    """Mixin for widgets the app refreshes with each new ``ViewState``."""

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
        children = self.children  # type: ignore[attr-defined]
        if self.is_mounted and children and all(child.is_mounted for child in children):  # type: ignore[attr-defined]
            self._pending = None
            self.draw(state)
        else:
            first = self._pending is None
            self._pending = state
            if first:
                self.call_after_refresh(self._draw_pending)  # type: ignore[attr-defined]

    def _draw_pending(self) -> None:
        if self._pending is not None:
            self.show(self._pending)

    def draw(self, state: ViewState) -> None:  # pragma: no cover - interface
        raise NotImplementedError


def _shape(content) -> tuple[int, int]:
    text = content.plain if isinstance(content, Content) else str(content)
    rows = text.split("\n")
    return len(rows), max(len(r) for r in rows)


def set_content(widget, content: Content | str) -> None:
    """``Static.update`` only when the text or its styles changed, and a layout pass only when the
    widget's size could change with it (``textual_compat.needs_layout``): most of a 1 s refresh repeats what is
    on screen, and most of the rest is new numbers in lines of the same count.

    A ``str`` is plain text, never markup: a "[cuda12]" in a message is shown, not swallowed."""
    if not isinstance(content, Content):
        content = Content(content)
    key = (content.plain, tuple(content.spans))
    last = drawn(widget)
    if last is not None and last[0] == key:
        return
    shape = _shape(content)
    remember_drawn(widget, key, shape)
    layout = last is None or needs_layout(widget, last[1], shape)
    widget.update(content, layout=layout)
    if layout and widget.is_mounted:
        ask_layout(widget, partial(_content_lines, widget))


def _content_lines(widget) -> Optional[int]:
    """The lines the widget's text takes at its width now; None before it has one."""
    width = widget.content_size.width
    if not width:
        return None
    return widget.get_content_height(widget.size, widget.app.size, width)


def follow_popup(popup, *update_args):
    """Hand the view's new figures to its open pop-up (``popup.update(*update_args)``); returns the
    pop-up while it is open, None once it has been closed (the view then forgets it)."""
    if popup is None or popup not in popup.app.screen_stack:
        return None
    popup.update(*update_args)
    return popup


def cursor_row_key(table) -> Optional[str]:
    """The key of the DataTable row under the cursor; None without rows or with the cursor outside."""
    if not table.row_count:
        return None
    try:
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    except Exception:  # cursor outside the rows
        return None


def refill_rows(table, rows) -> None:
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
