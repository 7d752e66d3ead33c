"""The overview's history graphs and what sizes them, without an app: the readings kept, how they
group into columns, the bars of each row, the room each graph gets, and the commands' short form."""
from __future__ import annotations

import dataclasses

import pytest

from pinmon.tui.view.format import command_brief
from pinmon.tui.view.history import GRAPH_SPAN_S, History, columns, per_column_for, pinned_share, samples_for
from pinmon.tui.view.sizing import gpu_graph_rows, pinned_band_rows
from pinmon.tui.widgets.sparkline import BARS, graph_runs
from tests import factories as make

from .fakes import make_snapshot

# --- the readings kept ---------------------------------------------------------------------------

def test_history_keeps_minutes_of_each_gpu_and_the_pinned_share():
    h = History(interval_s=1.0)
    assert h.maxlen == samples_for(1.0) == int(GRAPH_SPAN_S)
    for i in range(h.maxlen + 20):
        h.add(make_snapshot(i))
    g = h.frozen([0, 1])
    assert g.count == h.maxlen and g.first_index == 20  # the oldest 20 scrolled off, numbered on
    assert g.rx[0][-1] == make_snapshot(h.maxlen + 19).gpus[0].pcie.rx_bytes_per_s
    assert g.pinned[-1] == pytest.approx(pinned_share(make_snapshot(0).host))


def test_a_gpu_seen_late_has_no_readings_before_and_a_lost_one_has_none_while_lost():
    h = History()
    one = make_snapshot(0)
    h.add(dataclasses.replace(one, gpus=one.gpus[:1]))
    s = make_snapshot(1)
    h.add(dataclasses.replace(s, gpus=(s.gpus[0], dataclasses.replace(s.gpus[1], lost=True))))
    h.add(make_snapshot(2))
    g = h.frozen([0, 1])
    assert g.rx[1] == (None, None, make_snapshot(2).gpus[1].pcie.rx_bytes_per_s)
    assert len(g.rx[0]) == len(g.rx[1]) == g.count == 3


def test_a_frozen_copy_does_not_move_with_later_readings():
    h = History()
    h.add(make_snapshot(0))
    g = h.frozen([0])
    h.add(make_snapshot(1))
    assert g.count == 1 and len(g.rx[0]) == 1


def test_samples_kept_follow_the_interval_within_bounds():
    assert samples_for(0.5) == 600
    assert samples_for(60.0) == 60  # never fewer than a minute's sparkline
    assert samples_for(0.01) == 3600
    assert samples_for(float("nan")) == samples_for(0) == 60


# --- columns -------------------------------------------------------------------------------------

def test_columns_are_means_of_groups_fixed_by_sample_number():
    series = tuple(float(v) for v in range(10))  # samples 0..9
    assert columns(series, 0, 3, 4) == [1.0, 4.0, 7.0, 9.0]  # groups 0-2, 3-5, 6-8, then 9 so far
    # One sample later, the first groups keep their values: the graph scrolls, it does not shimmer.
    assert columns(series + (10.0,), 0, 3, 4)[:3] == [1.0, 4.0, 7.0]


def test_columns_before_the_history_and_without_readings_are_none():
    assert columns((5.0, 7.0), 10, 1, 4) == [None, None, 5.0, 7.0]
    assert columns((None, None, 3.0, None), 0, 2, 2) == [None, 3.0]
    assert columns((), 0, 1, 3) == [None] * 3
    assert columns((1.0,), 0, 1, 0) == []


def test_a_group_that_started_before_the_kept_history_uses_what_is_kept():
    # Samples 4..7 kept, 3 per column: group 1 (3..5) has only 4 and 5.
    assert columns((4.0, 5.0, 6.0, 7.0), 4, 3, 2) == [4.5, 6.5]


def test_samples_per_column_cover_the_span():
    assert per_column_for(60, 1.0) == 5
    assert per_column_for(300, 1.0) == 1
    assert per_column_for(0, 1.0) == per_column_for(60, 0) == 1
    assert per_column_for(37, 1.0) * 37 >= GRAPH_SPAN_S


# --- bars ----------------------------------------------------------------------------------------

def cells(runs) -> str:
    return "".join(" " * n if level is None else BARS[level] * n for level, n in runs)


def test_graph_rows_fill_bottom_up_in_eighths_of_the_scale():
    rows = [cells(r) for r in graph_runs([0.0, 25.0, 50.0, 100.0, 200.0, None], 100.0, 2)]
    assert rows == ["   ██ ",
                    "▁" + BARS[3] + "███ "]
    rows = [cells(r) for r in graph_runs([30.0], 100.0, 2)]  # 30% of 16 eighths = 4: half the bottom row
    assert rows == [" ", BARS[3]]


def test_graph_rows_of_an_idle_link_are_a_floor_and_blanks_above():
    rows = graph_runs([1e6] * 5, 63e9, 4)
    assert [cells(r) for r in rows] == ["     "] * 3 + ["▁▁▁▁▁"]
    assert rows[0] == [(None, 5)]  # one run: nothing to render cell by cell


def test_graph_without_a_scale_uses_the_peak():
    assert [cells(r) for r in graph_runs([2.0, 4.0], None, 1)] == [BARS[3] + BARS[7]]


# --- room ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("size,gpus,rows", [
    ((80, 24), 1, 1),      # 80x24 keeps its one-line sparklines
    ((119, 60), 1, 1),
    ((120, 30), 1, 3),
    ((160, 48), 1, 7),
    ((250, 60), 1, 8),
    ((160, 48), 8, 1),     # eight GPUs: one line each, as before
    ((160, 48), 2, 3),
])
def test_gpu_graph_rows(size, gpus, rows):
    assert gpu_graph_rows(size[0], size[1], gpus) == rows


def test_pinned_graph_bands_grow_with_the_height():
    assert pinned_band_rows(22) == 0
    assert pinned_band_rows(30) == 1
    assert pinned_band_rows(48) == 2
    assert pinned_band_rows(60) == 3 == pinned_band_rows(200)


# --- commands ------------------------------------------------------------------------------------

@pytest.mark.parametrize("cmdline,brief", [
    ("/opt/venv/bin/python3 /work/jobs/train.py --lr 3e-4", "python3 train.py --lr 3e-4"),
    ("/usr/bin/python3 -u -X dev /a/b/train.py", "python3 -u -X dev train.py"),
    ("python3 -m pinmon.trace /work/examples/pageable_copies.py --seconds 15",
     "python3 -m pinmon.trace pageable_copies.py --seconds 15"),
    ("torchrun --nproc_per_node 8 /x/y/train.py", "torchrun --nproc_per_node 8 train.py"),
    ("python3 -c import cupy", "python3 -c import cupy"),
    ("/usr/local/bin/ollama serve", "ollama serve"),
    ("python3\n-c\x1b]0;x\x07", "python3 -c\\x1b]0;x\\x07"),  # one printable line
])
def test_command_brief_keeps_the_meaningful_part(cmdline, brief):
    assert command_brief(make.process(1, "python3", cmdline=cmdline)) == brief


def test_command_brief_falls_back_to_the_name_and_is_bounded():
    assert command_brief(make.process(1, "kworker", cmdline=None)) == "kworker"
    assert command_brief(make.process(1, None, cmdline="")) == "n/a"
    assert command_brief(make.process(1, None, cmdline="python3 " + "a" * 500), 40).endswith("…")
    assert len(command_brief(make.process(1, None, cmdline="python3 " + "a" * 500), 40)) == 40


def test_the_column_cache_gives_what_columns_gives_as_readings_come_and_go():
    import random

    from pinmon.tui.view.history import ColumnCache

    rng = random.Random(7)
    cache = ColumnCache()
    h = History(interval_s=1.0)
    for i in range(700):  # past the kept history, so groups scroll off at the left too
        s = make_snapshot(i)
        if i % 37 == 5:
            s = dataclasses.replace(s, gpus=(dataclasses.replace(s.gpus[0], lost=True), s.gpus[1]))
        rx = rng.uniform(0, 63e9)
        s = dataclasses.replace(s, gpus=(dataclasses.replace(s.gpus[0], pcie=dataclasses.replace(
            s.gpus[0].pcie, rx_bytes_per_s=rx)),) + s.gpus[1:])
        h.add(s)
        g = h.frozen([0])
        width, per_column = (60, 5) if i < 400 else (45, 7)  # a resize on the way
        assert cache.values(g.rx[0], g.first_index, per_column, width) == \
            columns(g.rx[0], g.first_index, per_column, width), i
