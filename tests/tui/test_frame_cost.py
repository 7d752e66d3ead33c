"""What one second's screen update renders on an idle box: few widgets, and containers for nothing.

Textual repaints a partial update as one rectangle around the changed lines (the clock on the status
line under the tab strip, a GPU's rates, the RAM line) and, within it, every line of every widget whose parent
touches it: the screen, the tabs and the grids around the panels, 48 lines each. The containers
that only arrange others are ``BLANK`` (``layout.py``), so Textual draws them as plain background
without rendering them; the screenshots (test_snapshots.py) show they look the same.
"""
from __future__ import annotations

import dataclasses

import pytest
from textual.widget import Widget

from pinmon.tui import textual_compat
from tests.tui.textual_private import count_renders

from .fakes import fed_app, make_snapshot

WIDE = (160, 48)
# Textual releases before the switch ignore it (and draw the containers as before).
HONOURS_BLANK = textual_compat.HONOURS_BLANK


def idle(i: int):
    """make_snapshot(i) as an idle box: the clock moves, the link carries a few MB/s of noise."""
    s = make_snapshot(i)
    gpus = tuple(dataclasses.replace(g, pcie=dataclasses.replace(g.pcie, rx_bytes_per_s=1e6 + i * 1e5,
                                                                  tx_bytes_per_s=2e6 - i * 1e5))
                 for g in s.gpus)
    return dataclasses.replace(s, gpus=gpus, processes=())


def _has_border(widget: Widget) -> bool:
    return any(edge[0] not in ("", "none", "hidden") for edge in widget.styles.border)


async def test_blank_containers_have_no_border_title_or_text_of_their_own():
    app = fed_app()
    for size in (WIDE, (80, 24)):
        async with app.run_test(size=size) as pilot:
            app.apply_snapshot(idle(0))
            await pilot.pause()
            blank = [w for w in app.screen.query("*") if getattr(w, "BLANK", False)] + [app.screen]
            assert len(blank) >= 6
            for w in blank:
                assert w.BLANK and not _has_border(w) and not w.border_title, w
                assert w.is_container or w is app.screen, w
        app = fed_app()


@pytest.mark.skipif(not HONOURS_BLANK, reason="this Textual has no BLANK widgets")
async def test_an_idle_second_renders_no_container_that_draws_nothing(monkeypatch):
    app = fed_app()
    async with app.run_test(size=WIDE) as pilot:
        for i in range(5):
            app.apply_snapshot(idle(i))
        rendered = count_renders(monkeypatch)
        for _ in range(50):  # until the start-up repaints are over: a quiet tenth of a second
            rendered.clear()
            await pilot.pause(0.1)
            if not rendered:
                break
        app.apply_snapshot(idle(5))
        await pilot.pause(0.1)
    drawn = {w for w in rendered if not w.BLANK}
    names = sorted(type(w).__name__ for w in drawn)
    ids = {w.id for w in drawn}
    # The panels under the changed rows, each in a slot of its own (layout.Slot), and the footer in
    # its own: their parents no longer meet the changed rows, so they are not drawn again.
    assert not {"ov-findings", "ov-probe"} & ids, names
    assert not {"TopFindings", "ProbeSummary", "Footer", "FooterKey"} & set(names), names
    # The panels the update touches (two GPU rows with their graphs' rate lines, the memory
    # panel) with their bordered boxes and the status line; no screen, tab,
    # pane or grid, and none of the strip's own widgets (its tabs, their row, the underline): the
    # status line sits under the strip, so the changed rows no longer span it.
    assert not {"MainScreen", "MainTabs", "Pane", "Grid", "Column", "BareGpuList"} & set(names), names
    assert not {"ContentTab", "Underline"} & set(names), names
    # The strip's own box and the panes' switcher hold others only: drawn as background too.
    assert not {"ContentTabs", "ContentSwitcher"} & set(names), names
    assert len(drawn) <= 7, names
    # The panels' text holds no links: Textual's search for them costs a third of a short line.
    ours = [w for w in drawn if type(w).__module__.startswith("pinmon.")]
    assert ours and not [w for w in ours if w.auto_links]


async def test_the_status_line_and_notices_sit_between_the_tab_strip_and_the_panes():
    from textual.widgets.tabbed_content import ContentTabs

    from pinmon.tui.widgets.header import StatusHeader
    from pinmon.tui.widgets.notices import NoticeBar

    for size in (WIDE, (80, 24)):
        app = fed_app()
        async with app.run_test(size=size) as pilot:
            app.apply_snapshot(idle(0))
            await pilot.pause()
            strip, status = app.query_one(ContentTabs), app.query_one(StatusHeader)
            assert status.region.y == strip.region.bottom
            assert app.query_one("#overview").region.y == status.region.bottom  # no notice: no line
            assert app.query_one(NoticeBar).parent is status.parent


async def test_without_a_tab_strip_in_the_compose_the_two_lines_still_come(monkeypatch):
    """Should a Textual's TabbedContent compose its strip otherwise (none found among what it
    yields), the lines follow the panes, and are still drawn."""
    from pinmon.tui import layout
    from pinmon.tui.widgets.header import StatusHeader

    monkeypatch.setattr(layout, "CONTENT_TABS", type("NotYielded", (), {}))
    app = fed_app()
    async with app.run_test(size=WIDE) as pilot:
        app.apply_snapshot(idle(0))
        await pilot.pause()
        status = app.query_one(StatusHeader)
        assert status.region.height == 1 and status.region.y > app.query_one("#overview").region.y
        assert "LIVE" in status.render().plain
