"""Sparkline bars on an absolute scale (0 .. the link's rate), as Content, so an idle link looks idle.

Textual's Sparkline scales between the series' own min and max, which draws 10 MB/s of noise as
full-height bars and a steady 50 GB/s as a flat floor. Unknown samples (None) draw as blanks. The
bars are text in the GPU row's own Content rather than a widget of their own: a widget costs the
screen's compositor a render pass each refresh, and the row redraws every second.
"""
from __future__ import annotations

from typing import Optional, Sequence

from rich.segment import Segment
from textual.color import Color
from textual.content import Content
from textual.style import Style

BARS = "▁▂▃▄▅▆▇█"


Run = tuple[Optional[int], int]  # (bar level 0..7, or None for a blank; cells)


def spark_runs(samples: Sequence[Optional[float]], scale_max: Optional[float], width: int) -> list[Run]:
    """The newest ``width`` samples as runs of equal bars (height 0..7 of ``scale_max``, None for an
    unknown sample), newest at the right edge; blanks pad the left. One pass, no list per cell: it
    runs for every GPU every second.

    Without a scale (no link rate known) the bars scale to the series' peak, so the shape still reads.
    """
    if width <= 0:
        return []
    samples = tuple(samples)
    recent = samples[-width:]  # older ones scroll off
    scale = scale_max or max((v for v in samples if v is not None), default=0.0)
    cells = len(BARS)
    top = cells - 1
    runs: list[Run] = []
    level: Optional[int] = None
    count = width - len(recent)
    for v in recent:
        if v is None:
            new = None
        elif scale > 0:
            ratio = v / scale
            # As max(0, min(1, ratio)) would clamp it (a NaN ratio included: a full bar).
            new = top if ratio >= 1 or ratio != ratio else int(ratio * cells) if ratio > 0 else 0
        else:
            new = 0
        if new == level:
            count += 1
            continue
        if count:
            runs.append((level, count))
        level, count = new, 1
    if count:
        runs.append((level, count))
    return runs


def level_style(level: int, min_color: Color, max_color: Color) -> Style:
    """The colour of a bar of ``level``: blended from ``min_color`` (empty) to ``max_color`` (full)."""
    return Style(foreground=min_color.blend(max_color, level / (len(BARS) - 1)))


def runs_content(runs: Sequence[Run], min_color: Color, max_color: Color) -> Content:
    """The bars as Content: runs of equal bars are one span each (less to render every second)."""
    styles: dict[int, Style] = {}
    parts: list[str | tuple[str, Style]] = []
    for level, cells in runs:
        if level is None:
            parts.append(" " * cells)
            continue
        style = styles.get(level)
        if style is None:
            style = styles[level] = level_style(level, min_color, max_color)
        parts.append((BARS[level] * cells, style))
    return Content.assemble(*parts)


def spark_segments(runs: Sequence[Run], base: Style, min_color: Color, max_color: Color) -> list[Segment]:
    """The bars drawn straight to segments on ``base`` (the widget's visual style): the same cells
    and styles as rendering ``runs_content``, without Textual's per-span text layout, which costs
    more than the rest of a GPU row's update. (No per-cell offset meta: a mouse selection of the
    row renders the text instead.)"""
    rich: dict[Optional[int], object] = {None: base.rich_style}
    out = []
    for level, cells in runs:
        style = rich.get(level)
        if style is None:
            style = rich[level] = (base + level_style(level, min_color, max_color)).rich_style
        out.append(Segment(" " * cells if level is None else BARS[level] * cells, style))
    return out
