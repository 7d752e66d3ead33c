"""The background thread that keeps the exporter's state fresh: source.snapshot() -> advisor -> state.

A live source is polled every ``interval_s``. The advisor reads ``advise.history.AdvisorHistory``,
sized in time from the thresholds as the terminal app's and ``pinmon replay``'s are, so the exporter
reaches the findings they reach from the same snapshots. A replay is played at the recording's own pace
(the time between its snapshots, divided by ``speed``); when it ends, its last snapshot stays served
(``pinmon_replay_finished`` 1): holding keeps the byte counters monotonic, where looping would
restart them and send the recording's clock backwards.

A failing snapshot or advisor run is counted (``pinmon_collection_errors_total{stage}``) and the
last good state stays served; the first failure of each stage is reported once through ``on_error``.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence

from ..advise.history import AdvisorHistory
from ..advise.thresholds import Thresholds
from ..model import Finding, Snapshot
from ..model.source import Source
from .state import ExportState

# The advisor: findings over a history of snapshots, oldest first.
Advisor = Callable[[Sequence[Snapshot]], Iterable[Finding]]
# A replay never waits longer than this between snapshots (a recording paused for an hour).
MAX_REPLAY_GAP_S = 60.0


class Refresher:
    def __init__(self, source: Source, state: ExportState, advisor: Advisor, interval_s: float = 1.0,
                 speed: float = 1.0, on_error: Callable[[str, BaseException], None] | None = None,
                 thresholds: Thresholds | None = None) -> None:
        """``thresholds``: the advisor's, which size its history (default thresholds if None)."""
        self.source = source
        self.state = state
        self.advisor = advisor
        self.interval_s = interval_s
        self.speed = speed
        self.on_error = on_error
        self.history = AdvisorHistory.for_thresholds(thresholds)
        self.finished = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reported: set[str] = set()

    # --- one step ------------------------------------------------------------------------------

    def _error(self, stage: str, exc: BaseException) -> None:
        self.state.count_error(stage)
        if stage not in self._reported and self.on_error is not None:
            self._reported.add(stage)
            self.on_error(stage, exc)

    def read(self) -> Snapshot | None:
        """The source's next snapshot; None when it is exhausted or failed (failure counted)."""
        try:
            snap = self.source.snapshot()
        except Exception as e:  # a live source that throws: serve the last good data, try again
            self._error("snapshot", e)
            return None
        if snap is None and not getattr(self.source, "live", True):
            self.state.finish_replay()
            self.finished.set()
        return snap

    def publish(self, snap: Snapshot, advise: bool = True) -> None:
        self.state.add_snapshot(snap)
        self.history.append(snap)
        if advise:
            self.advise()

    def advise(self) -> None:
        if not self.history:
            return
        try:
            self.state.set_findings(self.advisor(self.history.snapshots()))
        except Exception as e:  # keep the previous findings rather than none
            self._error("advise", e)

    def drain(self) -> None:
        """Read a finite source to its end without pacing (``--once`` on a replay), then advise."""
        while not self.finished.is_set():
            snap = self.read()
            if snap is None:
                if getattr(self.source, "live", True):
                    break
                continue
            self.publish(snap, advise=False)
        self.advise()

    # --- the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as e:  # a bug here must not leave a silent, stale exporter: say so, keep serving
            self._error("snapshot", e)
            self.finished.set()

    def _loop(self) -> None:
        live = getattr(self.source, "live", True)
        prev_time: float | None = None
        while not self._stop.is_set():
            started = time.monotonic()
            snap = self.read()
            if snap is None:
                if self.finished.is_set():
                    return
                self._stop.wait(self.interval_s)
                continue
            if not live and prev_time is not None:
                gap = snap.time - prev_time
                if not (0 <= gap <= MAX_REPLAY_GAP_S):
                    gap = getattr(self.source, "interval_s", self.interval_s)
                if self._stop.wait(gap / self.speed):
                    return
            prev_time = snap.time
            self.publish(snap)
            if live:
                self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def start(self) -> Refresher:
        self._thread = threading.Thread(target=self._run, name="pinmon-export-refresh", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
