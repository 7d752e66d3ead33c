"""The main screen's compositor sends the terminal the same bytes as Textual's own, for less work."""
from __future__ import annotations

import random
import types

import pytest
from textual._compositor import Compositor

from pinmon.tui import compositor as mod
from pinmon.tui.app import PinmonApp
from pinmon.tui.widgets.gpu_row import GpuRow
from pinmon.tui.widgets.header import StatusHeader
from pinmon.tui.widgets.memory import MemoryPanel

from .fakes import FakeSource, fake_advisor
from .util import StepClock


def test_this_textual_is_supported():
    # If this fails after a Textual upgrade the app still works (stock compositor), only slower.
    assert mod.supported()


def _app() -> PinmonApp:
    return PinmonApp(FakeSource(), fake_advisor, start_polling=False, probe_every_s=None, clock=StepClock())


class _Stock:
    """Within it, ``comp`` renders with Textual's own chops (every widget, none skipped)."""

    def __init__(self, comp):
        self.comp = comp

    def __enter__(self):
        self.comp._render_chops = types.MethodType(Compositor._render_chops, self.comp)
        return self.comp

    def __exit__(self, *exc):
        del self.comp._render_chops


async def _on_tab(app, pilot, tab: str) -> mod.RegionCompositor:
    """Thirty snapshots in, ``tab`` shown: the main screen's compositor."""
    for _ in range(30):
        app.apply_snapshot(app.source.snapshot())
    await pilot.press(tab)
    await pilot.pause()
    comp = app.screen._compositor
    assert isinstance(comp, mod.RegionCompositor)
    return comp


def _both(comp, regions, console) -> tuple[str, str]:
    comp._dirty_regions = set(regions)
    ours = comp.render_partial_update()
    comp._dirty_regions = set(regions)
    with _Stock(comp):
        stock = Compositor.render_partial_update(comp)
    return ours.render_segments(console), stock.render_segments(console)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("tab", ["1", "2", "3", "6"])
async def test_partial_updates_match_textuals(size, tab):
    app = _app()
    async with app.run_test(size=size) as pilot:
        comp = await _on_tab(app, pilot, tab)
        # What changes each second (clock, GPU rows, memory), then random sets of regions.
        widgets = [w for w in app.screen.query("*") if w.region.area]
        live = [w.region for w in widgets if isinstance(w, (StatusHeader, GpuRow, MemoryPanel))]
        cases = [live] if live else []
        rng = random.Random(7)
        width, height = size
        for _ in range(40):
            regions = []
            for _ in range(rng.randint(1, 5)):
                if rng.random() < 0.5:
                    regions.append(rng.choice(widgets).region)
                else:
                    x, y = rng.randrange(width), rng.randrange(height)
                    regions.append(app.screen.region.intersection(
                        type(app.screen.region)(x, y, rng.randint(1, width - x), rng.randint(1, height - y))))
            cases.append([r for r in regions if r.area])
        for regions in cases:
            if not regions:
                continue
            ours, stock = _both(comp, regions, app.console)
            assert ours == stock, regions


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("tab", ["1", "2", "3", "4", "5", "6"])
async def test_full_screens_match_textuals(size, tab):
    # A full update and a screenshot go through the same chops: covered widgets skipped there too.
    app = _app()
    async with app.run_test(size=size) as pilot:
        comp = await _on_tab(app, pilot, tab)
        ours = comp.render_strips()
        with _Stock(comp):
            stock = comp.render_strips()
        assert [list(s) for s in ours] == [list(s) for s in stock]


async def test_nothing_dirty_is_no_update():
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        comp = app.screen._compositor
        comp._dirty_regions = set()
        assert comp.render_partial_update() is None


def test_an_unknown_compositor_falls_back_to_textuals(monkeypatch):
    monkeypatch.setattr(mod, "supported", lambda: False)
    screen = mod.main_screen()
    assert type(screen._compositor) is Compositor
