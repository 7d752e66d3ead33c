"""Background probes: results reach the live collector, failures are counted, a missing CuPy is one line."""
import threading

from pinmon.cli.commands import export as export_cmd
from pinmon.cli.config import Config
from pinmon.cli.options import Settings
from pinmon.export import ExportState
from pinmon.export.background_probe import ProbeLoop
from pinmon.model import ProbeResult
from tests import factories as make


class FakeCollector:
    def __init__(self):
        self.results = []
        self.got = threading.Event()

    def set_probe(self, result):
        self.results.append(result)
        self.got.set()


def test_probe_results_reach_the_collector_with_the_latest_snapshot():
    seen = []
    state = ExportState()
    state.add_snapshot(make.full_snapshot(time=5.0))

    def runner(snap, cancel):
        seen.append((snap.time, cancel.is_set()))
        return ProbeResult(time=6.0, gpu_index=0)

    col = FakeCollector()
    loop = ProbeLoop(runner, col, state, every_s=60, first_after_s=0.01).start()
    assert col.got.wait(5)
    loop.stop()
    assert seen == [(5.0, False)] and col.results[0].time == 6.0
    assert state.view().collection_errors["probe"] == 0


def test_unavailable_and_raising_probes_are_counted():
    state = ExportState()
    results = iter([ProbeResult(time=1.0, status="unavailable", reason="probe unavailable: no GPU"),
                    RuntimeError("engine bug")])
    errors = []
    done = threading.Event()

    def runner(snap, cancel):
        item = next(results, None)
        if item is None:
            done.set()
            return None
        if isinstance(item, Exception):
            raise item
        return item

    loop = ProbeLoop(runner, FakeCollector(), state, every_s=0.01, first_after_s=0.01,
                     on_error=lambda stage, e: errors.append(stage)).start()
    assert done.wait(5)
    loop.stop()
    assert state.view().collection_errors["probe"] == 2
    assert errors == ["probe"]


def test_stop_cancels_a_running_probe():
    started = threading.Event()

    def runner(snap, cancel):
        started.set()
        cancel.wait(10)  # the engine checks cancel between measurements
        return None

    loop = ProbeLoop(runner, FakeCollector(), ExportState(), every_s=60, first_after_s=0).start()
    assert started.wait(5)
    loop.stop(timeout=5)
    assert not loop._thread.is_alive()


def test_no_cupy_is_one_line_and_no_probe_thread(monkeypatch, capsys):
    import pinmon.probe

    monkeypatch.setattr(pinmon.probe, "probe_available", lambda: (False, "probe unavailable: CuPy is not installed"))
    settings = Settings(config=Config(), interval_s=1.0, max_pinned_bytes=None, probe_every_s=5.0, app_probes="auto")
    assert export_cmd._start_prober(settings, FakeCollector(), ExportState()) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CuPy is not installed" in err and "serving without probes" in err


def test_probe_runner_passes_the_caps_and_the_link(monkeypatch):
    import pinmon.probe

    calls = []
    monkeypatch.setattr(pinmon.probe, "run_probe", lambda kind, **kw: calls.append((kind, kw)) or "result")
    runner = export_cmd._probe_runner(123 << 20)
    cancel = threading.Event()
    assert runner(make.full_snapshot(), cancel) == "result"
    kind, kw = calls[0]
    assert kind == "quick" and kw["max_pinned_bytes"] == 123 << 20 and kw["cancel"] is cancel
    assert kw["link_theoretical_bytes_per_s"] == 63.0e9 and kw["effective_mem_limit_bytes"] == 96 << 30


def test_a_source_that_takes_no_results_gets_no_prober(monkeypatch):
    import pinmon.probe

    monkeypatch.setattr(pinmon.probe, "probe_available", lambda: (True, ""))
    monkeypatch.setattr(pinmon.probe, "run_probe", lambda kind, **kw: None)

    class Recording:  # a Source without set_probe: nowhere for a result to go
        live = False

        def snapshot(self):
            return None

        def close(self):
            pass

    settings = Settings(config=Config(), interval_s=1.0, max_pinned_bytes=None, probe_every_s=5.0, app_probes="auto")
    loop = export_cmd._start_prober(settings, Recording(), ExportState())
    if loop is not None:
        loop.stop()
    assert loop is None
