"""Sparkline bars on an absolute scale (0 .. the link's rate), as Content, so an idle link looks idle.

Textual's Sparkline scales between the series' own min and max, which draws 10 MB/s of noise as
full-height bars and a steady 50 GB/s as a flat floor. Unknown samples (None) draw as blanks. The
bars are text in the GPU row's own Content rather than a widget of their own: a widget costs the
screen's compositor a render pass each refresh, and the row redraws every second.
"""
from __future__ import annotations

from typing import Optional, Sequence

from textual.color import Color
from textual.content import Content
from textual.style import Style

BARS = "▁▂▃▄▅▆▇█"


def bar_levels(samples: Sequence[Optional[float]], scale_max: float, width: int) -> list[Optional[int]]:
    """Bar height 0..7 of the newest ``width`` samples, None for unknown; blanks pad the left."""
    if width <= 0:
        return []
    recent = list(samples)[-width:]  # newest at the right edge; older ones scroll off
    top = len(BARS) - 1
    levels: list[Optional[int]] = [None] * (width - len(recent))
    for v in recent:
        if v is None:
            levels.append(None)
        else:
            ratio = max(0.0, min(1.0, v / scale_max)) if scale_max > 0 else 0.0
            levels.append(min(top, int(ratio * len(BARS))))
    return levels


def spark_content(samples: Sequence[Optional[float]], scale_max: Optional[float], width: int,
                  min_color: Color, max_color: Color) -> Content:
    """``width`` cells of bars; the colour blends from ``min_color`` (empty) to ``max_color`` (full).

    Without a scale (no link rate known) the bars scale to the series' peak, so the shape still reads.
    """
    scale = scale_max or max((v for v in samples if v is not None), default=0.0)
    parts: list[str | tuple[str, Style]] = []
    styles: dict[int, Style] = {}
    run_level: Optional[int] = None
    run_len = 0
    # Runs of equal bars become one span: fewer spans, less to render every second.
    for level in bar_levels(samples, scale, width) + ["end"]:  # type: ignore[list-item]
        if level != run_level and run_len:
            if run_level is None:
                parts.append(" " * run_len)
            else:
                style = styles.get(run_level)
                if style is None:
                    blended = min_color.blend(max_color, run_level / (len(BARS) - 1))
                    style = styles[run_level] = Style(foreground=blended)
                parts.append((BARS[run_level] * run_len, style))
            run_len = 0
        run_level = level  # type: ignore[assignment]
        run_len += 1
    return Content.assemble(*parts)
