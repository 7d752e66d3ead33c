"""The pinmon terminal app: polls a ``Source`` off the UI thread, advises, and renders ``ViewState``s.

Data flows one way: a thread worker calls ``source.snapshot()`` and posts the snapshot; the UI
thread owns the history, calls the advisor, joins probe results into snapshots, writes the
recording and hands one ``ViewState`` to every view. The advisor runs on the UI thread because it
is pure and fast by contract and because a single owner of the history needs no locks; the
recorder's one-line write also stays here for the same reason. Everything that can block (the
source, the probe) runs in threads.

The source, the advisor, the probe runner and the recorder are injected, so tests drive the app
with fakes and the app knows nothing of NVML, psutil or CuPy.
"""
from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections import deque
from functools import partial
from typing import Callable, Iterable, Optional, Protocol, Sequence

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Container, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, TabbedContent, TabPane, Tabs

from ..model import SEVERITY_RANK, Finding, ProbeResult, Snapshot
from ..probe_join import with_probe
from ..source import Source
from ..units import printable
from .format import SPARK_SAMPLES
from .probe_link import join_link, link_join_due
from .state import ProbeView, ViewState
from .widgets.base import View
from .widgets.findings import FindingsPanel
from .widgets.gpu_detail import GpuDetail
from .widgets.gpu_list import GpuList
from .widgets.gpu_row import GpuRow
from .widgets.gpu_summary import GpuSummary
from .widgets.header import StatusHeader
from .widgets.help_screen import HelpScreen
from .widgets.memory import MemoryPanel
from .widgets.notices import NoticeBar, NoticesScreen
from .widgets.probe import ProbePanel, ProbeSummary
from .widgets.processes import ProcessPanel
from .widgets.top_findings import TopFindings
from .widgets.top_processes import TopProcesses

# The advisor looks back ~10 minutes at 1 s; the sparklines need the last 60 on top of that.
ADVISOR_WINDOW = 600
HISTORY_LEN = ADVISOR_WINDOW + SPARK_SAMPLES
# A first automatic probe soon after start, so the Probe tab has numbers without waiting a full period.
FIRST_PROBE_DELAY_S = 5.0
# After SIGHUP, how long a clean exit may take before the process ends itself.
HANGUP_GRACE_S = 3.0
# Automatic probes are skipped while probing (automatic or asked for) exceeds this share of wall time.
AUTO_PROBE_DUTY_LIMIT = 0.01
# A pop-up's text: one line, this long at most (a toast is a third of the screen wide).
TOAST_CHARS = 240

TABS = (("overview", "1 Overview"), ("gpus", "2 GPUs"), ("memory", "3 Memory"),
        ("processes", "4 Processes"), ("probe", "5 Probe"), ("advisor", "6 Advisor"))


class Recorder(Protocol):
    path: str

    def write(self, snapshot: Snapshot) -> None: ...

    def close(self) -> None: ...


# --- messages from the worker threads --------------------------------------------------------------

class SnapshotReady(Message):
    def __init__(self, snapshot: Snapshot):
        super().__init__()
        self.snapshot = snapshot


class SourceFailed(Message):
    def __init__(self, error: str):
        super().__init__()
        self.error = error


class SourceEnded(Message):
    pass


class ProbeProgress(Message):
    def __init__(self, done: float, total: Optional[float], label: str):
        super().__init__()
        self.done, self.total, self.label = done, total, label


class ProbeFinished(Message):
    def __init__(self, result: ProbeResult, seconds: float):
        super().__init__()
        self.result, self.seconds = result, seconds


class PinmonApp(App[int]):
    CSS_PATH = "pinmon.tcss"
    TITLE = "pinmon"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]

    BINDINGS = [
        Binding("q", "quit", "Quit", tooltip="Quit pinmon (closes a recording in progress)"),
        Binding("question_mark,f1", "help", "Help", key_display="?"),
        Binding("p", "probe('quick')", "Probe", tooltip="Quick pinned vs pageable probe on the selected GPU"),
        Binding("s", "probe('sweep')", "Sweep", tooltip="Probe over a range of copy sizes"),
        Binding("g", "next_gpu", "GPU", tooltip="Select the next GPU"),
        Binding("slash", "filter", "Filter", key_display="/", tooltip="Filter processes by pid, name or user"),
        Binding("space", "pause", "Pause"),
        Binding("r", "record", "Rec", tooltip="Start or stop recording snapshots"),
        Binding("plus,equals_sign", "speed(1)", "Faster", key_display="+"),
        Binding("minus,underscore", "speed(-1)", "Slower", key_display="-"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("n", "notices", "Notices", show=False, tooltip="Every notice in full (the bar shows the first)"),
        # Tried when the visible binding for the same key is disabled (check_action), so the key
        # still answers: p in a replay says why there is no probe, + live says why there is no speed.
        Binding("p,s", "no_probe", show=False),
        Binding("plus,equals_sign,minus,underscore", "no_speed", show=False),
        *(Binding(str(n), f"tab('{tab_id}')", label.split(" ", 1)[1], show=False)
          for n, (tab_id, label) in enumerate(TABS, start=1)),
    ]

    def __init__(self, source: Source,
                 advisor: Callable[[Sequence[Snapshot]], list[Finding]],
                 interval_s: float = 1.0,
                 probe_runner: Optional[Callable[..., ProbeResult]] = None,
                 probe_unavailable_reason: Optional[str] = "probe engine not available",
                 probe_every_s: Optional[float] = 60.0,
                 recorder_factory: Optional[Callable[[], Recorder]] = None,
                 replay_speeds: Sequence[float] = (0.5, 1, 2, 4, 8, 16),
                 speed: float = 1.0,
                 start_polling: bool = True,
                 clock: Callable[[], float] = time.monotonic,
                 install_signal_handlers: bool = False,
                 auto_probe_duty_limit: float = AUTO_PROBE_DUTY_LIMIT):
        super().__init__()
        self.source = source
        self.advisor = advisor
        self.live = bool(getattr(source, "live", True))
        self.interval_s = float(interval_s)
        self.probe_runner = probe_runner
        self.probe_unavailable_reason = (probe_unavailable_reason or "probe engine not available") \
            if probe_runner is None else None
        self.probe_every_s = probe_every_s
        self.recorder_factory = recorder_factory
        self.replay_speeds = sorted(set(float(s) for s in replay_speeds) | {float(speed)})
        self.speed = float(speed)
        self.start_polling = start_polling
        self._clock = clock
        self._install_signal_handlers = install_signal_handlers
        self.auto_probe_duty_limit = auto_probe_duty_limit
        self.hangup_watchdog: Optional[threading.Timer] = None

        self.history: deque[Snapshot] = deque(maxlen=HISTORY_LEN)
        self.latest: Optional[Snapshot] = None
        self.displayed: Optional[Snapshot] = None
        self.findings: tuple[Finding, ...] = ()
        self.paused = False
        self.ended = False
        self.selected_gpu = 0
        self.recorder: Optional[Recorder] = None
        self._series: tuple[dict, dict] = ({}, {})
        self._app_notices: dict[str, str] = {}
        self._views: list[View] = []
        self._main_screen: Optional[Screen] = None
        self._filter_on_activate = False

        self._stop = threading.Event()
        self._wake = threading.Event()
        self.poll_done = threading.Event()
        self.poll_done.set()  # nothing polls until on_mount starts it

        self.probe_running: Optional[str] = None
        self._probe_progress: tuple[float, Optional[float], str] = (0.0, None, "")
        self._probe_cancel = threading.Event()
        self.probe_done = threading.Event()
        self.probe_done.set()
        self.probe_latest: Optional[ProbeResult] = None
        # An ok result waiting for the reading that covers its end, to get its link traffic.
        self._probe_link_pending: Optional[ProbeResult] = None
        self._probe_latest_ok: Optional[ProbeResult] = None
        self._probe_latest_sweep: Optional[ProbeResult] = None
        self.probe_seconds = 0.0
        self.probe_count = 0
        self._started_at = clock()

    # --- layout ------------------------------------------------------------------------------

    def get_driver_class(self):
        """Textual's driver, or with ``PINMON_QUIET_INPUT=1`` the quiet input thread (``driver.py``),
        which builds on Textual internals: it is taken only where they are as expected."""
        stock = super().get_driver_class()
        from .driver_choice import choose_driver

        return choose_driver(stock)

    def compose(self) -> ComposeResult:
        yield StatusHeader(id="status")
        yield NoticeBar(id="notices")
        with TabbedContent(initial="overview", id="tabs"):
            with TabPane(TABS[0][1], id="overview"):
                with Container(id="overview-grid"):
                    with Vertical(id="ov-gpus", classes="panel") as box:
                        box.border_title = "GPUs"
                        yield GpuSummary(classes="narrow-only")
                        yield GpuList(classes="wide-only")
                    yield _titled(MemoryPanel(compact=True, id="ov-memory", classes="panel"),
                                  "Host memory (┃ = 50% of RAM)")
                    with Vertical(id="ov-findings", classes="panel") as box:
                        box.border_title = "Advisor (6: all findings)"
                        yield TopFindings(limit=3, classes="narrow-only")
                        yield TopFindings(limit=12, detailed=True, classes="wide-only")
                    with Vertical(id="ov-right"):
                        with Vertical(id="ov-processes", classes="panel") as box:
                            box.border_title = "Pinned memory by process (4: table)"
                            yield TopProcesses(limit=30, fit=True, classes="narrow-only")
                            yield TopProcesses(limit=30, classes="wide-only")
                        yield _titled(ProbeSummary(id="ov-probe", classes="panel wide-only"), "Probe (5: detail)")
            with TabPane(TABS[1][1], id="gpus"):
                with Container(id="gpus-grid"):
                    yield _titled(GpuList(id="gpu-list", classes="panel"), "PCIe per GPU (Enter: detail, g: next)")
                    yield _titled(GpuDetail(id="gpu-detail", classes="panel"), "GPU detail")
            with TabPane(TABS[2][1], id="memory"):
                with VerticalScroll(id="memory-scroll", classes="tab-scroll"):
                    yield _titled(MemoryPanel(id="memory-panel", classes="panel"), "Host memory (┃ = 50% of RAM)")
            with TabPane(TABS[3][1], id="processes"):
                yield ProcessPanel(id="process-panel")
            with TabPane(TABS[4][1], id="probe"):
                with VerticalScroll(id="probe-scroll", classes="tab-scroll"):
                    yield _titled(ProbePanel(id="probe-panel", classes="panel"), "Probe: measured on this box")
            with TabPane(TABS[5][1], id="advisor"):
                yield _titled(FindingsPanel(id="findings"), "Advisor findings, worst first (Enter: full text)")
        # The palette stays on ctrl+p; its footer entry would push keys off an 80-column footer.
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self._main_screen = self.screen
        self._views = [w for w in self.screen.query("*") if isinstance(w, View)]
        self._view_pane = {id(w): _pane_of(w) for w in self._views}
        self._started_at = self._clock()
        if self._install_signal_handlers:
            self._add_signal_handlers()
        if self.start_polling:
            self.poll_done.clear()
            self.run_worker(self._poll_loop, thread=True, group="poll", name="poll source")
            if self.live and self.probe_runner is not None and self.probe_every_s:
                self.set_timer(min(FIRST_PROBE_DELAY_S, self.probe_every_s), self._periodic_probe)
                self.set_interval(self.probe_every_s, self._periodic_probe)
        self.refresh_views()

    def on_unmount(self) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Stop the threads and close the recording; safe to call more than once."""
        self._stop.set()
        self._wake.set()
        self._probe_cancel.set()
        self._stop_recording(quiet=True)

    # --- polling (worker thread) -------------------------------------------------------------

    def _period_s(self) -> float:
        return self.interval_s if self.live else self.interval_s / self.speed

    def _poll_loop(self) -> None:
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    snap = self.source.snapshot()
                except Exception as e:  # a broken reading degrades to a notice; polling goes on
                    self.post_message(SourceFailed(f"{type(e).__name__}: {e}"))
                else:
                    if snap is None:
                        self.post_message(SourceEnded())
                        return
                    self.post_message(SnapshotReady(snap))
                self._sleep_until_due(started)
        finally:
            self.poll_done.set()

    def _sleep_until_due(self, started: float) -> None:
        # Re-reads the period after every wake-up, so a speed change applies at once.
        while not self._stop.is_set():
            if not self.live and self.paused:
                self._wake.wait(0.5)  # unpausing sets _wake; the timeout covers a lost wake-up
                self._wake.clear()
                started = time.monotonic()
                continue
            remaining = started + self._period_s() - time.monotonic()
            if remaining <= 0:
                return
            self._wake.wait(remaining)
            self._wake.clear()

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        self.apply_snapshot(message.snapshot)

    def on_source_failed(self, message: SourceFailed) -> None:
        self._app_notices["source"] = f"reading failed, still trying: {message.error}"
        self.refresh_views()

    def on_source_ended(self, message: SourceEnded) -> None:
        self.ended = True
        extra = [n for n in getattr(self.source, "notices", ()) if isinstance(n, str)]
        # The source's own word first ("recording ends early"): the bar shows the first notice,
        # and the header already says END OF RECORDING.
        for i, n in enumerate(extra):
            self._app_notices[f"end-{i}"] = n
        self._app_notices["end"] = (f"end of recording ({len(self.history)} snapshots shown);"
                                    " the last one stays on screen, q quits")
        self.refresh_bindings()
        self.refresh_views()

    # --- the one way a snapshot enters the app -----------------------------------------------

    def apply_snapshot(self, snapshot: Snapshot) -> None:
        """Take a snapshot: history, probe join, recording, advice, views. Tests call it directly."""
        pending = self._probe_link_pending
        if pending is not None and link_join_due(pending, snapshot):
            self._join_probe_link([*self.history, snapshot])
        if self.live:
            # Probe results join the snapshot, so the advisor and a recording see them too.
            snapshot = with_probe(snapshot, self._probe_latest_ok)
        self.history.append(snapshot)
        self.latest = snapshot
        self._app_notices.pop("source", None)
        if self.recorder is not None:
            try:
                self.recorder.write(snapshot)
            except Exception as e:
                self._app_notices["record"] = f"recording stopped: {e}"
                self._stop_recording(quiet=True)
        # Live pause freezes the view only: collection and recording go on, so there is no hole.
        if not self.paused or self.displayed is None:
            self._show_snapshot(snapshot)
        self.refresh_views()

    def _show_snapshot(self, snapshot: Snapshot) -> None:
        self.displayed = snapshot
        self.findings = self._advise()
        gpus = snapshot.gpus
        if gpus and self.selected_gpu >= len(gpus):
            self.selected_gpu = len(gpus) - 1
        window = list(self.history)[-SPARK_SAMPLES:]
        rx: dict[int, list] = {g.index: [] for g in gpus}
        tx: dict[int, list] = {g.index: [] for g in gpus}
        for s in window:
            by_index = {g.index: g for g in s.gpus}
            for i in rx:
                g = by_index.get(i)
                rx[i].append(None if g is None or g.lost else g.pcie.rx_bytes_per_s)
                tx[i].append(None if g is None or g.lost else g.pcie.tx_bytes_per_s)
        self._series = ({i: tuple(v) for i, v in rx.items()}, {i: tuple(v) for i, v in tx.items()})

    def _advise(self) -> tuple[Finding, ...]:
        try:
            found = list(self.advisor(list(self.history)[-ADVISOR_WINDOW:]))
        except Exception as e:  # one broken rule must not take the monitor down
            self._app_notices["advisor"] = f"advisor failed: {type(e).__name__}: {e}"
            return ()
        self._app_notices.pop("advisor", None)
        # The advisor sorts worst first already; a stable sort keeps its order within a severity.
        return tuple(sorted(found, key=lambda f: -SEVERITY_RANK.get(f.severity, 0)))

    # --- views -------------------------------------------------------------------------------

    def view_state(self) -> ViewState:
        notices = list(self.displayed.notices) if self.displayed is not None else []
        notices += self._app_notices.values()
        done, total, label = self._probe_progress
        probe = ProbeView(unavailable_reason=self.probe_unavailable_reason, live=self.live,
                          running_kind=self.probe_running, progress_done=done, progress_total=total,
                          progress_label=label, latest=self.probe_latest, latest_sweep=self._probe_latest_sweep,
                          probe_seconds=self.probe_seconds, wall_seconds=max(0.0, self._clock() - self._started_at),
                          count=self.probe_count, link_pending=self._probe_link_pending is not None)
        return ViewState(snapshot=self.displayed, findings=self.findings, live=self.live, paused=self.paused,
                         speed=self.speed, interval_s=self.interval_s,
                         recording_path=getattr(self.recorder, "path", None) if self.recorder else None,
                         ended=self.ended, selected_gpu=self.selected_gpu, rx_series=self._series[0],
                         tx_series=self._series[1], notices=tuple(dict.fromkeys(notices)), probe=probe)

    def refresh_views(self) -> None:
        """Draw the views the user can see; the others catch up when their tab or size shows them.

        A DataTable of a few hundred processes costs more to redraw than everything else together,
        so hidden views are skipped rather than drawn every interval for nobody.
        """
        if not self._views or self._stop.is_set() or not self.is_running:
            return  # not mounted yet, or shutting down with a worker's message still in flight
        active = self._tabs().active
        state = self.view_state()
        for view in self._views:
            pane = self._view_pane.get(id(view))
            shown = view.display or getattr(view, "hides_itself", False)  # type: ignore[attr-defined]
            if (pane is None or pane == active) and shown:
                view.show(state)

    def on_resize(self) -> None:
        # Crossing the wide/narrow breakpoint shows views that were skipped while hidden.
        self.call_after_refresh(self.refresh_views)

    # --- actions -----------------------------------------------------------------------------

    def _main(self, selector, expect_type=None):
        """A widget of the main screen, also while a modal (help, finding, palette) is on top."""
        screen = self._main_screen or self.screen
        return screen.query_one(selector, expect_type) if expect_type else screen.query_one(selector)

    def _tabs(self) -> TabbedContent:
        return self._main(TabbedContent)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("speed", "no_probe"):
            return not self.live
        if action in ("probe", "no_speed"):
            return self.live
        return True

    def say(self, message: str, severity: str = "information", timeout: Optional[float] = None) -> None:
        """A pop-up with ``message`` as plain text (never markup: "pinmon[cuda12]" stays whole), one
        line, and one at a time: it replaces the pop-up on screen, so keys pressed in a row (p, s)
        do not stack pop-ups over the panels."""
        self.clear_notifications()
        self.notify(printable(message, TOAST_CHARS), severity=severity, timeout=timeout,  # type: ignore[arg-type]
                    markup=False)

    def action_notices(self) -> None:
        notices = self.view_state().notices
        if not notices:
            self.say("no notices")
        elif not isinstance(self.screen, NoticesScreen):
            self.push_screen(NoticesScreen(notices))

    def action_no_probe(self) -> None:
        self.say("probe not available in replay: it measures this machine, not the recorded one",
                 severity="warning")

    def action_no_speed(self) -> None:
        self.say("speed applies to replays only")

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_tab(self, tab_id: str) -> None:
        tabs = self._tabs()
        if tabs.active == tab_id:
            self._focus_tab(tab_id)
        else:
            tabs.active = tab_id  # TabActivated then moves the focus into the tab

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.refresh_views()
        self._focus_tab(event.pane.id or "")

    def _focus_tab(self, tab_id: str) -> None:
        # Focusing a widget in another pane would switch TabbedContent back to that pane.
        if self._tabs().active != tab_id:
            return
        if tab_id == "processes":
            if self._filter_on_activate:
                self._filter_on_activate = False
                self._main(ProcessPanel).open_filter()
            else:
                self._main(ProcessPanel).focus_table()
        elif tab_id == "advisor":
            self._main(FindingsPanel).focus()
        elif tab_id == "gpus" and self._main("#gpu-list", GpuList).query(GpuRow):
            rows = list(self._main("#gpu-list", GpuList).query(GpuRow))
            rows[min(self.selected_gpu, len(rows) - 1)].focus()
        elif tab_id in ("memory", "probe"):
            self._main(f"#{tab_id}-scroll").focus()  # arrows scroll a tall panel on a small terminal
        else:
            # Focus left in a hidden pane would pull TabbedContent back there; the tab bar is safe.
            self._tabs().query_one(Tabs).focus()

    def action_next_gpu(self) -> None:
        gpus = self.displayed.gpus if self.displayed is not None else ()
        if not gpus:
            self.say("no GPUs in this snapshot", severity="warning")
            return
        self.selected_gpu = (self.selected_gpu + 1) % len(gpus)
        self.refresh_views()
        self.action_tab("gpus")

    def on_gpu_row_selected(self, message: GpuRow.Selected) -> None:
        self.selected_gpu = message.position
        self.refresh_views()
        if self._tabs().active != "gpus":
            self.action_tab("gpus")

    def action_filter(self) -> None:
        tabs = self._tabs()
        if tabs.active == "processes":
            self._main(ProcessPanel).open_filter()
        else:
            self._filter_on_activate = True  # the focus moves once the tab is shown
            tabs.active = "processes"

    def action_clear_filter(self) -> None:
        panel = self._main(ProcessPanel)
        if panel.filter_text:
            panel.clear_filter()

    def action_pause(self) -> None:
        self.paused = not self.paused
        if not self.paused:
            if self.live and self.latest is not None and self.latest is not self.displayed:
                self._show_snapshot(self.latest)
            self._wake.set()
        self.refresh_views()

    def action_speed(self, step: int) -> None:
        if self.live:
            self.say("speed applies to replays only")
            return
        speeds = self.replay_speeds
        i = min(range(len(speeds)), key=lambda k: abs(speeds[k] - self.speed))
        self.speed = speeds[max(0, min(len(speeds) - 1, i + step))]
        self._wake.set()
        self.refresh_views()

    def action_record(self) -> None:
        if self.recorder is not None:
            self._stop_recording(quiet=False)
        elif self.recorder_factory is None:
            self.say("recording is not available here", severity="warning")
        else:
            try:
                self.recorder = self.recorder_factory()
            except Exception as e:  # e.g. the file exists (never overwritten) or the disk is read-only
                self.say(f"cannot record: {e}", severity="error", timeout=8)
                return
            self._app_notices.pop("record", None)
            if self.latest is not None:
                try:
                    self.recorder.write(self.latest)  # the file is never empty, even if we stop at once
                except Exception as e:
                    self._app_notices["record"] = f"recording stopped: {e}"
                    self._stop_recording(quiet=True)
            if self.recorder is not None:
                self.say(f"recording to {self.recorder.path}")
        self.refresh_views()

    def _stop_recording(self, quiet: bool) -> None:
        rec, self.recorder = self.recorder, None
        if rec is None:
            return
        try:
            rec.close()
        except Exception as e:
            self._app_notices["record"] = f"closing the recording failed: {e}"
        if not quiet:
            count = getattr(rec, "count", None)
            self.say(f"recording saved: {rec.path}" + (f" ({count} snapshots)" if count is not None else ""))

    # --- probes (worker thread) --------------------------------------------------------------

    def action_probe(self, kind: str = "quick") -> None:
        if not self.live:
            self.say("probe not available in replay", severity="warning")
            return
        if self.probe_runner is None:
            self.say(f"no probe: {self.probe_unavailable_reason}", severity="warning", timeout=6)
            return
        if self.probe_running is not None:
            self.say(f"a {self.probe_running} probe is already running")
            return
        self.start_probe(kind)

    def _periodic_probe(self) -> None:
        if self.probe_running is None and not self.paused and self.probe_runner is not None:
            elapsed = self._clock() - self._started_at
            if self.probe_count and self.probe_seconds > self.auto_probe_duty_limit * elapsed:
                return  # pinmon's own load stays under the limit: this automatic probe is skipped
            self.start_probe("quick")

    def start_probe(self, kind: str) -> None:
        gpus = self.displayed.gpus if self.displayed is not None else ()
        gpu_index = gpus[min(self.selected_gpu, len(gpus) - 1)].index if gpus else 0
        if self._probe_link_pending is not None:
            self._join_probe_link(self.history)  # later readings would count the new probe's copies too
        self.probe_running = kind
        self._probe_progress = (0.0, None, "starting")
        self._probe_cancel = threading.Event()
        self.probe_done.clear()
        self.run_worker(partial(self._probe_thread, kind, gpu_index, self._probe_cancel),
                        thread=True, group="probe", name=f"{kind} probe")
        self.refresh_views()

    def _probe_thread(self, kind: str, gpu_index: int, cancel: threading.Event) -> None:
        started = self._clock()
        try:
            def progress(done, total, label=""):
                self.post_message(ProbeProgress(done, total, str(label)))

            try:
                assert self.probe_runner is not None
                result = self.probe_runner(kind, gpu_index=gpu_index, progress=progress, cancel=cancel)
            except Exception as e:  # the runner promises not to raise; if it does, say so, invent nothing
                result = ProbeResult(time=time.time(), gpu_index=gpu_index, status="unavailable", kind=kind,
                                     reason=f"probe failed: {type(e).__name__}: {e}")
            self.post_message(ProbeFinished(result, max(0.0, self._clock() - started)))
        finally:
            self.probe_done.set()

    def on_probe_progress(self, message: ProbeProgress) -> None:
        if self.probe_running is not None:
            self._probe_progress = (message.done, message.total, message.label)
            self.refresh_views()

    def on_probe_finished(self, message: ProbeFinished) -> None:
        self.apply_probe_result(message.result, message.seconds)

    def apply_probe_result(self, result: ProbeResult, seconds: float) -> None:
        """Keep a probe result and its cost; tests call it directly."""
        self.probe_running = None
        self._probe_progress = (0.0, None, "")
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
        self.refresh_views()

    def _join_probe_link(self, snapshots: Iterable[Snapshot]) -> None:
        """Give the pending probe result the link traffic the collector read while it ran, wherever
        the app holds that result (so later snapshots and recordings carry it too)."""
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

    # --- command palette ---------------------------------------------------------------------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Probe now", "Quick pinned vs pageable copy probe on the selected GPU (p)",
                            partial(self.action_probe, "quick"))
        yield SystemCommand("Probe sweep", "Probe over a range of copy sizes (s)", partial(self.action_probe, "sweep"))
        yield SystemCommand("Next GPU", "Select the next GPU and show its detail (g)", self.action_next_gpu)
        yield SystemCommand("Filter processes", "Filter the process table by pid, name or user (/)",
                            self.action_filter)
        yield SystemCommand("Sort processes", "Next sort column of the process table (o)",
                            lambda: self._main(ProcessPanel).action_cycle_sort())
        yield SystemCommand("Pause / resume", "Freeze the view (live) or stop the replay (space)", self.action_pause)
        yield SystemCommand("Start / stop recording", "Record the snapshots to a file (r)", self.action_record)
        if not self.live:
            yield SystemCommand("Replay faster", "Next replay speed (+)", partial(self.action_speed, 1))
            yield SystemCommand("Replay slower", "Previous replay speed (-)", partial(self.action_speed, -1))
        yield SystemCommand("Keys and terms", "The help screen (? or F1)", self.action_help)
        for n, (tab_id, label) in enumerate(TABS, start=1):
            yield SystemCommand(f"Show {label.split(' ', 1)[1]}", f"Switch to the {label.split(' ', 1)[1]} tab ({n})",
                                partial(self.action_tab, tab_id))

    # --- signals -----------------------------------------------------------------------------

    def _add_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                loop.add_signal_handler(sig, self.handle_stop_signal, sig)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread / no such signal
                pass

    def handle_stop_signal(self, signum: int = signal.SIGTERM) -> None:
        """SIGTERM / SIGHUP (SSH gone): close the recording first, then exit like q does."""
        self._stop_recording(quiet=True)
        if signum == signal.SIGHUP:
            # The terminal is gone: restoring it can block for ever (Textual's writer thread dies
            # on the closed pty and its queue fills). The recording is closed and every other
            # resource is the kernel's to reclaim, so end the process if a clean exit stalls.
            # run_app cancels it once the app has returned and its threads have stopped.
            self.hangup_watchdog = threading.Timer(HANGUP_GRACE_S, os._exit, (0,))
            self.hangup_watchdog.daemon = True
            self.hangup_watchdog.start()
        self.exit(0)


def _pane_of(widget) -> Optional[str]:
    node = widget
    while node is not None:
        if isinstance(node, TabPane):
            return node.id
        node = node.parent
    return None


def _titled(widget, title: str):
    widget.border_title = title
    return widget


def run_app(source: Source, advisor: Callable[[Sequence[Snapshot]], list[Finding]], interval_s: float = 1.0,
            probe_runner: Optional[Callable[..., ProbeResult]] = None,
            probe_unavailable_reason: Optional[str] = "probe engine not available",
            probe_every_s: Optional[float] = 60.0,
            recorder_factory: Optional[Callable[[], Recorder]] = None,
            replay_speeds: Sequence[float] = (0.5, 1, 2, 4, 8, 16), speed: float = 1.0,
            join_timeout_s: float = 10.0, headless: bool = False) -> int:
    """Run the app until q or SIGTERM/SIGHUP; returns the exit code.

    Without a ``recorder_factory``, ``r`` records to a new ``./pinmon-DATE-TIME.jsonl.gz``. On return
    the recording is closed and the worker threads have stopped (up to ``join_timeout_s``), so the
    caller may close the source.
    """
    if recorder_factory is None:
        from ..recording import Recorder as FileRecorder, default_recording_path

        def recorder_factory():
            return FileRecorder(default_recording_path())

    app = PinmonApp(source, advisor, interval_s=interval_s, probe_runner=probe_runner,
                    probe_unavailable_reason=probe_unavailable_reason, probe_every_s=probe_every_s,
                    recorder_factory=recorder_factory, replay_speeds=replay_speeds, speed=speed,
                    install_signal_handlers=True)
    try:
        code = app.run(headless=headless)
    finally:
        app.shutdown()
        app.poll_done.wait(join_timeout_s)
        app.probe_done.wait(join_timeout_s)
        if app.hangup_watchdog is not None:
            app.hangup_watchdog.cancel()
    return int(code or 0)
