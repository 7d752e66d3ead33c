"""A widget of text rows that redraws only the rows whose text changed.

At 1 Hz most of a panel repeats what is on screen: the memory panel's RAM line moves, its other
lines do not; a GPU row's bars move, its name and link do not. A ``Static`` renders its whole text
again on any change and marks all of itself for repaint, so the compositor redraws every line of
it (and of every container behind it). Here each row is rendered on its own and kept; a change
re-renders that row only and marks only its lines, so the screen update is those lines.

Each row wraps (or is cut, per the widget's ``text-wrap``) on its own, exactly as the same rows
joined with newlines would in a ``Static``: ``render()`` returns that joined text, which Textual
uses for the widget's size, and the tests for what it shows.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.content import Content
from textual.geometry import Region
from textual.strip import Strip
from textual.style import Style
from textual.visual import Visual
from textual.widget import Widget

from .base import FollowsHeight, NoLinks, lines

# Rich styles kept per widget (span style, column, line) before the cache starts again: enough for
# every span of a panel's lines, a bound for text whose spans move about.
LINE_STYLES_KEPT = 1024


class LineStyles:
    """The rich style of each span a widget's lines draw, with its text offset (the "offset" meta
    mouse selection reads), kept while the widget's base style stays: at 1 Hz the same spans
    come back at the same columns with other digits in them."""

    def __init__(self) -> None:
        self._base: Style | None = None
        self._parsed: dict[str | Style, Style | None] = {}
        self._rich: dict[tuple, RichStyle] = {}

    def get(self, base: Style, style: str | Style | None, x: int, y: int) -> RichStyle | None:
        if base is not self._base or len(self._rich) > LINE_STYLES_KEPT:
            self._base, self._parsed, self._rich = base, {}, {}
        key = (style, x, y)
        rich = self._rich.get(key)
        if rich is None:
            if style is None:
                combined = base
            else:
                parsed = self._parsed.get(style, False)
                if parsed is False:
                    parsed = self._parsed[style] = _parse(style)
                if parsed is None:
                    return None
                combined = base + parsed
            rich = self._rich[key] = combined.rich_style_with_offset(x, y)
        return rich


def _parse(style: str | Style) -> Style | None:
    """A span's style as Textual reads it; None for one only a widget can resolve (a component class)."""
    if isinstance(style, Style):
        return style
    if style.startswith("."):
        return None
    try:
        return Style.parse(style)
    except Exception:
        return None


def line_strip(row: Content, y: int, base: Style, styles: LineStyles) -> Strip | None:
    """One line of text drawn straight to segments: what Textual's text pipeline draws for a
    left-aligned line that fits (each span's style on the base, the offset of its first character
    for selection) without its wrapping, alignment and per-line set-up, which cost more than the
    rest of a panel's second. None where the row needs that pipeline: a tab, overlapping spans
    (Textual combines them), a style it cannot read here."""
    text = row.plain
    if "\t" in text or "\n" in text:
        return None
    segments: list[Segment] = []
    pos = 0
    for span in sorted(row.spans, key=lambda sp: sp.start):
        start, end = max(span.start, 0), min(span.end, len(text))
        if start < pos:
            return None  # overlapping spans: Textual stacks their styles
        if start >= end:
            continue
        if start > pos:
            segments.append(Segment(text[pos:start], styles.get(base, None, pos, y)))
        rich = styles.get(base, span.style, start, y)
        if rich is None:
            return None
        segments.append(Segment(text[start:end], rich))
        pos = end
    if pos < len(text) or not segments:
        segments.append(Segment(text[pos:], styles.get(base, None, pos, y)))
    return Strip(segments, row.cell_length)


def as_rows(content: Content | str) -> tuple[Content, ...]:
    """One Content per line of ``content``."""
    if not isinstance(content, Content):
        content = Content(content)
    return tuple(content.split("\n")) if "\n" in content.plain else (content,)


class RowsWidget(NoLinks, FollowsHeight, Widget):
    DEFAULT_CSS = """
    RowsWidget {
        height: auto;
    }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._rows: tuple[Content, ...] = ()
        self._joined: Content | None = Content("")  # None: not joined since the rows changed
        self._strips: list[list[Strip]] | None = None  # per row, its lines at _key
        self._key: tuple | None = None  # (width, visual style) the strips were rendered with
        self._flat: list[Strip] = []
        self._line_styles = LineStyles()

    @property
    def rows(self) -> tuple[Content, ...]:
        return self._rows

    def render(self) -> Content:
        # Joined on demand: Textual asks for it on a layout pass and a mouse selection, not on
        # the repaint of a changed row.
        if self._joined is None:
            self._joined = lines(*self._rows) if self._rows else Content("")
        return self._joined

    def set_rows(self, rows: Sequence[Content | str]) -> None:
        new = tuple(line for r in rows for line in as_rows(r))  # one row per line, whatever came in
        old = self._rows
        changed = ({i for i, (a, b) in enumerate(zip(old, new)) if not a.is_same(b)}
                   if len(new) == len(old) else None)
        if changed is not None and not changed:
            return  # the same text and styles: nothing to redraw
        self._rows = new
        self._joined = None
        strips, key = self._strips, self._key
        if changed is None or self._may_change_size(old, new):
            self._strips = None
            self._relayout()
            return
        if strips is None or key != self._render_key():
            # Nothing drawn yet, or at another width: draw it all (a row that may wrap may also
            # take another number of lines).
            self._strips = None
            if self._may_wrap([new[i] for i in changed]):
                self._relayout()
            else:
                self.refresh()
            return
        width = key[0]
        dirty: list[Region] = []
        start = 0
        for i, row in enumerate(new):
            count = len(strips[i])
            if i in changed:
                rendered = self._render_row(i, row, width)
                if len(rendered) != count:  # it wraps onto more or fewer lines: the height changes
                    self._strips = None
                    self._relayout()
                    return
                strips[i] = rendered
                if dirty and dirty[-1].bottom == start:  # adjacent rows: one region
                    dirty[-1] = Region(0, dirty[-1].y, width, dirty[-1].height + count)
                else:
                    dirty.append(Region(0, start, width, count))
            start += count
        self._flat = [s for row in strips for s in row]
        self.refresh(*dirty)

    def _relayout(self) -> None:
        """A layout pass for rows that may take another height (``FollowsHeight.ask_layout``)."""
        self.ask_layout()

    def drawn_lines(self) -> int | None:
        """The lines the rows take at the width drawn; None where not known yet."""
        if self._strips is not None and self._key is not None and self._key[0] == self.size.width:
            return len(self._flat)
        if getattr(self.styles, "text_wrap", "wrap") == "nowrap":
            return len(self._rows)  # one line each
        return None

    def _may_change_size(self, old: tuple[Content, ...], new: tuple[Content, ...]) -> bool:
        """Whether the new rows may need another size: a layout pass costs far more than a repaint.

        The row count sets the height (``set_rows`` checks it) and an auto width follows the widest
        row. A row that wraps onto another number of lines is found when it is rendered.
        """
        if not self.is_mounted:
            return True
        width = getattr(self.styles, "width", None)
        if width is not None and width.is_auto:
            return max((r.cell_length for r in old), default=0) != max((r.cell_length for r in new), default=0)
        return False

    def _may_wrap(self, rows: Sequence[Content]) -> bool:
        if not rows or getattr(self.styles, "text_wrap", "wrap") == "nowrap":
            return False  # rows that do not fit are cut, never wrapped
        room = self.content_region.width
        return room <= 0 or max(r.cell_length for r in rows) > room

    def _render_key(self) -> tuple:
        return self.size.width, self.visual_style

    def _render_row(self, index: int, row: Content, width: int) -> list[Strip]:
        # Each cell carries its (column, line) offset in the joined text, which mouse selection
        # reads: a row that fits on one line (or is cut, never wrapped) gets its line number put
        # in; a row that may wrap is rendered below ``index`` empty lines (one strip each,
        # dropped), so its later lines keep their columns.
        if row.cell_length <= width and self.styles.text_align in ("left", "start"):
            strip = line_strip(row, index, self.visual_style, self._line_styles)
            if strip is not None:
                return [strip]
        if not index:
            return Visual.to_strips(self, row, width, None, self.visual_style)
        if row.cell_length <= width or getattr(self.styles, "text_wrap", "wrap") == "nowrap":
            strips = Visual.to_strips(self, row, width, None, self.visual_style)
            if len(strips) == 1:
                return [strips[0].apply_offsets(0, index)]
        return Visual.to_strips(self, Content("\n" * index) + row, width, None, self.visual_style)[index:]

    def render_line(self, y: int) -> Strip:
        if self.text_selection is not None:
            # A mouse selection spans rows: the whole text, as Textual draws it.
            width, height = self.size
            strips = Visual.to_strips(self, self.render(), width, height, self.visual_style)
            return strips[y] if y < len(strips) else Strip.blank(width, self.visual_style.rich_style)
        key = self._render_key()
        if self._strips is None or key != self._key:
            # First draw, a new width, or new styles (theme, focus, a class): every row again.
            self._key = key
            self._strips = [self._render_row(i, r, key[0]) for i, r in enumerate(self._rows)]
            self._flat = [s for row in self._strips for s in row]
        if y < len(self._flat):
            return self._flat[y]
        return Strip.blank(key[0], self.visual_style.rich_style)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips = None  # colours come from the styles: render with the new ones
