"""Sparkline bars on an absolute scale (0 .. the link's rate), as Content, so an idle link looks idle.

Textual's Sparkline scales between the series' own min and max, which draws 10 MB/s of noise as
full-height bars and a steady 50 GB/s as a flat floor. Unknown samples (None) draw as blanks. The
bars are text in the GPU row's own Content rather than a widget of their own: a widget costs the
screen's compositor a render pass each refresh, and the row redraws every second.
"""
from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.color import Color
from textual.content import Content
from textual.style import Style

BARS = "▁▂▃▄▅▆▇█"


Run = tuple[int | None, int]  # (bar level 0..7, or None for a blank; cells)


def spark_runs(samples: Sequence[float | None], scale_max: float | None, width: int) -> list[Run]:
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
    level: int | None = None
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
    blank = base.rich_style
    rich: dict[int, RichStyle] = {}
    out: list[Segment] = []
    for level, cells in runs:
        if level is None:
            out.append(Segment(" " * cells, blank))
            continue
        style = rich.get(level)
        if style is None:
            style = rich[level] = (base + level_style(level, min_color, max_color)).rich_style
        out.append(Segment(BARS[level] * cells, style))
    return out


def graph_levels(values: Sequence[float | None], scale_max: float | None, height: int) -> tuple[int | None, ...]:
    """Per column of a bar graph ``height`` rows tall, the eighths of a row it fills (0 ..
    ``8 * height``) at ``value / scale_max``, None for an unknown value. Without a scale the graph
    scales to the values' peak, as ``spark_runs`` does."""
    eighths_max = 8 * max(1, height)
    scale = scale_max or max((v for v in values if v is not None), default=0.0)
    levels: list[int | None] = []
    for v in values:
        if v is None:
            levels.append(None)
        elif scale > 0:
            ratio = v / scale
            levels.append(eighths_max if ratio >= 1 or ratio != ratio else int(ratio * eighths_max) if ratio > 0 else 0)
        else:
            levels.append(0)
    return tuple(levels)


def level_runs(levels: Sequence[int | None], height: int) -> list[list[Run]]:
    """The graph of ``graph_levels`` as runs per row, the top row first. A known level too small for
    one eighth draws the bottom row's lowest bar (an idle link looks idle, not absent), an unknown
    one blanks in every row."""
    height = max(1, height)
    rows: list[list[Run]] = []
    top = max((e for e in levels if e is not None), default=0)
    for r in range(height - 1, -1, -1):  # r: rows above the bottom one
        if r and top <= 8 * r:
            rows.append([(None, len(levels))] if levels else [])  # above every bar: blank
            continue
        runs: list[Run] = []
        level: int | None = None
        count = 0
        for e in levels:
            if e is None:
                new = None
            else:
                fill = min(8, e - 8 * r)
                new = fill - 1 if fill > 0 else (0 if r == 0 else None)
            if new == level:
                count += 1
                continue
            if count:
                runs.append((level, count))
            level, count = new, 1
        if count:
            runs.append((level, count))
        rows.append(runs)
    return rows


def graph_runs(values: Sequence[float | None], scale_max: float | None, height: int) -> list[list[Run]]:
    """A bar graph ``height`` rows tall of ``values`` (one column each, 0 .. ``scale_max``), as runs
    per row, the top row first (``graph_levels``, then ``level_runs``)."""
    return level_runs(graph_levels(values, scale_max, height), height)


def axis_text(span_s: float, middle: str, cells: int) -> str:
    """A graph's time axis, ``cells`` wide: "└ 5 min ago", ``middle`` where it fits, "now ┘"."""
    from ...units import fmt_seconds

    left, right = f"└ {fmt_seconds(span_s, 0)} ago", "now ┘"
    gap = cells - len(left) - len(right)
    if gap < len(middle) + 2:
        return (left + " " * max(1, gap) + right)[:cells]
    pad = gap - len(middle)
    return left + " " * (pad // 2) + middle + " " * (pad - pad // 2) + right
