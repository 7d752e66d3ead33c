"""RowsWidget draws what a Static of the same rows draws, after any sequence of updates, and an update
repaints only the rows that changed."""
from __future__ import annotations

import random

import pytest
from textual.app import App
from textual.content import Content
from textual.widgets import Static

from pinmon.tui.widgets.base import lines
from pinmon.tui.widgets.rows import RowsWidget
from tests.tui.textual_private import screen_strips

WORDS = ["RAM", "pinned", "12.5 GiB", "avail", "█████", "░░░", "est.", "of", "125.8 GiB", "effective RAM"]
STYLES = ["", "bold", "dim", "$success", "bold $error", "reverse $warning"]


def random_row(rng: random.Random) -> Content:
    parts = [(rng.choice(WORDS) + " ", rng.choice(STYLES)) for _ in range(rng.randint(0, 12))]
    return Content.assemble(*parts)


class Pair(App):
    CSS = """
    Screen { layout: horizontal; }
    RowsWidget, Static { width: 1fr; border: round $primary; padding: 0 1; }
    .nowrap { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, nowrap: bool):
        super().__init__()
        self.nowrap = nowrap

    def compose(self):
        cls = "nowrap" if self.nowrap else ""
        yield RowsWidget(classes=cls)
        yield Static(classes=cls)


def drawn(app, widget) -> list:
    strips = screen_strips(app)
    r = widget.region
    return [[(seg.text, seg.style) for seg in strips[y].crop(r.x, r.right).simplify()]
            for y in range(r.y, r.bottom)]


@pytest.mark.parametrize("nowrap", [False, True], ids=["wrap", "nowrap"])
async def test_updates_draw_what_a_static_draws(nowrap):
    rng = random.Random(3 if nowrap else 4)
    app = Pair(nowrap)
    async with app.run_test(size=(100, 30)) as pilot:
        ours, theirs = app.query_one(RowsWidget), app.query_one(Static)
        rows = [random_row(rng) for _ in range(4)]
        for step in range(60):
            if step % 10 == 9:
                rows = [random_row(rng) for _ in range(rng.randint(1, 6))]  # a new count of rows
            else:
                rows[rng.randrange(len(rows))] = random_row(rng)  # one row changes, as each second
            ours.set_rows(rows)
            theirs.update(lines(*rows))
            await pilot.pause()
            assert ours.region.height == theirs.region.height, step
            assert drawn(app, ours) == drawn(app, theirs), step
            assert ours.render().is_same(lines(*rows))


async def test_a_changed_row_marks_only_its_lines():
    app = Pair(nowrap=True)
    async with app.run_test(size=(100, 30)) as pilot:
        ours = app.query_one(RowsWidget)
        rows = [Content(f"row {i}") for i in range(5)]
        ours.set_rows(rows)
        await pilot.pause()
        ours.render_lines(ours.region.reset_offset)  # drawn: nothing is waiting
        layouts = []
        real = ours.refresh

        def spy(*regions, **kw):
            layouts.append((regions, kw.get("layout", False)))
            return real(*regions, **kw)

        ours.refresh = spy
        rows[3] = Content("row 3 changed")
        ours.set_rows(rows)
        ((regions, layout),) = layouts
        assert not layout and [(r.y, r.height) for r in regions] == [(3, 1)]
        layouts.clear()
        ours.set_rows(list(rows))  # the same rows again: nothing at all
        assert layouts == []


async def test_a_new_width_or_theme_draws_every_row_again():
    app = Pair(nowrap=False)
    async with app.run_test(size=(100, 30)) as pilot:
        ours, theirs = app.query_one(RowsWidget), app.query_one(Static)
        rows = [Content.assemble(("RAM ", "bold $success"), "x " * 30), Content("short")]
        ours.set_rows(rows)
        theirs.update(lines(*rows))
        await pilot.pause()
        for size in ((60, 30), (160, 30)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            assert drawn(app, ours) == drawn(app, theirs), size
        app.theme = "textual-light"
        await pilot.pause()
        assert drawn(app, ours) == drawn(app, theirs)


async def test_a_row_with_line_breaks_becomes_rows():
    app = Pair(nowrap=True)
    async with app.run_test(size=(100, 30)) as pilot:
        ours, theirs = app.query_one(RowsWidget), app.query_one(Static)
        text = Content.assemble(("a\nb", "bold"), "\nc")
        ours.set_rows([text, "d"])
        theirs.update(lines(text, Content("d")))
        await pilot.pause()
        assert [r.plain for r in ours.rows] == ["a", "b", "c", "d"]
        assert drawn(app, ours) == drawn(app, theirs)
