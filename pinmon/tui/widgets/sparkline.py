"""A Sparkline on an absolute scale (0 .. the link's rate), so an idle link looks idle.

Textual's Sparkline scales between the series' own min and max, which draws 10 MB/s of noise as
full-height bars and a steady 50 GB/s as a flat floor. Unknown samples (None) draw as blanks.
"""
from __future__ import annotations

from typing import Optional, Sequence

from rich.segment import Segment
from rich.style import Style
from textual.widgets import Sparkline

BARS = "▁▂▃▄▅▆▇█"


class _AbsoluteBars:
    def __init__(self, samples: Sequence[Optional[float]], scale_max: float, width: int,
                 min_color, max_color):
        self.samples, self.scale_max, self.width = samples, scale_max, width
        self.min_color, self.max_color = min_color, max_color

    def __rich_console__(self, console, options):
        width = self.width or options.max_width
        samples = list(self.samples)[-width:]  # newest at the right edge; older ones scroll off
        pad = width - len(samples)
        top = len(BARS) - 1
        # One colour per bar height (blended from min to max colour), built once per render, and
        # runs of equal bars joined into one segment: the sparklines redraw every second.
        styles: dict[int, Style] = {}
        run_level, run_len = None, pad  # level None: blanks (padding and unknown samples)
        for v in samples:
            if v is None:
                level = None
            else:
                ratio = max(0.0, min(1.0, v / self.scale_max)) if self.scale_max > 0 else 0.0
                level = min(top, int(ratio * len(BARS)))
            if level != run_level and run_len:
                yield self._segment(run_level, run_len, styles)
                run_len = 0
            run_level = level
            run_len += 1
        if run_len:
            yield self._segment(run_level, run_len, styles)

    def _segment(self, level: Optional[int], n: int, styles: dict[int, Style]) -> Segment:
        if level is None:
            return Segment(" " * n)
        style = styles.get(level)
        if style is None:
            color = self.min_color.blend(self.max_color, level / (len(BARS) - 1)).rich_color
            style = styles[level] = Style.from_color(color)
        return Segment(BARS[level] * n, style)


class RateSparkline(Sparkline):
    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__([], id=id, classes=classes)
        self.samples: tuple[Optional[float], ...] = ()
        self.scale_max: float = 0.0

    def set_samples(self, samples: Sequence[Optional[float]], scale_max: Optional[float]) -> None:
        samples = tuple(samples)
        # Without a link rate, scale to the series' peak so the shape still reads.
        peak = max((v for v in samples if v is not None), default=0.0)
        scale = scale_max or peak
        if samples != self.samples or scale != self.scale_max:
            self.samples, self.scale_max = samples, scale
            self.refresh()

    def render(self):
        _, base = self.background_colors
        min_color = base + self.get_component_styles("sparkline--min-color").color
        max_color = base + self.get_component_styles("sparkline--max-color").color
        return _AbsoluteBars(self.samples, self.scale_max, self.size.width,
                             min_color, max_color)
