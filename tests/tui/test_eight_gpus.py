"""An eight-GPU box at 80x24 and 160x48: every GPU reachable with the keys, each GPU's figures under
its own name and no other.

Each fake GPU carries its own RX (``fakes.multi_rx``: 5.0, 10.1 ... 40.7 GB/s), so a row or a
detail that shows GPU i with GPU j's traffic is caught. What is checked is the text on screen,
not a widget's content: a figure scrolled out of sight does not count as shown.
"""
from __future__ import annotations

import re

import pytest

from pinmon.tui.app import PinmonApp
from pinmon.units import fmt_rate

from .fakes import MultiGpuSource, fake_advisor, multi_rx, multi_tx
from .util import StepClock, screen_text

SMALL = (80, 24)
LARGE = (160, 48)
GPUS = 8
SAMPLES = 60

RATE = r"\d+(?:\.\d+)? [KMGT]?B/s"
ROW_HEAD = re.compile(r"(▶)? GPU (\d+) NVIDIA H200  Gen")
ROW_RX = re.compile(rf"RX in\s+({RATE})")
SUMMARY = re.compile(rf"([▶ ]) GPU (\d+) Gen\d x\d+(?: DEGRADED)?  RX ({RATE})  TX ({RATE})")
DETAIL_TITLE = re.compile(r"GPU (\d+) detail")
DETAIL_TRAFFIC = re.compile(rf"traffic   RX ({RATE})  TX ({RATE})")


def build(n: int = SAMPLES):
    clock = StepClock()
    source = MultiGpuSource(GPUS)
    app = PinmonApp(source, fake_advisor, start_polling=False, probe_every_s=None, clock=clock)

    async def run_before(pilot):
        for _ in range(n):
            app.apply_snapshot(source.snapshot())
        clock.advance(600)
        app.refresh_views()
        await pilot.pause()

    return app, run_before


def gpu_rows(text: str) -> dict[int, tuple[bool, str]]:
    """The GPU rows on screen with their RX line: index -> (selected, the RX figure under its head).
    A head whose RX line is cut off by the panel's edge is not on screen."""
    lines = text.splitlines()
    rows = {}
    for k, line in enumerate(lines[:-1]):
        head = ROW_HEAD.search(line)
        rx = ROW_RX.search(lines[k + 1])
        if head is None or rx is None:
            continue
        index = int(head.group(2))
        assert index not in rows, f"GPU {index} twice on screen:\n{text}"
        rows[index] = (head.group(1) is not None, rx.group(1))
    return rows


def detail(text: str) -> tuple[int, str, str]:
    """The GPU detail on screen: (its GPU, the RX and TX of its traffic line)."""
    titles = DETAIL_TITLE.findall(text)
    traffic = DETAIL_TRAFFIC.findall(text)
    assert len(titles) == 1 and len(traffic) == 1, f"no whole GPU detail on screen:\n{text}"
    return int(titles[0]), traffic[0][0], traffic[0][1]


def assert_own_figures(rows: dict[int, tuple[bool, str]], text: str) -> None:
    for index, (_, rx) in rows.items():
        assert rx == fmt_rate(multi_rx(index)), f"GPU {index} shows RX {rx}:\n{text}"


def test_fake_rates_never_read_as_another_gpus():
    # The checks below match whole figures: each GPU's must be distinct from every other's.
    figures = [fmt_rate(multi_rx(k)) for k in range(GPUS)]
    assert len(set(figures)) == GPUS
    for k, f in enumerate(figures):
        assert all(re.search(rf"(?<![\d.]){re.escape(f)}", g) is None for j, g in enumerate(figures) if j != k)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
async def test_g_reaches_every_gpu_row_with_its_own_rx(size):
    app, run_before = build()
    async with app.run_test(size=size) as pilot:
        await run_before(pilot)
        await pilot.press("2")
        seen = set()
        for i in list(range(GPUS)) + [0]:  # the last g wraps round to GPU 0
            if seen:
                await pilot.press("g")
            await pilot.pause()
            text = screen_text(app)
            rows = gpu_rows(text)
            assert i in rows and rows[i][0], f"GPU {i} is selected but its row is not on screen:\n{text}"
            assert [k for k, (sel, _) in rows.items() if sel] == [i]
            assert_own_figures(rows, text)
            seen.update(rows)
        assert seen == set(range(GPUS))
        if size == LARGE:
            assert set(gpu_rows(screen_text(app))) == set(range(GPUS))  # all at once, no scrolling


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
async def test_enter_shows_each_gpus_detail_with_its_own_traffic(size):
    app, run_before = build()
    async with app.run_test(size=size) as pilot:
        await run_before(pilot)
        await pilot.press("2")
        for i in range(GPUS):
            if i:
                await pilot.press("g")  # from the detail back to the rows: the next one in view
                await pilot.pause()
                text = screen_text(app)
                assert gpu_rows(text).get(i, (False,))[0], f"GPU {i} selected, its row not on screen:\n{text}"
            await pilot.press("enter")
            await pilot.pause()
            text = screen_text(app)
            assert detail(text) == (i, fmt_rate(multi_rx(i)), fmt_rate(multi_tx(i))), text
            assert_own_figures(gpu_rows(text), text)


async def test_overview_80x24_lists_the_selected_gpu_with_its_own_rx():
    app, run_before = build()
    async with app.run_test(size=SMALL) as pilot:
        await run_before(pilot)
        for i in range(GPUS):
            if i:
                await pilot.press("g")  # selects the next GPU and shows the GPUs tab
            await pilot.press("1")
            await pilot.pause()
            text = screen_text(app)
            listed = {int(m.group(2)): (m.group(1) == "▶", m.group(3), m.group(4)) for m in SUMMARY.finditer(text)}
            assert listed.get(i, (False,))[0], f"GPU {i} selected, not listed on the overview:\n{text}"
            assert [k for k, v in listed.items() if v[0]] == [i]
            for k, (_, rx, tx) in listed.items():
                assert (rx, tx) == (fmt_rate(multi_rx(k)), fmt_rate(multi_tx(k))), text
            assert f"{GPUS - len(listed)} more GPUs (2: GPUs" in text


async def test_overview_160x48_shows_all_gpus_with_their_own_rx():
    app, run_before = build()
    async with app.run_test(size=LARGE) as pilot:
        await run_before(pilot)
        text = screen_text(app)
        rows = gpu_rows(text)
        assert set(rows) == set(range(GPUS)), text
        assert_own_figures(rows, text)


# --- SVG snapshots: look at them after --snapshot-update -----------------------------------------

@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
@pytest.mark.parametrize("tab", ["1", "2"], ids=["overview", "gpus"])
def test_eight_gpus_tabs(snap_compare, tab, size):
    app, run_before = build()
    assert snap_compare(app, press=[tab], terminal_size=size, run_before=run_before)


def test_eight_gpus_last_selected_80x24(snap_compare):
    app, run_before = build()
    assert snap_compare(app, press=["2"] + ["g"] * (GPUS - 1), terminal_size=SMALL, run_before=run_before)


def test_eight_gpus_first_detail_80x24(snap_compare):
    app, run_before = build()
    assert snap_compare(app, press=["2", "enter"], terminal_size=SMALL, run_before=run_before)
