"""SVG snapshots of the app at 80x24 and 160x48 on fixed data.

No worker runs: snapshots go in through ``apply_snapshot``, probe results through
``apply_probe_result``, the clock is a ``StepClock``, and times print in UTC, so every run draws
the same screen. Refresh the baselines with ``pytest tests/tui --snapshot-update`` after a
deliberate change, and look at them before committing.
"""
from __future__ import annotations

import pytest

from pinmon.tui.app import PinmonApp
from pinmon.tui.widgets.processes import FilterInput

from .fakes import FakeProbeRunner, FakeSource, NoGpuSource, fake_advisor, make_probe_result, no_findings
from .util import StepClock

SMALL = (80, 24)
LARGE = (160, 48)
SAMPLES = 60  # a full sparkline


def build(source=None, advisor=fake_advisor, runner="fake", probe=False, n=SAMPLES, **kw):
    """An app and the run_before that fills it: ``n`` snapshots, ten minutes on the clock."""
    clock = StepClock()
    source = source or FakeSource()
    app = PinmonApp(source, advisor, start_polling=False, probe_every_s=None, clock=clock,
                    probe_runner=FakeProbeRunner() if runner == "fake" else None,
                    probe_unavailable_reason=None if runner == "fake" else runner, **kw)

    async def run_before(pilot):
        for _ in range(n):
            app.apply_snapshot(source.snapshot())
        clock.advance(600)
        if probe:
            app.apply_probe_result(make_probe_result("sweep"), 1.8)
        app.refresh_views()
        await pilot.pause()

    return app, run_before


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
@pytest.mark.parametrize("tab", ["1", "2", "4", "5", "6"],
                         ids=["overview", "gpus", "processes", "probe", "advisor"])
def test_tabs(snap_compare, tab, size):
    app, run_before = build(probe=True)
    assert snap_compare(app, press=[tab], terminal_size=size, run_before=run_before)


def test_memory_80x24(snap_compare):
    app, run_before = build()
    assert snap_compare(app, press=["3"], terminal_size=SMALL, run_before=run_before)


def test_second_gpu_selected_80x24(snap_compare):
    app, run_before = build()
    assert snap_compare(app, press=["g"], terminal_size=SMALL, run_before=run_before)


def test_process_filter_80x24(snap_compare):
    app, run_before = build()

    async def before(pilot):
        await run_before(pilot)
        app.query_one(FilterInput).cursor_blink = False  # a blinking cursor would flip the picture

    assert snap_compare(app, press=["slash", "a", "l", "i"], terminal_size=SMALL, run_before=before)


def test_help_80x24(snap_compare):
    app, run_before = build()
    assert snap_compare(app, press=["question_mark"], terminal_size=SMALL, run_before=run_before)


def test_finding_detail_80x24(snap_compare):
    app, run_before = build()
    assert snap_compare(app, press=["6", "enter"], terminal_size=SMALL, run_before=run_before)


def test_no_findings_80x24(snap_compare):
    app, run_before = build(advisor=no_findings)
    assert snap_compare(app, press=["1"], terminal_size=SMALL, run_before=run_before)


def test_no_gpu_80x24(snap_compare):
    app, run_before = build(NoGpuSource(), runner="CuPy is not installed", n=3)
    assert snap_compare(app, press=["1"], terminal_size=SMALL, run_before=run_before)


def test_probe_unavailable_80x24(snap_compare):
    app, run_before = build(runner="no CUDA device visible to CuPy (cudaErrorNoDevice)")
    assert snap_compare(app, press=["5"], terminal_size=SMALL, run_before=run_before)


def test_probe_running_80x24(snap_compare):
    app, run_before = build()

    async def before(pilot):
        await run_before(pilot)
        # The progress a running probe reports, set directly: no thread, so no race with the picture.
        app.session.probe_running = "sweep"
        app.session.probe_progress = (3, 8, "h2d pageable 16.0 MiB")
        app.refresh_views()

    assert snap_compare(app, press=["5"], terminal_size=SMALL, run_before=before)


def test_replay_paused_with_recorded_probe_80x24(snap_compare):
    source = FakeSource(live=False, probe_in_snapshots=True)
    app, run_before = build(source, runner="unused", speed=4)
    assert snap_compare(app, press=["space", "5"], terminal_size=SMALL, run_before=run_before)


def test_replay_ended_160x48(snap_compare):
    source = FakeSource(live=False, n=SAMPLES)

    app, run_before = build(source, runner="unused")

    async def before(pilot):
        await run_before(pilot)
        from pinmon.tui.app import SourceEnded
        app.on_source_ended(SourceEnded())

    assert snap_compare(app, terminal_size=LARGE, run_before=before)


def test_recording_80x24(snap_compare):
    from .fakes import FakeRecorder

    app, run_before = build(recorder_factory=lambda: FakeRecorder("./pinmon-20260528-202640.jsonl.gz"))

    async def before(pilot):
        await run_before(pilot)
        app.action_record()
        app.clear_notifications()

    assert snap_compare(app, terminal_size=SMALL, run_before=before)


# --- the kernel's pinned count, NUMA nodes, a traced process in full -----------------------------

def build_kernel(**kw):
    """A two-node host whose kernel counts pinned pages, with a process traced with CUPTI; the real
    advisor, and the probe taken before the snapshots, so they carry it and the rules see it."""
    from pinmon.advise import advise

    from .fakes import KernelSource

    clock = StepClock()
    source = KernelSource(nodes=2, **kw)
    app = PinmonApp(source, advise, start_polling=False, probe_every_s=None, clock=clock,
                    probe_runner=FakeProbeRunner())

    async def run_before(pilot):
        app.apply_probe_result(make_probe_result(), 1.5)
        for _ in range(SAMPLES):
            app.apply_snapshot(source.snapshot())
        clock.advance(600)
        app.refresh_views()
        await pilot.pause()

    return app, run_before


def test_memory_kernel_count_two_nodes_80x24(snap_compare):
    from .fakes import GIB

    app, run_before = build_kernel(unattributed=300 * GIB)
    assert snap_compare(app, press=["3"], terminal_size=SMALL, run_before=run_before)


def test_processes_node_column_160x48(snap_compare):
    app, run_before = build_kernel()
    assert snap_compare(app, press=["4"], terminal_size=LARGE, run_before=run_before)


def test_traced_process_detail_80x24(snap_compare):
    app, run_before = build_kernel()
    # Rows by pinned bytes: 4242, 5151, 6060, then 8080, the process traced with CUPTI.
    assert snap_compare(app, press=["4", "down", "down", "down", "enter"], terminal_size=SMALL,
                        run_before=run_before)


def groups_app():
    """The box in groups, judged by the real advisor: CRIT and WARN are what `pinmon check` says."""
    from pinmon.advise import advise

    from .fakes import GroupsSource

    return build(GroupsSource(kill_at=SAMPLES // 2), advisor=advise)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "160x48"])
def test_containers(snap_compare, size):
    app, run_before = groups_app()
    assert snap_compare(app, press=["7"], terminal_size=size, run_before=run_before)


def test_group_detail_80x24(snap_compare):
    app, run_before = groups_app()
    assert snap_compare(app, press=["7", "enter"], terminal_size=SMALL, run_before=run_before)


def test_processes_group_column_160x48(snap_compare):
    app, run_before = groups_app()
    assert snap_compare(app, press=["4"], terminal_size=LARGE, run_before=run_before)


def test_too_small_40x12(snap_compare):
    app, run_before = build()
    assert snap_compare(app, terminal_size=(40, 12), run_before=run_before)
