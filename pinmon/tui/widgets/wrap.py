"""Text wrapped under its own start (a hanging indent) and cut to a number of lines.

Textual wraps a long line back to column 0, under a badge or an arrow; a finding's advice then reads
as a new item. Here the text after a lead ("  → ") wraps into the columns after the lead, and a text
longer than ``max_lines`` ends in "…" (the full text is one Enter away).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.content import Content

from .base import TextBlock, lines, set_content

ELLIPSIS = "…"
# Narrower than this the indent would leave a column of single words: the text wraps as it comes.
MIN_TEXT_CELLS = 12


def hanging(lead: Content | str, text: Content | str, width: int | None,
            max_lines: int | None = None) -> list[Content]:
    """``lead`` then ``text``, wrapped to ``width`` cells with every further line indented by the
    lead's width; at most ``max_lines`` lines, the last one ending in "…" when text was left out.
    ``width`` None or 0 (not laid out yet) or too narrow for the indent: one line, which the widget
    wraps or cuts as its CSS says."""
    lead = lead if isinstance(lead, Content) else Content(lead)
    text = text if isinstance(text, Content) else Content(text)
    indent = lead.cell_length
    if not width or width - indent < MIN_TEXT_CELLS:
        return [lead + text]
    room = width - indent
    wrapped = text.wrap(room) if text.plain else [Content("")]
    if max_lines is not None and len(wrapped) > max_lines:
        wrapped = wrapped[:max(1, max_lines)]
        last = wrapped[-1].rstrip()
        if last.cell_length + 1 > room:
            last = last.truncate(room - 1)
        wrapped[-1] = last + Content.styled(ELLIPSIS, "dim")
    pad = Content(" " * indent)
    return [lead + wrapped[0]] + [pad + line for line in wrapped[1:]]


class HangingText(TextBlock):
    """Lines, each either a ``Content`` shown as it is or a ``(lead, text)`` pair wrapped under its
    own start (``hanging``) at the width the widget gets, again on every resize and on new items."""

    def __init__(self, items: Sequence[Content | tuple[Content | str, Content | str]] = (), **kw: Any) -> None:
        super().__init__(**kw)
        self.items = tuple(items)

    def set_items(self, items: Sequence[Content | tuple[Content | str, Content | str]]) -> None:
        self.items = tuple(items)
        self._draw(self.content_size.width if self.is_mounted else None)

    def _draw(self, width: int | None) -> None:
        rows: list[Content] = []
        for item in self.items:
            rows += hanging(*item, width) if isinstance(item, tuple) else [item]
        set_content(self, lines(*rows))

    def on_mount(self) -> None:
        self._draw(self.content_size.width or None)

    def on_resize(self) -> None:
        self._draw(self.content_size.width)
