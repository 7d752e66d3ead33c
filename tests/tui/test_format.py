"""The view rules that decide what the user sees, without an app: link states, sorting, filtering."""
from __future__ import annotations

import dataclasses

from pinmon.advise.thresholds import Thresholds
from pinmon.model import Gpu, Link, Pcie, ProbeMeasurement, ProbeResult
from pinmon.tui.screens.finding import _value
from pinmon.tui.view.format import (
    SORT_COLUMNS,
    error_text,
    filter_processes,
    link_state,
    other_measurements,
    probe_rows,
    sort_processes,
)
from pinmon.tui.view.state import ProbeView, ViewState
from pinmon.tui.widgets.header import header_content
from tests import factories as make

from .fakes import make_probe_result, make_snapshot

GEN4_X8_OF_GEN5_X16 = Link(gen=4, gen_max=5, width=8, width_max=16)
DEFAULTS = Thresholds()


def gpu(link=GEN4_X8_OF_GEN5_X16, rx=None, tx=None, **kw) -> Gpu:
    return Gpu(index=0, link=link, pcie=Pcie(rx_bytes_per_s=rx, tx_bytes_per_s=tx, **kw))


def test_below_max_under_load_is_degraded():
    assert link_state(gpu(rx=0.8e9, tx=0.3e9), DEFAULTS) == "degraded"  # 1.1 GB/s both ways together


def test_below_max_while_idle_is_a_power_saving_downshift():
    assert link_state(gpu(rx=5e6, tx=1e6), DEFAULTS) == "downshift"
    assert link_state(gpu(), DEFAULTS) == "downshift"  # no reading: never cry "degraded" without traffic


def test_full_lost_and_unknown_links():
    assert link_state(gpu(Link(gen=5, gen_max=5, width=16, width_max=16), rx=50e9), DEFAULTS) == "full"
    assert link_state(dataclasses.replace(gpu(), lost=True), DEFAULTS) == "lost"
    assert link_state(gpu(Link()), DEFAULTS) == "unknown"


def test_the_degraded_floor_is_the_advisors_configured_threshold():
    # The same link and traffic as pinmon check sees them: with the floor raised to 2 GB/s in the
    # config, 1.1 GB/s is an idle downshift in the TUI as in the advisor.
    raised = Thresholds(link_degraded_traffic_bytes_per_s=2e9)
    assert link_state(gpu(rx=0.8e9, tx=0.3e9), raised) == "downshift"
    assert link_state(gpu(rx=1.8e9, tx=0.3e9), raised) == "degraded"
    lowered = Thresholds(link_degraded_traffic_bytes_per_s=1e6)
    assert link_state(gpu(rx=5e6, tx=1e6), lowered) == "degraded"


def test_width_alone_below_max_counts():
    assert link_state(gpu(Link(gen=5, gen_max=5, width=8, width_max=16), rx=20e9), DEFAULTS) == "degraded"


def test_error_text_sums_replays_recoveries_and_errors():
    g = gpu(replay_delta=2, recovery_delta=1, error_delta=4, counter_deltas={"replay": 2, "bad_tlp": 4})
    assert error_text(g) == "errors +7 (replay +2, recovery +1, bad_tlp +4)"
    assert error_text(g, detail=False) == "errors +7"
    assert error_text(gpu()) == "errors n/a"


def procs():
    return [make.process(3, "b", user="zed", pinned_bytes=None, cmdline="b --x"),
            make.process(1, "a", user="amy", pinned_bytes=10),
            make.process(2, "python", user="bob", pinned_bytes=20, cmdline="python train.py")]


def test_sort_puts_unknown_last_both_ways():
    by_pinned = next(c for c in SORT_COLUMNS if c.key == "pinned")
    assert [p.pid for p in sort_processes(procs(), by_pinned)] == [2, 1, 3]
    by_pid = next(c for c in SORT_COLUMNS if c.key == "pid")
    assert [p.pid for p in sort_processes(procs(), by_pid)] == [1, 2, 3]


def test_filter_by_pid_name_user_or_command():
    assert [p.pid for p in filter_processes(procs(), "2")] == [2]
    assert [p.pid for p in filter_processes(procs(), "AMY")] == [1]
    assert [p.pid for p in filter_processes(procs(), "train")] == [2]
    assert len(filter_processes(procs(), "  ")) == 3


def test_probe_rows_speedup_and_share_of_link():
    h2d, d2h = probe_rows(make_probe_result())
    assert round(h2d.speedup, 2) == round(52 / 18, 2)
    assert round(h2d.pinned_share_of_link, 3) == round(52 / 63, 3)
    assert d2h.direction == "d2h"


def test_probe_rows_without_measurements_are_unknown_not_zero():
    (h2d, _) = probe_rows(ProbeResult(time=0, status="unavailable", reason="no CuPy"))
    assert h2d.pinned_bytes_per_s is None and h2d.speedup is None and h2d.pinned_share_of_link is None


def test_duty_cycle():
    assert ProbeView(probe_seconds=3, wall_seconds=600).duty_cycle == 0.005
    assert ProbeView().duty_cycle is None


def test_finding_values_get_units_from_their_names():
    assert _value("pinned_bytes", 3 * 2**30).startswith("3.0 GiB")
    assert _value("rx_bytes_per_s", 5.2e10).startswith("52.0 GB/s")
    assert _value("share", 0.41).startswith("41.0%")
    assert _value("rule", "x") == "x"


def test_header_drops_words_before_numbers_when_narrow():
    state = ViewState(snapshot=make_snapshot(0), live=False, paused=True, speed=4)
    wide = str(header_content(state, 200))
    assert "every 1 s" in wide and "2026-05-28 20:26:40" in wide
    narrow = str(header_content(state, 70))
    assert "REPLAY 4x" in narrow and "PAUSED" in narrow and "20:26:40" in narrow and "2026" not in narrow


def test_a_microsecond_allocation_is_shown_in_microseconds():
    result = dataclasses.replace(make_probe_result(), measurements=(
        ProbeMeasurement("alloc", "pinned", 4096, seconds=9.1e-6, repeats=3),))
    [line] = other_measurements(result)
    assert line.endswith("  9.1 us")  # as `pinmon probe` prints it; never "0 ms"
