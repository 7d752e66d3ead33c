"""A compositor for the main screen that repaints only the widgets under what changed.

At 1 Hz the clock in the status line and the GPU rows change every second. Textual's compositor
repaints a partial update as one rectangle around all changed regions (row 0 to the GPU rows: the
tab bar and the notice line too), and within it every widget whose *clip* (its parent's area)
touches the rectangle, so panels far below it are drawn as well. Here each run of changed rows is
repainted on its own, and only widgets that show inside it are drawn. The terminal receives the
same bytes (tests/tui/test_compositor.py compares both on real screens); the main thread spends
about a third less on each refresh of an idle box.

It relies on private parts of Textual's ``Compositor``; ``supported()`` checks them and the app
falls back to Textual's own compositor where they differ.
"""
from __future__ import annotations

import inspect
from typing import Iterable, Optional

from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip


def _params(fn) -> list[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def supported() -> bool:
    """Whether this Textual's compositor has the parts ``RegionCompositor`` builds on."""
    return (_params(Compositor._render_chops) == ["self", "crop", "is_rendered_line"]
            and _params(Compositor._get_renders) == ["self", "crop"]
            and _params(Compositor.render_partial_update) == ["self"]
            and hasattr(Compositor, "_regions_to_spans")
            and _params(ChopsUpdate.__init__) == ["self", "chops", "spans", "chop_ends"]
            and all(hasattr(Compositor(), name) for name in ("_dirty_regions", "cuts", "size"))
            and isinstance(getattr(Compositor, "visible_widgets", None), property))


class RegionCompositor(Compositor):
    def _get_renders(self, crop: Optional[Region] = None) -> Iterable[tuple[Region, Region, list[Strip]]]:
        if crop is None:
            yield from super()._get_renders(crop)
            return
        overlaps = crop.overlaps
        top, bottom = crop.y, crop.bottom
        for widget, (region, clip) in self.visible_widgets.items():
            shown = region.intersection(clip)
            if not overlaps(shown):
                continue  # nothing of it inside the update: its lines would be thrown away
            # Only the rows inside the update, at full width (every cut of those rows gets a strip):
            # a container as tall as the screen is asked for a few lines, not all of them.
            x, y, width, height = shown
            y0, y1 = max(y, top), min(y + height, bottom)
            rows = Region(clip.x, y0, clip.width, y1 - y0)
            yield region, clip.intersection(rows), widget.render_lines(
                Region(x - region.x, y0 - region.y, width, y1 - y0))

    def render_partial_update(self) -> Optional[ChopsUpdate]:
        regions = self._dirty_regions.copy()
        self._dirty_regions.clear()
        screen = self.size.region
        bands: list[Region] = []  # runs of rows that changed, each repainted on its own
        for region in sorted((r.intersection(screen) for r in regions), key=lambda r: r.y):
            if not region.area:
                continue
            if bands and region.y <= bands[-1].bottom:
                bands[-1] = bands[-1].union(region)
            else:
                bands.append(region)
        if not bands:
            return None
        spans = list(self._regions_to_spans(regions))
        is_rendered_line = {y for y, _, _ in spans}.__contains__
        chops = self._render_chops(bands[0], is_rendered_line)
        for band in bands[1:]:
            part = self._render_chops(band, is_rendered_line)
            for y in range(band.y, band.bottom):
                chops[y] = part[y]  # type: ignore[index]
        return ChopsUpdate(chops, spans, [cut_set[1:] for cut_set in self.cuts])


def main_screen() -> Screen:
    """The app's first screen, with ``RegionCompositor`` where this Textual supports it."""
    screen = Screen(id="_default")
    if supported():
        screen._compositor = RegionCompositor()
    return screen
