"""The session without Textual: history, advice, series, pause, recording, probes and their duty cycle."""
from __future__ import annotations

import dataclasses
import sys

import pytest

from pinmon.advise.thresholds import Thresholds
from pinmon.model import Finding
from pinmon.tui.view.format import SPARK_SAMPLES
from pinmon.tui.view.session import FIRST_PROBE_DELAY_S, Session, sparkline_series

from .fakes import T0, FakeRecorder, fake_advisor, make_probe_result, make_snapshot
from .util import StepClock


def make_session(**kw) -> Session:
    kw.setdefault("probe_available", True)
    return Session(kw.pop("advisor", fake_advisor), **kw)


def test_the_session_needs_no_textual():
    # Run in a fresh interpreter: this one has imported Textual for the other tests.
    import subprocess

    code = ("import sys; import pinmon.tui.view.session; "
            "sys.exit(1 if any(m == 'textual' or m.startswith('textual.') for m in sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_a_snapshot_is_kept_advised_and_shown():
    s = make_session()
    s.take(make_snapshot(0))
    state = s.view_state()
    assert state.snapshot is s.latest is s.displayed is s.history[-1]
    assert {f.rule for f in state.findings} == {"pinned_share_high", "link_degraded", "pinned_churn"}
    assert [f.severity for f in state.findings] == ["warning", "warning", "info"]  # worst first


def test_the_advisor_sees_what_its_thresholds_look_back_and_the_sparklines_their_last_readings():
    seen = []

    def advisor(history):
        seen.append((history[0].time, history[-1].time))
        return []

    # pinned-growth looks back 100 s: the history keeps 110 s (a tenth more), at 2 s apart 56 snapshots.
    s = make_session(advisor=advisor, thresholds=dataclasses.replace(Thresholds(), growth_window_s=100.0))
    for i in range(200):
        s.take(make_snapshot(i, interval_s=2.0))
    first, last = seen[-1]
    assert last - first == 110.0 and len(s.history) == 56 and s.history.taken == 200
    # The sparklines draw their last readings, a span of the advisor's own.
    assert len(s.view_state().rx_series[0]) == SPARK_SAMPLES


def test_findings_are_sorted_worst_first_keeping_the_advisors_order_within_a_severity():
    found = [Finding("a", "info", "x", "", ""), Finding("b", "critical", "x", "", ""),
             Finding("c", "info", "x", "", ""), Finding("d", "warning", "x", "", "")]
    s = make_session(advisor=lambda h: found)
    s.take(make_snapshot(0))
    assert [f.rule for f in s.findings] == ["b", "d", "a", "c"]


def test_a_broken_advisor_is_a_notice_and_clears_when_it_recovers():
    broken = [True]

    def advisor(history):
        if broken[0]:
            raise ZeroDivisionError("rule bug")
        return []

    s = make_session(advisor=advisor)
    s.take(make_snapshot(0))
    assert s.findings == () and "advisor failed: ZeroDivisionError: rule bug" in s.view_state().notices
    broken[0] = False
    s.take(make_snapshot(1))
    assert not any("advisor failed" in n for n in s.view_state().notices)


def test_source_errors_are_a_notice_until_the_next_snapshot():
    s = make_session()
    s.source_failed("OSError: cannot read /proc/4242/maps")
    assert s.notices() == ("reading failed, still trying: OSError: cannot read /proc/4242/maps",)
    s.take(make_snapshot(0))
    assert s.notices() == ()


def test_notices_are_the_snapshots_then_the_sessions_each_once():
    s = make_session()
    snap = dataclasses.replace(make_snapshot(0), notices=("no NVML", "no NVML"))
    s.take(snap)
    s.source_ended(["recording ends early: x.jsonl:4: not JSON", 42])  # not text: ignored
    assert s.ended
    assert s.notices() == ("no NVML", "recording ends early: x.jsonl:4: not JSON",
                           "end of recording (1 snapshots shown); the last one stays on screen, q quits")


def test_sparkline_series_keep_the_last_60_readings_with_gaps_for_a_lost_gpu():
    s = make_session()
    for i in range(70):
        snap = make_snapshot(i)
        if i == 68:
            snap = dataclasses.replace(snap, gpus=(snap.gpus[0], dataclasses.replace(snap.gpus[1], lost=True)))
        s.take(snap)
    state = s.view_state()
    assert len(state.rx_series[0]) == SPARK_SAMPLES
    assert state.rx_series[0][-1] == make_snapshot(69).gpus[0].pcie.rx_bytes_per_s
    assert state.tx_series[1][-2] is None and state.tx_series[1][-1] == 0.5e9


def test_sparkline_series_of_a_gpu_missing_from_older_snapshots():
    one = make_snapshot(0)
    one = dataclasses.replace(one, gpus=one.gpus[:1])
    rx, tx = sparkline_series([one, make_snapshot(1)], [0, 1])
    assert rx[1] == (None, 12e9 + 7 * 0.2e9) and len(tx[0]) == 2


def test_live_pause_freezes_the_view_but_keeps_collecting_and_recording():
    rec = FakeRecorder()
    s = make_session(recorder_factory=lambda: rec)
    s.take(make_snapshot(0))
    s.toggle_recording()
    s.toggle_pause()
    for i in range(1, 4):
        s.take(make_snapshot(i))
    assert s.displayed.time == T0 and s.latest.time == T0 + 3
    assert [x.time for x in rec.written] == [T0, T0 + 1, T0 + 2, T0 + 3]
    s.toggle_pause()
    assert s.displayed is s.latest  # back to now at once


def test_the_first_snapshot_shows_even_while_paused():
    s = make_session()
    s.toggle_pause()
    s.take(make_snapshot(0))
    assert s.displayed is not None


def test_replay_speed_steps_through_the_speeds_and_sets_the_period():
    s = make_session(live=False, interval_s=2.0, replay_speeds=(0.5, 1, 2, 4), speed=1)
    assert s.step_speed(1) is None and s.speed == 2 and s.period_s() == 1.0
    for _ in range(5):
        s.step_speed(1)
    assert s.speed == 4
    for _ in range(5):
        s.step_speed(-1)
    assert s.speed == 0.5 and s.period_s() == 4.0


def test_speed_in_a_live_session_only_explains():
    s = make_session(interval_s=1.0)
    assert s.step_speed(1).text == "speed applies to replays only"
    assert s.speed == 1.0 and s.period_s() == 1.0


def test_next_gpu_cycles_and_a_gpu_that_left_is_clamped():
    s = make_session()
    assert s.next_gpu().severity == "warning"  # no snapshot, no GPUs
    s.take(make_snapshot(0))
    s.next_gpu()
    assert s.view_state().selected.index == 1
    s.next_gpu()
    assert s.selected_gpu == 0
    s.select_gpu(1)
    one = make_snapshot(1)
    s.take(dataclasses.replace(one, gpus=one.gpus[:1]))
    assert s.selected_gpu == 0


# --- recording -------------------------------------------------------------------------------------

def test_recording_starts_with_the_newest_snapshot_and_stops_with_a_count():
    rec = FakeRecorder("/tmp/rec.jsonl.gz")
    s = make_session(recorder_factory=lambda: rec)
    s.take(make_snapshot(0))
    assert s.toggle_recording().text == "recording to /tmp/rec.jsonl.gz"
    assert s.view_state().recording_path == "/tmp/rec.jsonl.gz"
    s.take(make_snapshot(1))
    note = s.toggle_recording()
    assert note.text == "recording saved: /tmp/rec.jsonl.gz (2 snapshots)" and rec.closed
    assert s.view_state().recording_path is None


def test_recording_unavailable_or_refused():
    assert make_session().toggle_recording().severity == "warning"

    def refuse():
        raise FileExistsError("pinmon-x.jsonl.gz already exists")

    note = make_session(recorder_factory=refuse).toggle_recording()
    assert note.severity == "error" and "already exists" in note.text


def test_a_failing_write_stops_the_recording_with_a_notice():
    class Full(FakeRecorder):
        def write(self, snapshot):
            if self.written:
                raise OSError("No space left on device")
            super().write(snapshot)

    rec = Full()
    s = make_session(recorder_factory=lambda: rec)
    s.take(make_snapshot(0))
    s.toggle_recording()
    s.take(make_snapshot(1))
    assert s.recorder is None and rec.closed
    assert "recording stopped: No space left on device" in s.notices()


# --- probes ----------------------------------------------------------------------------------------

def test_probe_refusals_say_why():
    assert make_session(live=False).probe_refusal().text == "probe not available in replay"
    s = make_session(probe_available=False, probe_unavailable_reason="CuPy is not installed")
    assert s.probe_refusal().text == "no probe: CuPy is not installed"
    assert s.view_state().probe.unavailable_reason == "CuPy is not installed"
    s = make_session()
    assert s.probe_refusal() is None
    s.begin_probe("sweep")
    assert s.probe_refusal().text == "a sweep probe is already running"


def test_a_probe_runs_on_the_selected_gpu_and_reports_progress():
    s = make_session()
    assert not s.probe_step(1, 4, "late")  # no probe running: a stray message changes nothing
    s.take(make_snapshot(0))
    s.select_gpu(1)
    assert s.begin_probe("quick") == 1
    assert s.probe_step(2, 4, "h2d pinned")
    view = s.view_state().probe
    assert (view.running_kind, view.progress_done, view.progress_total, view.progress_label) == \
        ("quick", 2, 4, "h2d pinned")
    s.finish_probe(make_probe_result(), 1.5)
    view = s.view_state().probe
    assert view.running_kind is None and view.count == 1 and view.probe_seconds == 1.5


def test_automatic_probes_keep_the_duty_cycle_under_one_percent():
    clock = StepClock(100.0)
    s = make_session(probe_every_s=60.0, clock=clock)
    clock.advance(5)
    assert s.auto_probe_due()  # the first one always runs
    s.probe_count, s.probe_seconds = 1, 0.9  # a slow box: 0.9 s per quick probe
    clock.advance(60)
    assert not s.auto_probe_due()  # 0.9 s in 65 s is 1.4%: skipped
    clock.advance(60)
    assert s.auto_probe_due()  # 0.9 s in 125 s is 0.7%: runs


def test_no_automatic_probe_while_one_runs_or_paused_or_without_a_runner():
    s = make_session()
    s.begin_probe("quick")
    assert not s.auto_probe_due()
    s = make_session()
    s.toggle_pause()
    assert not s.auto_probe_due()
    assert not make_session(probe_available=False).auto_probe_due()


def test_auto_probe_timing():
    assert make_session(probe_every_s=60.0).auto_probe_timing() == (FIRST_PROBE_DELAY_S, 60.0)
    assert make_session(probe_every_s=2.0).auto_probe_timing() == (2.0, 2.0)
    assert make_session(probe_every_s=None).auto_probe_timing() is None
    assert make_session(live=False).auto_probe_timing() is None
    assert make_session(probe_available=False).auto_probe_timing() is None


def test_a_probe_result_joins_later_snapshots_with_the_link_traffic_it_ran_under():
    # The fake probe ran T0 .. T0+1.5 on GPU 0; the readings at T0+1 and T0+2 cover it.
    rec = FakeRecorder()
    s = make_session(recorder_factory=lambda: rec)
    s.take(make_snapshot(0))
    s.finish_probe(make_probe_result(), 1.5)
    assert s.view_state().probe.link_pending
    s.toggle_recording()
    s.take(make_snapshot(1))
    assert s.view_state().probe.link_pending  # T0+1 does not reach the probe's end
    s.take(make_snapshot(2))
    probe = s.view_state().probe
    assert not probe.link_pending and probe.latest.link_window_s == pytest.approx(2.0)
    assert probe.latest.link_rx_bytes_per_s == pytest.approx(45.5e9)
    assert rec.written[-1].probe is probe.latest and s.history[-1].probe is probe.latest


def test_a_new_probe_joins_the_pending_one_first():
    s = make_session()
    s.take(make_snapshot(0))
    s.take(make_snapshot(1))
    s.finish_probe(make_probe_result(), 1.5)
    s.begin_probe("quick")  # later readings would count the new probe's copies: join with what there is
    assert s.probe_latest.link_window_s == pytest.approx(1.0)


def test_a_failed_probe_is_shown_but_never_joins_snapshots():
    s = make_session()
    s.take(make_snapshot(0))
    failed = dataclasses.replace(make_probe_result(), status="unavailable", reason="cudaErrorNoDevice")
    s.finish_probe(failed, 0.1)
    s.take(make_snapshot(1))
    assert s.view_state().probe.latest is failed and s.history[-1].probe is None


def test_a_replay_keeps_its_recorded_probe():
    recorded = make_probe_result(t=T0 - 100)
    s = make_session(live=False)
    s.finish_probe(make_probe_result(), 1.0)  # cannot happen in a replay, and even so never joins
    s.take(make_snapshot(0, source="replay", probe=recorded))
    assert s.history[-1].probe is recorded


def test_the_probe_duty_cycle_counts_from_the_start():
    clock = StepClock(10.0)
    s = make_session(clock=clock)
    clock.advance(100)
    s.start()
    clock.advance(50)
    s.finish_probe(make_probe_result(), 1.0)
    assert s.view_state().probe.duty_cycle == pytest.approx(0.02)


def test_the_view_state_carries_the_advisors_thresholds():
    t = Thresholds(link_degraded_traffic_bytes_per_s=5e9)
    assert make_session(thresholds=t).view_state().thresholds is t
    assert make_session().view_state().thresholds == Thresholds()
