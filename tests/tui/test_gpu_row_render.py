"""A GPU row's bars drawn straight to segments look exactly as the same row rendered by Textual."""
from __future__ import annotations

import dataclasses
import os
import random

import pytest
from textual.app import App

from pinmon.advise.thresholds import Thresholds
from pinmon.tui import app as app_module
from pinmon.tui.app import PinmonApp
from pinmon.tui.widgets.gpu_row import RATE_CELLS, GpuRow
from pinmon.tui.widgets.rows import RowsWidget

from .fakes import make_snapshot


class OneRow(App):
    # The app's own styles: the bars' colours, focus, selection.
    CSS_PATH = os.path.join(os.path.dirname(app_module.__file__), PinmonApp.CSS_PATH)
    CSS = """
    GpuRow { width: 1fr; }
    """

    def compose(self):
        yield GpuRow(0)


def cells(strips) -> list:
    """(character, style) per cell, the style as its definition (colours and attributes): what the
    terminal shows, without the offset meta Textual adds for mouse selection."""
    return [[(ch, str(seg.style)) for seg in strip for ch in seg.text] for strip in strips]


def random_series(rng: random.Random, n: int, scale: float) -> tuple:
    out = []
    for _ in range(n):
        r = rng.random()
        out.append(None if r < 0.1 else 0.0 if r < 0.2 else rng.uniform(0, scale * 1.2))
    return tuple(out)


@pytest.mark.parametrize("width", [80, 133, 200])
async def test_bars_rows_match_textuals_render(width):
    rng = random.Random(width)
    app = OneRow()
    async with app.run_test(size=(width, 10)) as pilot:
        row = app.query_one(GpuRow)
        base = make_snapshot(0).gpus
        checked = 0
        for step in range(40):
            gpu = base[step % 2]
            if step % 7 == 3:  # no link rate known: the bars scale to the series' peak
                gpu = dataclasses.replace(gpu, link=dataclasses.replace(
                    gpu.link, theoretical_bytes_per_s=None, max_theoretical_bytes_per_s=None))
            n = rng.randint(0, 200)
            row.set_gpu(gpu, random_series(rng, n, 63e9), random_series(rng, n, 63e9), step % 5 == 0, Thresholds())
            if step % 11 == 10:
                app.theme = rng.choice(["textual-dark", "textual-light", "nord", "gruvbox"])
            await pilot.pause()
            w = row.size.width
            for i, content in enumerate(row.rows):
                fast = row._render_row(i, content, w)
                textual = RowsWidget._render_row(row, i, content, w)
                assert cells(fast) == cells(textual), (step, i)
                checked += i in row._bar_rows
        assert checked == 80  # both bars rows of every update took the fast path


async def test_a_row_built_for_another_width_renders_the_usual_way():
    app = OneRow()
    async with app.run_test(size=(100, 10)) as pilot:
        row = app.query_one(GpuRow)
        row.set_gpu(make_snapshot(0).gpus[0], (1e9,) * 90, (2e9,) * 90, False, Thresholds())
        await pilot.pause()
        content = row.rows[1]
        for w in (RATE_CELLS - 5, 60, 140):  # not the width the bars were cut for
            assert cells(row._render_row(1, content, w)) == cells(RowsWidget._render_row(row, 1, content, w))


def reference_runs(samples, scale_max, width):
    """The bars as first written: a level per cell, clamped, then grouped."""
    scale = scale_max or max((v for v in samples if v is not None), default=0.0)
    recent = list(samples)[-width:] if width > 0 else []
    levels = [None] * (max(0, width) - len(recent))
    for v in recent:
        ratio = max(0.0, min(1.0, v / scale)) if v is not None and scale > 0 else 0.0
        levels.append(None if v is None else min(7, int(ratio * 8)))
    runs = []
    for level in levels:
        if runs and runs[-1][0] == level:
            runs[-1] = (level, runs[-1][1] + 1)
        else:
            runs.append((level, 1))
    return runs


def test_spark_runs_match_the_per_cell_levels():
    from pinmon.tui.widgets.sparkline import spark_runs

    rng = random.Random(5)
    odd = [None, 0.0, -1.0, float("nan"), float("inf"), -float("inf"), 63e9, 63e9 * 7 / 8, 1e-300]
    for _ in range(3000):
        n = rng.randint(0, 90)
        series = [rng.choice(odd) if rng.random() < 0.2 else rng.uniform(0, 70e9) for _ in range(n)]
        scale = rng.choice([None, 0.0, 63e9, 15.75e9, 1.0])
        width = rng.randint(-1, 100)
        assert spark_runs(series, scale, width) == reference_runs(series, scale, width), (series, scale, width)
