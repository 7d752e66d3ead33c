"""Pilot tests of the terminal app at 80x24: keys, panels, polling, probes, recording, replay."""
from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time

import pytest
from textual.widgets import DataTable, Input, TabbedContent

from pinmon.advise.thresholds import Thresholds
from pinmon.model import Finding, Gpu
from pinmon.tui.app import PinmonApp, run_app
from pinmon.tui.screens.finding import FindingScreen
from pinmon.tui.screens.help import HelpScreen
from pinmon.tui.screens.notices import NoticesScreen
from pinmon.tui.view.format import NO_GPU_HINT
from pinmon.tui.widgets.gpu_detail import GpuDetail
from pinmon.tui.widgets.gpu_row import GpuRow
from pinmon.tui.widgets.header import StatusHeader
from pinmon.tui.widgets.notices import NoticeBar
from pinmon.tui.widgets.probe import ProbePanel
from pinmon.units import fmt_rate
from tests.waiting import DEADLINE_S

from .fakes import (
    T0,
    FakeProbeRunner,
    FakeRecorder,
    FakeSource,
    FlakySource,
    NoGpuSource,
    fake_advisor,
    make_probe_result,
    make_snapshot,
    no_findings,
)
from .util import StepClock, screen_text, text_of, wait_for

SIZE = (80, 24)


def make_app(source=None, *, poll=False, **kw) -> PinmonApp:
    kw.setdefault("probe_every_s", None)
    app = PinmonApp(source or FakeSource(), kw.pop("advisor", fake_advisor), start_polling=poll, **kw)
    app.notes = []  # every notify() message, so tests can read the toasts
    notify = app.notify

    def recording_notify(message, *a, **k):
        app.notes.append(str(message))
        return notify(message, *a, **k)

    app.notify = recording_notify
    return app


def header(app) -> str:
    return text_of(app.query_one(StatusHeader))


def probe_text(app) -> str:
    return text_of(app.query_one("#probe-body"))


def active_tab(app) -> str:
    return app.query_one(TabbedContent).active


def feed(app, n: int = 3, start: int = 0, **kw) -> None:
    for i in range(start, start + n):
        app.apply_snapshot(make_snapshot(i, **kw))


# --- keys ------------------------------------------------------------------------------------------

async def test_q_exits():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0
    assert not app.is_running


async def test_number_keys_switch_tabs():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        for key, tab in (("2", "gpus"), ("3", "memory"), ("4", "processes"), ("5", "probe"),
                         ("6", "advisor"), ("1", "overview")):
            await pilot.press(key)
            assert active_tab(app) == tab


async def test_a_tab_takes_the_focus_at_once_so_the_next_tab_key_wins():
    """g then 1 pressed together must end on the overview: the GPUs tab focuses its row at once,
    not later, when a focus landing in the GPUs pane would pull the tab back there."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        for key, tab_id, kind in (("2", "gpus", GpuRow), ("4", "processes", DataTable)):
            await pilot.press(key)
            app.set_focus(None)
            app._focus_tab(tab_id)
            assert isinstance(app.focused, kind), (tab_id, app.focused)  # now, not after a pause
        await pilot.press("2")
        app.action_next_gpu()
        app.action_tab("overview")
        await pilot.pause()
        assert active_tab(app) == "overview"


async def test_g_cycles_gpus_and_shows_detail():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        await pilot.press("2")
        detail = app.query_one(GpuDetail)
        assert "00000000:17:00.0" in text_of(detail)
        await pilot.press("g")
        assert app.session.selected_gpu == 1 and active_tab(app) == "gpus"
        text = text_of(detail)
        assert "00000000:9A:00.0" in text and "NUMA node 1" in text and "48-95" in text
        assert "6060" in text  # the process on GPU 1
        await pilot.press("g")
        assert app.session.selected_gpu == 0


async def test_enter_on_a_gpu_row_selects_it():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        await pilot.press("2")
        rows = list(app.query_one("#gpu-list").query(GpuRow))
        assert len(rows) == 2
        rows[1].focus()
        await pilot.press("enter")
        assert app.session.selected_gpu == 1
        assert "GPU 1 detail" in str(app.query_one(GpuDetail).border_title)


async def test_filter_narrows_the_process_table_and_escape_clears():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        table = app.query_one("#process-table", DataTable)
        await pilot.press("slash")  # from the overview: switches to the table and opens the filter
        assert active_tab(app) == "processes"
        assert table.row_count == 4
        assert isinstance(app.focused, Input)
        await pilot.press(*"bob")
        assert table.row_count == 1
        assert table.get_row_at(0)[0].plain == "6060"
        await pilot.press("enter")  # back to the table, filter kept
        assert isinstance(app.focused, DataTable) and table.row_count == 1
        feed(app, 1, start=5)  # a new snapshot keeps the filter
        assert table.row_count == 1
        await pilot.press("escape")
        assert table.row_count == 4


async def test_filter_matches_pid_and_user():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        table = app.query_one("#process-table", DataTable)
        await pilot.press("slash", *"515")
        assert [table.get_row_at(i)[0].plain for i in range(table.row_count)] == ["5151"]
        await pilot.press("escape", "slash", *"alice")
        assert table.row_count == 2


async def test_o_cycles_the_sort_column():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        await pilot.press("4")
        table = app.query_one("#process-table", DataTable)
        pids = lambda: [table.get_row_at(i)[0].plain for i in range(table.row_count)]
        assert pids() == ["4242", "5151", "6060", "7070"]  # pinned, largest first
        await pilot.press("o")  # write-combined; unknown last
        assert pids()[-1] == "7070"
        assert "write-combined" in text_of(app.query_one("#process-status"))
        for _ in range(3):  # churn, GPU memory, pid
            await pilot.press("o")
        assert pids() == ["4242", "5151", "6060", "7070"]
        assert "sort pid" in text_of(app.query_one("#process-status"))


async def test_help_opens_on_question_mark_and_f1():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "pinmon demo" in text_of(app.screen.query_one("#help-text"))
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("q")  # q closes help, it does not quit
        assert not isinstance(app.screen, HelpScreen) and app.is_running


async def test_command_palette_lists_the_actions():
    app = make_app()
    async with app.run_test(size=SIZE):
        titles = {c.title for c in app.get_system_commands(app.screen)}
    assert {"Probe now", "Probe sweep", "Next GPU", "Filter processes", "Pause / resume",
            "Start / stop recording", "Keys and terms", "Show Advisor"} <= titles
    assert "Replay faster" not in titles  # live: no speed


# --- panels from the source ------------------------------------------------------------------------

async def test_panels_follow_the_polled_source():
    src = FakeSource(interval_s=0.05)
    app = make_app(src, poll=True, interval_s=0.05)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(app.session.history) >= 3)
        text = screen_text(app)
        assert "LIVE" in text and "gpu-node-17" in text and "2 GPUs" in text
        assert "DEGRADED" in text  # GPU 1 at Gen4 x8 under 12 GB/s
        assert "2026-05-28" in header(app)  # the snapshot's time, not the clock on the wall
        assert "pinned memory is 41% of effective RAM" in text  # the fake advisor's finding
    assert app.poll_done.wait(2)


async def test_header_time_comes_from_the_snapshot():
    app = make_app()
    async with app.run_test(size=SIZE):
        app.apply_snapshot(make_snapshot(0))
        assert "2026-05-28 20:26:40" in header(app)
        app.apply_snapshot(make_snapshot(5))
        assert "2026-05-28 20:26:45" in header(app)


async def test_rates_percent_of_link_and_estimate_label():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        await pilot.press("2")
        text = screen_text(app)
        assert "Gen4 x8 DEGRADED (max Gen5 x16)" in text
        assert "est." in text and "exact" in text  # GPU 1 sampled, GPU 0 counters
        assert "errors +3" in text


async def test_idle_downshift_is_not_degraded():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        s = make_snapshot(0)
        idle = dataclasses.replace(s.gpus[1], pcie=dataclasses.replace(s.gpus[1].pcie, rx_bytes_per_s=1e6,
                                                                       tx_bytes_per_s=1e6))
        app.apply_snapshot(dataclasses.replace(s, gpus=(s.gpus[0], idle)))
        await pilot.press("2")
        text = screen_text(app)
        assert "DEGRADED" not in text and "Gen4 x8 idle" in text


@pytest.mark.parametrize("floor", [1e9, 12e9, 13e9])
async def test_degraded_follows_the_configured_threshold_as_check_does(floor):
    # GPU 1 runs Gen4 x8 of Gen5 x16 under 12.5 GB/s (make_snapshot(0)): the TUI calls its link
    # DEGRADED exactly when the advisor (pinmon check) warns about it, whatever the config says.
    from pinmon.advise import advise

    thresholds = Thresholds(link_degraded_traffic_bytes_per_s=floor)
    app = make_app(thresholds=thresholds)
    async with app.run_test(size=SIZE) as pilot:
        feed(app, 1)
        await pilot.press("2")
        text = screen_text(app)
        warned = any(f.rule == "pcie-link-degraded" and f.severity == "warning"
                     for f in advise([make_snapshot(0)], thresholds))
        assert warned == (floor <= 12.5e9)
        assert ("Gen4 x8 DEGRADED" in text) == warned and ("Gen4 x8 idle" in text) != warned
        await pilot.press("question_mark")
        assert f"moving >= {fmt_rate(floor)}" in text_of(app.screen.query_one("#help-text"))


async def test_lost_gpu_shows_lost():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        s = make_snapshot(0)
        app.apply_snapshot(dataclasses.replace(s, gpus=(s.gpus[0], Gpu(index=1, name="NVIDIA H200", lost=True))))
        await pilot.pause()
        assert "LOST" in screen_text(app)
        await pilot.press("2")
        assert "LOST" in screen_text(app)


async def test_sparkline_keeps_the_last_60_samples():
    app = make_app()
    async with app.run_test(size=SIZE):
        feed(app, 70)
        state = app.session.view_state()
        assert len(state.rx_series[0]) == 60
        assert state.rx_series[0][-1] == make_snapshot(69).gpus[0].pcie.rx_bytes_per_s


async def test_memory_panel_shows_pinned_share_and_estimates():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        await pilot.press("3")
        text = screen_text(app)
        assert "41%" in text and "420.0 GiB est." in text and "┃" in text
        assert "Shmem" in text and "Mlocked" in text and "memlock" in text and "unlimited" in text


async def test_no_gpu_source_says_so_and_points_to_the_demo():
    app = make_app(NoGpuSource())
    async with app.run_test(size=SIZE) as pilot:
        app.apply_snapshot(NoGpuSource().snapshot())
        bar = text_of(app.query_one(NoticeBar))
        assert "no NVIDIA GPU found: NVML library not found" in bar
        assert NO_GPU_HINT in screen_text(app)  # where the GPUs would be
        assert "0 GPUs" in header(app)
        await pilot.press("g")  # nothing to cycle; no crash
        await pilot.press("2")
        assert "no NVIDIA GPU in this snapshot" in screen_text(app)


async def test_no_findings_is_stated():
    app = make_app(advisor=no_findings)
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        assert "No findings" in screen_text(app)
        await pilot.press("6")
        assert "No findings" in screen_text(app)


async def test_findings_worst_first_and_enter_opens_the_full_text():
    def advisor(history):  # deliberately unsorted: the view still shows worst first
        return [Finding("pinned_churn", "info", "pid 1", "churn msg", "reuse"),
                Finding("pinned_share_high", "critical", "host", "pinned is 60% of RAM", "cap it",
                        values={"share": 0.6})]

    app = make_app(advisor=advisor)
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        assert [f.severity for f in app.session.findings] == ["critical", "info"]
        await pilot.press("6", "enter")
        assert isinstance(app.screen, FindingScreen)
        assert app.screen.finding.rule == "pinned_share_high"
        text = screen_text(app)
        assert "cap it" in text and "share" in text and "0.6" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, FindingScreen)


async def test_advisor_failure_degrades_to_a_notice():
    def broken(history):
        raise ZeroDivisionError("rule bug")

    app = make_app(advisor=broken)
    async with app.run_test(size=SIZE):
        feed(app)
        assert "advisor failed: ZeroDivisionError: rule bug" in text_of(app.query_one(NoticeBar))
        assert app.is_running


async def test_source_errors_are_notices_and_polling_continues():
    src = FlakySource(fail_every=2, interval_s=0.02)
    app = make_app(src, poll=True, interval_s=0.02)
    async with app.run_test(size=SIZE) as pilot:
        # The notice lasts until the next good reading (20 ms here): both parts are read at once.
        await wait_for(pilot, lambda: src.attempts >= 2 and all(
            part in text_of(app.query_one(NoticeBar)) for part in ("reading failed", "cannot read /proc/4242/maps")))
        await wait_for(pilot, lambda: len(app.session.history) >= 4)
        assert app.is_running


# --- pause -----------------------------------------------------------------------------------------

async def test_space_pauses_the_live_view():
    src = FakeSource(interval_s=0.03)
    app = make_app(src, poll=True, interval_s=0.03)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(app.session.history) >= 2)
        await pilot.press("space")
        frozen = header(app)
        assert "PAUSED" in frozen
        seen = len(app.session.history)
        await wait_for(pilot, lambda: len(app.session.history) >= seen + 3)  # still collecting...
        assert header(app) == frozen  # ...but the view stands still
        await pilot.press("space")
        assert "PAUSED" not in header(app) and header(app) != frozen


async def test_space_stops_a_replay_from_advancing():
    src = FakeSource(live=False, interval_s=0.03)
    app = make_app(src, poll=True, interval_s=0.03)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: src.calls >= 2)
        await pilot.press("space")
        await pilot.pause(0.1)
        calls = src.calls
        await pilot.pause(0.3)
        assert src.calls <= calls + 1  # at most the read already in flight
        assert "PAUSED" in header(app)
        await pilot.press("space")
        await wait_for(pilot, lambda: src.calls >= calls + 3)


# --- recording -------------------------------------------------------------------------------------

async def test_r_starts_and_stops_recording():
    recorders: list[FakeRecorder] = []

    def factory():
        recorders.append(FakeRecorder("/tmp/pinmon-rec.jsonl.gz"))
        return recorders[-1]

    app = make_app(recorder_factory=factory)
    async with app.run_test(size=SIZE) as pilot:
        feed(app, 1)
        await pilot.press("r")
        assert "REC" in header(app) and "/tmp/pinmon-rec.jsonl.gz" in header(app)
        feed(app, 2, start=1)
        rec = recorders[0]
        assert [s.time for s in rec.written] == [T0, T0 + 1, T0 + 2]  # the current one, then each new one
        await pilot.press("r")
        assert rec.closed and "REC" not in header(app)
        feed(app, 1, start=3)
        assert len(rec.written) == 3


async def test_recording_is_closed_on_exit():
    rec = FakeRecorder()
    app = make_app(recorder_factory=lambda: rec)
    async with app.run_test(size=SIZE) as pilot:
        feed(app, 1)
        await pilot.press("r", "q")
    assert rec.closed


async def test_recorder_that_cannot_start_is_reported():
    def factory():
        raise FileExistsError("pinmon-x.jsonl.gz already exists; pinmon does not overwrite files")

    app = make_app(recorder_factory=factory)
    async with app.run_test(size=SIZE) as pilot:
        feed(app, 1)
        await pilot.press("r")
        await pilot.pause()
        assert app.session.recorder is None and "REC" not in header(app)
        assert any("already exists" in n for n in app.notes)


async def test_live_pause_keeps_recording():
    rec = FakeRecorder()
    app = make_app(recorder_factory=lambda: rec)
    async with app.run_test(size=SIZE) as pilot:
        feed(app, 1)
        await pilot.press("r", "space")
        feed(app, 3, start=1)
        assert len(rec.written) == 4


# --- probes ----------------------------------------------------------------------------------------

async def test_p_runs_the_probe_and_shows_its_result():
    runner = FakeProbeRunner()
    clock = StepClock()
    app = make_app(probe_runner=runner, clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        clock.advance(100)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.session.probe_latest is not None)
        assert runner.calls[0] == ("quick", {"gpu_index": 0})
        await pilot.press("5")
        text = probe_text(app)
        assert "52.0 GB/s" in text and "18.0 GB/s" in text and "2.9x" in text and "83%" in text
        assert "probe duty cycle" in text and "1 run" in text


async def test_probe_progress_bar_while_running_and_sweep_on_s():
    runner = FakeProbeRunner(block=True)
    app = make_app(probe_runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        await pilot.press("g", "s")  # the sweep runs on the selected GPU
        await wait_for(pilot, lambda: runner.started.is_set() and app.session.probe_progress[1] == 4)
        await pilot.press("5")
        panel = app.query_one(ProbePanel)
        assert panel.query_one("#probe-progress").display
        assert "sweep probe running" in text_of(panel.query_one("#probe-progress-label"))
        await pilot.press("p")  # one at a time
        assert len(runner.calls) == 1
        runner.release.set()
        await wait_for(pilot, lambda: app.session.probe_running is None)
        assert runner.calls[0] == ("sweep", {"gpu_index": 1})
        await pilot.pause()
        assert not panel.query("#probe-progress")  # gone: an idle bar would animate at 15 Hz
        assert not panel.query_one("#probe-progress-label").display
        assert "64.0 MiB" in probe_text(app)  # the sweep table


async def test_an_idle_app_runs_no_animation_timers():
    # On an idle box nothing but the 1 s snapshot should wake the app (a hidden ProgressBar used to
    # animate 15 times a second, ~1% of a core on its own).
    import textual.timer

    ticks = []
    real = textual.timer.Timer._tick

    async def counting(self, **kw):
        ticks.append(self)
        return await real(self, **kw)

    app = make_app(probe_runner=FakeProbeRunner())
    windows = []
    async with app.run_test(size=(160, 48)) as pilot:
        feed(app, 5)
        textual.timer.Timer._tick = counting
        try:
            # A slow machine may still be drawing the fed snapshots for a while; an animation never
            # goes quiet, so some 0.5 s window must see at most one tick.
            for _ in range(12):
                ticks.clear()
                await pilot.pause(0.5)
                windows.append([t.name for t in ticks])
                if len(ticks) <= 1:
                    break
        finally:
            textual.timer.Timer._tick = real
    assert len(windows[-1]) <= 1, windows


async def test_p_without_runner_says_why_and_shows_no_numbers():
    app = make_app(probe_unavailable_reason="CuPy is not installed (pip install pinmon[cuda12])")
    async with app.run_test(size=SIZE) as pilot:
        feed(app)
        await pilot.press("p")
        await pilot.pause()
        assert any("CuPy is not installed" in n for n in app.notes)
        await pilot.press("5")
        text = probe_text(app)
        assert "CuPy is not installed" in text
        assert "GB/s" not in text


async def test_probe_results_join_later_snapshots():
    rec = FakeRecorder()
    app = make_app(probe_runner=FakeProbeRunner(), recorder_factory=lambda: rec)
    async with app.run_test(size=SIZE) as pilot:
        feed(app, 1)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.session.probe_latest is not None)
        await pilot.press("r")
        feed(app, 1, start=1)
        assert rec.written[-1].probe is not None and rec.written[-1].probe.kind == "quick"
        assert app.session.history[-1].probe is app.session.probe_latest


async def test_probe_panel_shows_the_link_traffic_while_the_probe_ran():
    # The fake probe ran T0 .. T0+1.5 on GPU 0; the readings at T0+1 and T0+2 cover it, and GPU 0's
    # link carried 47 and 44 GB/s RX: far more than the probe's own copies.
    rec = FakeRecorder()
    app = make_app(probe_runner=FakeProbeRunner(), recorder_factory=lambda: rec)
    async with app.run_test(size=SIZE) as pilot:
        feed(app, 1)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.session.probe_latest is not None)
        await pilot.press("5")
        assert "link during probe: waiting for the next reading" in probe_text(app)
        await pilot.press("r")
        feed(app, 2, start=1)
        text = probe_text(app)
        assert "link during probe: RX 45.5 GB/s, TX " in text and "(exact, incl. the probe's own)" in text
        assert "! link shared: other RX ~45.1 GB/s; H2D figures read low" in text
        assert app.session.probe_latest.link_rx_bytes_per_s == pytest.approx(45.5e9)
        # Joined into later snapshots, so the advisor, --json and recordings carry it too.
        assert rec.written[-1].probe.link_window_s == pytest.approx(2.0)
        await pilot.press("1")
        assert "link shared" not in screen_text(app)  # the narrow overview has no probe panel


async def test_probe_on_a_quiet_link_gets_no_shared_warning():
    app = make_app(probe_runner=FakeProbeRunner())
    async with app.run_test(size=SIZE) as pilot:
        feed(app, 1)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.session.probe_latest is not None)
        for i in (1, 2):  # the probe's own 0.8 GB over 2 s of readings, and a little protocol overhead
            s = make_snapshot(i)
            quiet = dataclasses.replace(s.gpus[0], pcie=dataclasses.replace(s.gpus[0].pcie, rx_bytes_per_s=0.45e9,
                                                                            tx_bytes_per_s=0.45e9))
            app.apply_snapshot(dataclasses.replace(s, gpus=(quiet, s.gpus[1])))
        await pilot.press("5")
        text = probe_text(app)
        assert "link during probe: RX 450.0 MB/s, TX 450.0 MB/s" in text
        assert "shared" not in text


async def test_periodic_probe_runs_in_live_mode():
    runner = FakeProbeRunner()
    app = make_app(FakeSource(interval_s=0.05), poll=True, interval_s=0.05, probe_runner=runner,
                   probe_every_s=0.1, auto_probe_duty_limit=1.0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.session.probe_count >= 2)
        assert all(kind == "quick" for kind, _ in runner.calls)


async def test_probe_runner_exception_becomes_a_result_with_a_reason():
    def runner(kind, **kw):
        raise RuntimeError("cudaErrorNoDevice")

    app = make_app(probe_runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        feed(app, 1)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.session.probe_latest is not None)
        assert app.session.probe_latest.status == "unavailable"
        await pilot.press("5")
        assert "cudaErrorNoDevice" in probe_text(app)


async def test_replay_shows_the_recorded_probe_and_refuses_new_ones():
    runner = FakeProbeRunner()
    app = make_app(FakeSource(live=False), probe_runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        app.apply_snapshot(make_snapshot(0, source="replay", probe=make_probe_result()))
        await pilot.press("p", "s")
        await pilot.pause()
        assert runner.calls == []
        assert sum("probe not available in replay" in n for n in app.notes) == 2
        await pilot.press("5")
        text = probe_text(app)
        assert "from the recording" in text and "52.0 GB/s" in text


# --- replay ----------------------------------------------------------------------------------------

async def test_replay_badge_and_speed_keys():
    app = make_app(FakeSource(live=False), replay_speeds=(0.5, 1, 2, 4))
    async with app.run_test(size=SIZE) as pilot:
        feed(app, 1, source="replay")
        assert "REPLAY 1x" in header(app) and "LIVE" not in header(app)
        await pilot.press("plus")
        assert app.session.speed == 2 and "REPLAY 2x" in header(app)
        await pilot.press("plus", "plus", "plus")
        assert app.session.speed == 4
        await pilot.press("minus", "minus", "minus", "minus")
        assert app.session.speed == 0.5 and "REPLAY 0.5x" in header(app)


async def test_replay_speed_changes_the_polling_period():
    src = FakeSource(live=False, interval_s=0.2)
    app = make_app(src, poll=True, interval_s=0.2, speed=16)
    async with app.run_test(size=SIZE) as pilot:
        assert app.session.period_s() == pytest.approx(0.2 / 16)
        # Polling really happens at that period: generous timeout, a loaded CI box is slow.
        await wait_for(pilot, lambda: src.calls >= 10, timeout_s=20)


async def test_speed_keys_in_live_mode_only_explain():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        feed(app, 1)
        await pilot.press("plus")
        await pilot.pause()
        assert app.session.speed == 1.0
        assert any("replays only" in n for n in app.notes)


async def test_end_of_recording_stops_polling_and_keeps_the_app():
    src = FakeSource(live=False, n=3, interval_s=0.02)
    src.notices.append("recording ends early: x.jsonl:4: not JSON")
    app = make_app(src, poll=True, interval_s=0.02)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.session.ended)
        assert app.poll_done.wait(1)
        assert "END OF RECORDING" in header(app)
        bar = text_of(app.query_one(NoticeBar))
        assert "recording ends early" in bar and "+1 more (n)" in bar  # the source's warning first
        await pilot.press("n")
        assert isinstance(app.screen, NoticesScreen)
        notices = text_of(app.screen.query_one("#notices-text"))
        assert "end of recording" in notices and "recording ends early" in notices
        await pilot.press("n")
        assert not isinstance(app.screen, NoticesScreen)
        assert app.session.displayed is app.session.history[-1] and len(app.session.history) == 3  # the last snapshot stays
        calls = src.calls
        await pilot.pause(0.1)
        assert src.calls == calls and app.is_running


# --- signals and run_app ---------------------------------------------------------------------------

async def test_stop_signal_closes_the_recording_and_exits():
    rec = FakeRecorder()
    app = make_app(recorder_factory=lambda: rec, install_signal_handlers=True)
    async with app.run_test(size=SIZE) as pilot:
        feed(app, 1)
        await pilot.press("r")
        os.kill(os.getpid(), signal.SIGTERM)
        await pilot.pause(0.1)
    assert rec.closed and not app.is_running
    assert app.return_code == 0


def _armed_exit_watchdogs() -> list[threading.Timer]:
    """Timers that would end this process (the app's hang-up watchdog) and are neither done nor
    cancelled."""
    return [t for t in threading.enumerate()
            if isinstance(t, threading.Timer) and t.function is os._exit and not t.finished.is_set()]


def test_run_app_exits_on_sighup_with_threads_stopped():
    # The hang-up watchdog must be cancelled by a clean exit: were it not, it would end this
    # process (its grace, 3 s, is far above a clean exit here, so a slow exit on a loaded machine
    # does not trip it). SIGHUP comes once the app handles it and has polled its source; until
    # then this test's own handler holds it, so an early one cannot end the test run.
    src = FakeSource(interval_s=0.02)
    old = signal.getsignal(signal.SIGHUP)
    held = []
    signal.signal(signal.SIGHUP, lambda *_: held.append(1))
    mine = signal.getsignal(signal.SIGHUP)
    stop = threading.Event()

    def hang_up_when_running():
        deadline = time.monotonic() + DEADLINE_S
        while not stop.wait(0.02):
            running = signal.getsignal(signal.SIGHUP) is not mine and src.calls > 0
            if running or time.monotonic() > deadline:
                os.kill(os.getpid(), signal.SIGHUP)
                return

    sender = threading.Thread(target=hang_up_when_running)
    sender.start()
    try:
        code = run_app(src, fake_advisor, interval_s=0.02, probe_every_s=None, headless=True)
        armed = _armed_exit_watchdogs()
    finally:
        stop.set()
        sender.join()
        signal.signal(signal.SIGHUP, old)
        for t in _armed_exit_watchdogs():
            t.cancel()  # the test fails below; the run goes on
    assert code == 0 and held == []
    assert armed == [], "the hang-up watchdog was left armed after a clean exit"
    calls = src.calls
    assert calls > 0
    threading.Event().wait(0.5)  # not a wait: time for polls a thread left running would make
    assert src.calls == calls  # nothing polls the source after run_app returns


def test_run_app_reports_an_app_that_failed(monkeypatch):
    """An app that cannot start (here its stylesheet is missing) ends with a non-zero code, not 0."""
    monkeypatch.setattr(PinmonApp, "CSS_PATH", "no-such-file.tcss")
    code = run_app(FakeSource(), fake_advisor, probe_every_s=None, headless=True)
    assert code != 0
