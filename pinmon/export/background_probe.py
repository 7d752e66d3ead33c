"""Background quick probes for the exporter (``--probe-every``): results join the live snapshots.

The probe engine owns every CUDA call and its own caps (pinned bytes, time budget); this thread only
schedules it and hands the result to the live collector (``set_probe``), so the probe reaches the
advisor and the metrics through the snapshot like everything else (which result the snapshots carry
is ``pinmon.model.probe_join``'s rule: a probe that could not measure leaves the last measurement in place).
A probe that raises or could not measure is counted as a ``probe`` collection error.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ..model import ProbeResult, Snapshot
from .state import ExportState

# What the loop runs: (the latest snapshot or None, an event set to cancel) -> the probe's result.
ProbeRunner = Callable[[Snapshot | None, threading.Event], ProbeResult | None]


@runtime_checkable
class ProbeTarget(Protocol):
    """Where the results go: the live collector, which joins them to its snapshots."""

    def set_probe(self, result: ProbeResult | None) -> None: ...


class ProbeLoop:
    def __init__(self, runner: ProbeRunner, collector: ProbeTarget, state: ExportState, every_s: float,
                 first_after_s: float = 2.0, on_error: Callable[[str, BaseException], None] | None = None) -> None:
        self.runner = runner
        self.collector = collector
        self.state = state
        self.every_s = every_s
        # A short delay first, so the link rate of a first snapshot can annotate the result.
        self.first_after_s = first_after_s
        self.on_error = on_error
        self._stop = threading.Event()
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._reported = False

    def _run(self) -> None:
        wait = self.first_after_s
        while not self._stop.wait(wait):
            try:
                result = self.runner(self.state.latest(), self._cancel)
            except Exception as e:  # the engine should not raise; if it does, keep serving
                self.state.count_error("probe")
                if not self._reported and self.on_error is not None:
                    self._reported = True
                    self.on_error("probe", e)
            else:
                if result is not None and result.status != "ok":
                    self.state.count_error("probe")
                self.collector.set_probe(result)
            wait = self.every_s

    def start(self) -> ProbeLoop:
        self._thread = threading.Thread(target=self._run, name="pinmon-export-probe", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        self._cancel.set()  # the engine stops between measurements and frees its buffers
        if self._thread is not None:
            self._thread.join(timeout)
