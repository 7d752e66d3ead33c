"""A monitoring session without Textual: what the terminal app holds besides its widgets.

The session owns the advisor's snapshot history (``advise.history``, sized in time from the
thresholds, as ``pinmon replay`` and the exporter size theirs), calls the advisor, keeps the series
the sparklines draw,
joins probe results and the link traffic read while they ran (``probe_link``), writes the
recording, decides when an automatic probe may run (the duty cycle), and keeps the attach key's
window (``attach.py``) and how much of each GPU's link the measured copies explain. The app feeds it
snapshots, probe results and the user's keys, and draws the ``ViewState`` it returns; the app's
threads and timers run what the session decides. Methods that have something to tell the user
return a ``Note`` the app shows as a pop-up.

Everything here runs on the app's UI thread: a single owner of the history needs no locks. The
advisor is pure and fast by contract, and the recorder writes one line per snapshot. The poll
thread only reads ``period_s()`` and ``paused``.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from ...advise.history import AdvisorHistory
from ...advise.thresholds import Thresholds
from ...limits import DEFAULT_ATTACH_WINDOW_S
from ...model import SEVERITY_RANK, Finding, ProbeResult, Snapshot
from ...model.kinds import ProbeKind
from ...model.probe_join import with_probe
from ...model.traffic import TrafficExplained, explain_traffic
from .attach import AttachKey
from .format import SPARK_SAMPLES
from .history import GraphHistory, History
from .note import Note
from .shared_link import join_link, link_join_due
from .state import ProbeView, ViewState

# A first automatic probe soon after start, so the Probe tab has numbers without waiting a full period.
FIRST_PROBE_DELAY_S = 5.0
# Automatic probes are skipped while probing (automatic or asked for) exceeds this share of wall time.
AUTO_PROBE_DUTY_LIMIT = 0.01


class Recorder(Protocol):
    path: str

    def write(self, snapshot: Snapshot) -> None: ...

    def close(self) -> None: ...


class Session:
    def __init__(self, advisor: Callable[[Sequence[Snapshot]], list[Finding]], *,
                 live: bool = True,
                 interval_s: float = 1.0,
                 probe_available: bool = False,
                 probe_unavailable_reason: str | None = "probe engine not available",
                 probe_every_s: float | None = 60.0,
                 recorder_factory: Callable[[], Recorder] | None = None,
                 replay_speeds: Sequence[float] = (0.5, 1, 2, 4, 8, 16),
                 speed: float = 1.0,
                 clock: Callable[[], float] = time.monotonic,
                 auto_probe_duty_limit: float = AUTO_PROBE_DUTY_LIMIT,
                 thresholds: Thresholds | None = None,
                 attach_available: bool = False,
                 attach_unavailable_reason: str | None = "attach is not available here",
                 attach_all: bool = False,
                 attach_window_s: float = DEFAULT_ATTACH_WINDOW_S):
        self.advisor = advisor
        self.live = live
        self.interval_s = float(interval_s)
        self.probe_available = probe_available
        self.probe_unavailable_reason = None if probe_available else (
            probe_unavailable_reason or "probe engine not available")
        self.probe_every_s = probe_every_s
        self.recorder_factory = recorder_factory
        self.replay_speeds = sorted(set(float(s) for s in replay_speeds) | {float(speed)})
        self.speed = float(speed)
        self.clock = clock
        self.auto_probe_duty_limit = auto_probe_duty_limit
        # What the views compare figures against where a rule's threshold decides how they look.
        self.thresholds = thresholds if thresholds is not None else Thresholds()

        # What the advisor reads (and a probe's link traffic is joined from): as long in time as
        # the rules look back. The sparklines draw their last readings whatever the interval.
        self.history = AdvisorHistory.for_thresholds(self.thresholds)
        self._recent: deque[Snapshot] = deque(maxlen=SPARK_SAMPLES)
        self.latest: Snapshot | None = None  # the newest snapshot taken
        self.displayed: Snapshot | None = None  # the one on screen (older while paused)
        self.findings: tuple[Finding, ...] = ()
        self.paused = False
        self.ended = False
        self.selected_gpu = 0  # position in the displayed snapshot's GPUs
        self.recorder: Recorder | None = None
        self._series: tuple[dict, dict] = ({}, {})
        # The graphs' readings, every snapshot taken; frozen for the views at each one shown.
        self._history = History(self.interval_s)
        self._graphs = GraphHistory(interval_s=self.interval_s)
        self._notices: dict[str, str] = {}

        self.probe_running: ProbeKind | None = None
        self.probe_progress: tuple[float, float | None, str] = (0.0, None, "")
        self.probe_latest: ProbeResult | None = None
        # An ok result waiting for the reading that covers its end, to get its link traffic.
        self._probe_link_pending: ProbeResult | None = None
        self._probe_latest_ok: ProbeResult | None = None
        self._probe_latest_sweep: ProbeResult | None = None
        self.probe_seconds = 0.0
        self.probe_count = 0
        self.started_at = clock()

        # The attach key (one window on one process) and --attach (every CUDA process, always).
        self.attach = AttachKey(live=live, every_process=attach_all, window_s=attach_window_s, clock=clock,
                                unavailable_reason=None if attach_available else (
                                    attach_unavailable_reason or "attach is not available here"))
        self.traffic: TrafficExplained | None = None  # the displayed snapshot's

    def start(self) -> None:
        """The session's clock starts: the probe duty cycle counts from here."""
        self.started_at = self.clock()

    # --- snapshots ---------------------------------------------------------------------------

    def take(self, snapshot: Snapshot) -> None:
        """The one way a snapshot enters: probe join, history, recording, and (unless paused) advice."""
        pending = self._probe_link_pending
        if pending is not None and link_join_due(pending, snapshot):
            self._join_probe_link([*self.history, snapshot])
        if self.live:
            # Probe results join the snapshot, so the advisor and a recording see them too.
            snapshot = with_probe(snapshot, self._probe_latest_ok)
        self.history.append(snapshot)
        self._recent.append(snapshot)
        self._history.add(snapshot)
        self.latest = snapshot
        self._notices.pop("source", None)
        if self.recorder is not None:
            try:
                self.recorder.write(snapshot)
            except Exception as e:
                self._notices["record"] = f"recording stopped: {e}"
                self.stop_recording(quiet=True)
        # Live pause freezes the view only: collection and recording go on, so there is no hole.
        if not self.paused or self.displayed is None:
            self._show(snapshot)

    def source_failed(self, error: str) -> None:
        self._notices["source"] = f"reading failed, still trying: {error}"

    def source_ended(self, source_notices: Iterable[object] = ()) -> None:
        """The recording has no more snapshots: the last one stays on screen."""
        self.ended = True
        # The source's own word first ("recording ends early"): the bar shows the first notice,
        # and the header already says END OF RECORDING.
        for i, n in enumerate(n for n in source_notices if isinstance(n, str)):
            self._notices[f"end-{i}"] = n
        self._notices["end"] = (f"end of recording ({self.history.taken} snapshots shown);"
                                " the last one stays on screen, q quits")

    def _show(self, snapshot: Snapshot) -> None:
        self.displayed = snapshot
        self.findings = self._advise()
        gpus = snapshot.gpus
        if gpus and self.selected_gpu >= len(gpus):
            self.selected_gpu = len(gpus) - 1
        self._series = sparkline_series(self._recent, [g.index for g in gpus])
        self._graphs = self._history.frozen([g.index for g in gpus])
        self.traffic = explain_traffic(snapshot)

    def _advise(self) -> tuple[Finding, ...]:
        try:
            found = list(self.advisor(self.history.snapshots()))
        except Exception as e:  # one broken rule must not take the monitor down
            self._notices["advisor"] = f"advisor failed: {type(e).__name__}: {e}"
            return ()
        self._notices.pop("advisor", None)
        # The advisor sorts worst first already; a stable sort keeps its order within a severity.
        return tuple(sorted(found, key=lambda f: -SEVERITY_RANK.get(f.severity, 0)))

    # --- what the views draw -----------------------------------------------------------------

    def notices(self) -> tuple[str, ...]:
        """The displayed snapshot's notices, then the session's own, each once."""
        notices = list(self.displayed.notices) if self.displayed is not None else []
        notices += self._notices.values()
        return tuple(dict.fromkeys(notices))

    def view_state(self) -> ViewState:
        done, total, label = self.probe_progress
        probe = ProbeView(unavailable_reason=self.probe_unavailable_reason, live=self.live,
                          running_kind=self.probe_running, progress_done=done, progress_total=total,
                          progress_label=label, latest=self.probe_latest, latest_sweep=self._probe_latest_sweep,
                          probe_seconds=self.probe_seconds, wall_seconds=max(0.0, self.clock() - self.started_at),
                          count=self.probe_count, link_pending=self._probe_link_pending is not None)
        return ViewState(snapshot=self.displayed, findings=self.findings, live=self.live, paused=self.paused,
                         speed=self.speed, interval_s=self.interval_s,
                         recording_path=getattr(self.recorder, "path", None) if self.recorder else None,
                         ended=self.ended, selected_gpu=self.selected_gpu, rx_series=self._series[0],
                         tx_series=self._series[1], graphs=self._graphs, notices=self.notices(), probe=probe,
                         thresholds=self.thresholds, traffic=self.traffic, attach_status=self.attach.status(),
                         attach_all=self.attach.every_process and self.live, attach_usable=self.attach.usable)

    # --- the user's keys ---------------------------------------------------------------------

    def period_s(self) -> float:
        """Seconds between two reads of the source: a replay runs at its speed."""
        return self.interval_s if self.live else self.interval_s / self.speed

    def toggle_pause(self) -> None:
        self.paused = not self.paused
        if not self.paused and self.live and self.latest is not None and self.latest is not self.displayed:
            self._show(self.latest)  # back to now: the newest snapshot taken while paused

    def step_speed(self, step: int) -> Note | None:
        """The next (``step`` 1) or previous (-1) replay speed."""
        if self.live:
            return Note("speed applies to replays only")
        speeds = self.replay_speeds
        i = min(range(len(speeds)), key=lambda k: abs(speeds[k] - self.speed))
        self.speed = speeds[max(0, min(len(speeds) - 1, i + step))]
        return None

    def gpu_count(self) -> int:
        return len(self.displayed.gpus) if self.displayed is not None else 0

    def select_gpu(self, position: int) -> None:
        self.selected_gpu = position

    def next_gpu(self) -> Note | None:
        count = self.gpu_count()
        if not count:
            return Note("no GPUs in this snapshot", "warning")
        self.selected_gpu = (self.selected_gpu + 1) % count
        return None

    # --- recording ---------------------------------------------------------------------------

    def toggle_recording(self) -> Note | None:
        """Start a recording (the newest snapshot first), or stop the one running."""
        if self.recorder is not None:
            return self.stop_recording(quiet=False)
        if self.recorder_factory is None:
            return Note("recording is not available here", "warning")
        try:
            self.recorder = self.recorder_factory()
        except Exception as e:  # e.g. the file exists (never overwritten) or the disk is read-only
            return Note(f"cannot record: {e}", "error", 8)
        self._notices.pop("record", None)
        if self.latest is not None:
            try:
                self.recorder.write(self.latest)  # the file is never empty, even if we stop at once
            except Exception as e:
                self._notices["record"] = f"recording stopped: {e}"
                self.stop_recording(quiet=True)
                return None  # the notice bar says why
        return Note(f"recording to {self.recorder.path}")

    def stop_recording(self, quiet: bool) -> Note | None:
        """Close the recording, if one runs; ``quiet``: nothing to tell the user."""
        rec, self.recorder = self.recorder, None
        if rec is None:
            return None
        try:
            rec.close()
        except Exception as e:
            self._notices["record"] = f"closing the recording failed: {e}"
        if quiet:
            return None
        count = getattr(rec, "count", None)
        return Note(f"recording saved: {rec.path}" + (f" ({count} snapshots)" if count is not None else ""))

    # --- probes ------------------------------------------------------------------------------

    def auto_probe_timing(self) -> tuple[float, float] | None:
        """(seconds to the first automatic probe, seconds between them), None: no automatic probes."""
        if not (self.live and self.probe_available and self.probe_every_s):
            return None
        return min(FIRST_PROBE_DELAY_S, self.probe_every_s), self.probe_every_s

    def probe_refusal(self) -> Note | None:
        """Why a probe the user asks for cannot start now; None: it can."""
        if not self.live:
            return Note("probe not available in replay", "warning")
        if not self.probe_available:
            return Note(f"no probe: {self.probe_unavailable_reason}", "warning", 6)
        if self.probe_running is not None:
            return Note(f"a {self.probe_running} probe is already running")
        return None

    def auto_probe_due(self) -> bool:
        """Whether the automatic probe of this period runs: none while one runs or the view is
        paused, and none while probing has taken more than the duty limit of the session's time."""
        if self.probe_running is not None or self.paused or not self.probe_available:
            return False
        elapsed = self.clock() - self.started_at
        # The first one always runs; pinmon's own load stays under the limit after it.
        return not self.probe_count or self.probe_seconds <= self.auto_probe_duty_limit * elapsed

    def begin_probe(self, kind: ProbeKind) -> int:
        """A probe of ``kind`` starts: the index of the GPU it measures (the selected one)."""
        gpus = self.displayed.gpus if self.displayed is not None else ()
        gpu_index = gpus[min(self.selected_gpu, len(gpus) - 1)].index if gpus else 0
        if self._probe_link_pending is not None:
            self._join_probe_link(self.history)  # later readings would count the new probe's copies too
        self.probe_running = kind
        self.probe_progress = (0.0, None, "starting")
        return gpu_index

    def probe_step(self, done: float, total: float | None, label: str) -> bool:
        """The running probe's progress; False where no probe runs (a late message)."""
        if self.probe_running is None:
            return False
        self.probe_progress = (done, total, label)
        return True

    def finish_probe(self, result: ProbeResult, seconds: float) -> None:
        """Keep a probe result and its cost (``seconds`` of probing)."""
        self.probe_running = None
        self.probe_progress = (0.0, None, "")
        self.probe_latest = result
        self.probe_count += 1
        self.probe_seconds += seconds
        if result.status == "ok":
            self._probe_latest_ok = result
            if result.kind == "sweep":
                self._probe_latest_sweep = result
            if self.live and result.link_window_s is None:
                self._probe_link_pending = result
                if self.history and link_join_due(result, self.history[-1]):
                    self._join_probe_link(self.history)

    def _join_probe_link(self, snapshots: Iterable[Snapshot]) -> None:
        """Give the pending probe result the link traffic the collector read while it ran, wherever
        the session holds that result (so later snapshots and recordings carry it too)."""
        pending, self._probe_link_pending = self._probe_link_pending, None
        if pending is None:
            return
        joined = join_link(pending, snapshots, self.interval_s)
        if self.probe_latest is pending:
            self.probe_latest = joined
        if self._probe_latest_ok is pending:
            self._probe_latest_ok = joined
        if self._probe_latest_sweep is pending:
            self._probe_latest_sweep = joined


def sparkline_series(window: Sequence[Snapshot], indices: Sequence[int]) -> tuple[dict, dict]:
    """({GPU index: RX readings}, {GPU index: TX readings}) over ``window``, oldest first; None
    where a snapshot has no reading of that GPU (absent or lost)."""
    rx: dict[int, list] = {i: [] for i in indices}
    tx: dict[int, list] = {i: [] for i in indices}
    for s in window:
        by_index = {g.index: g for g in s.gpus}
        for i in rx:
            g = by_index.get(i)
            rx[i].append(None if g is None or g.lost else g.pcie.rx_bytes_per_s)
            tx[i].append(None if g is None or g.lost else g.pcie.tx_bytes_per_s)
    return {i: tuple(v) for i, v in rx.items()}, {i: tuple(v) for i, v in tx.items()}
