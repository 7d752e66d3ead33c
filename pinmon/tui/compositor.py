"""A compositor for the main screen that repaints only the widgets under what changed.

At 1 Hz the clock in the status line and the GPU rows change every second. Textual's compositor
repaints a partial update as one rectangle around all changed regions (row 0 to the GPU rows: the
tab bar and the notice line too), and within it every widget whose *clip* (its parent's area)
touches the rectangle, so panels far below it are drawn as well. Here each run of changed rows is
repainted on its own, and only widgets that show inside it are drawn, less those wholly covered
there by widgets in front of them (a scroll view its panel fills). The terminal receives the
same bytes (tests/tui/test_compositor.py compares both on real screens); the main thread spends
about a third less on each refresh of an idle box.

It relies on private parts of Textual's ``Compositor``; ``supported()`` checks them and the app
falls back to Textual's own compositor where they differ.
"""
from __future__ import annotations

import inspect
from typing import Callable, Iterable, Optional

from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.screen import Screen
from textual.widget import Widget


def _params(fn) -> list[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def supported() -> bool:
    """Whether this Textual's compositor has the parts ``RegionCompositor`` builds on."""
    return (_params(Compositor._render_chops) == ["self", "crop", "is_rendered_line"]
            and _params(Compositor.render_partial_update) == ["self"]
            and hasattr(Compositor, "_regions_to_spans")
            and _params(ChopsUpdate.__init__) == ["self", "chops", "spans", "chop_ends"]
            and all(hasattr(Compositor(), name) for name in ("_dirty_regions", "cuts", "size"))
            and isinstance(getattr(Compositor, "visible_widgets", None), property))


class RegionCompositor(Compositor):
    def _band_renders(self, crop: Region) -> Iterable[tuple[Widget, Region, Region]]:
        """Each widget that shows inside ``crop``, front to back: (widget, where its rows of the
        band land on screen, the crop of itself to render)."""
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
            yield widget, region.intersection(clip.intersection(rows)), Region(
                x - region.x, y0 - region.y, width, y1 - y0)

    def _render_chops(self, crop: Region, is_rendered_line: Callable[[int], bool]) -> list[dict]:
        """Textual's chops of ``crop``, without rendering what would be thrown away.

        Widgets are painted front to back and the first strip for a cut wins, so a container whose
        every cut in the band already holds a strip from the widgets in front of it (a scroll view
        filled by its panel, say) would be rendered only to be discarded: it is not rendered.
        """
        cuts = self.cuts
        chops: list[dict] = [dict.fromkeys(cut_set[:-1]) for cut_set in cuts]
        for widget, on_screen, own_crop in self._band_renders(crop):
            first_cut, last_cut = on_screen.column_span
            lines = [y for y in on_screen.line_range if is_rendered_line(y)]
            if all(chops[y].get(cut) is not None
                   for y in lines for cut in cuts[y] if first_cut <= cut < last_cut):
                continue  # covered: every strip of it would lose to one already placed
            x = on_screen.x
            for y, strip in zip(on_screen.line_range, widget.render_lines(own_crop)):
                if not is_rendered_line(y):
                    continue
                line = chops[y]
                final_cuts = [cut for cut in cuts[y] if last_cut >= cut >= first_cut]
                for cut, piece in zip(final_cuts, strip.divide([cut - x for cut in final_cuts[1:]])):
                    if line.get(cut) is None:
                        line[cut] = piece
        return chops

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
