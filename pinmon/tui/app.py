"""The pinmon terminal app: polls a ``Source`` off the UI thread and draws what its ``Session`` holds.

Data flows one way: a thread worker calls ``source.snapshot()`` and posts the snapshot; on the UI
thread the session (``session.py``, no Textual) takes it (history, probe join, recording, advice)
and every visible view draws the session's ``ViewState``. Everything that can block (the source,
the probe) runs in threads; the session decides, the app runs its threads and timers, maps keys
to the session's methods and shows what they have to say.

The source, the advisor, the probe runner and the recorder are injected, so tests drive the app
with fakes and the app knows nothing of NVML, psutil or CuPy.
"""
from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, TypeVar, overload

from textual import events
from textual.app import App, ComposeResult, SystemCommand
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import TabbedContent, Tabs

from ..model import Finding, ProbeResult, Snapshot
from ..model.kinds import ProbeKind
from ..model.source import Source
from ..units import printable
from .keys import BINDINGS, palette_commands
from .layout import MainScreen, compose_main, pane_of
from .quiet_input import QuietInputDriver
from .screens.help import HelpScreen
from .screens.notices import NoticesScreen
from .screens.process import AttachRequested
from .screens.too_small import TooSmallScreen
from .view.attach import AttachEnd, AttachRunner
from .view.session import Note, Session
from .view.sizing import too_small
from .widgets.base import View
from .widgets.containers import ContainerPanel
from .widgets.findings import FindingsPanel
from .widgets.gpu_list import GpuList
from .widgets.gpu_row import GpuRow
from .widgets.header import StatusHeader
from .widgets.processes import ProcessPanel
from .workers import (
    AttachFinished,
    Poller,
    ProbeFinished,
    ProbeProgress,
    SnapshotReady,
    SourceEnded,
    SourceFailed,
    run_attach,
    run_probe,
)

W = TypeVar("W", bound=Widget)

# After SIGHUP, how long a clean exit may take before the process ends itself.
HANGUP_GRACE_S = 3.0
# A pop-up's text: one line, this long at most (a toast is a third of the screen wide).
TOAST_CHARS = 240
# While an attach window runs, the status line's countdown is redrawn this often (and only then).
ATTACH_TICK_S = 0.5


class PinmonApp(App[int]):
    CSS_PATH = "pinmon.tcss"
    TITLE = "pinmon"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012  (an instance variable to Textual)

    BINDINGS = BINDINGS

    def __init__(self, source: Source, advisor: Callable[[Sequence[Snapshot]], list[Finding]], *,
                 probe_runner: Callable[..., ProbeResult] | None = None, start_polling: bool = True,
                 clock: Callable[[], float] = time.monotonic, install_signal_handlers: bool = False,
                 probe_keys: bool = True, attach_runner: AttachRunner | None = None,
                 **session_options: Any) -> None:
        """``session_options``: ``Session``'s (``interval_s``, ``probe_every_s``, ``recorder_factory``,
        ``speed``, ``thresholds``, ``attach_window_s``, ``attach_all``...). ``probe_keys`` False: probes
        are forbidden here (the config's ``app_probes = "off"``), so the footer does not offer p and s.
        ``attach_runner``: what the attach key runs (one window on one process, on a thread); without
        it ``attach_unavailable_reason`` says why the key cannot attach."""
        super().__init__()
        self.source = source
        self.probe_runner = probe_runner
        self.probe_keys = probe_keys
        self.attach_runner = attach_runner
        self.session = Session(advisor, live=bool(getattr(source, "live", True)),
                               probe_available=probe_runner is not None, attach_available=attach_runner is not None,
                               clock=clock, **session_options)
        self.start_polling = start_polling
        self._clock = clock
        self._install_signal_handlers = install_signal_handlers
        self.hangup_watchdog: threading.Timer | None = None
        self._views: list[View] = []
        self._tabbed: TabbedContent | None = None
        self._view_pane: dict[int, str | None] = {}
        self._main_screen: Screen | None = None
        self._filter_on_activate = False

        self._poller = Poller(source, self.session, self.post_message)
        self.poll_done = self._poller.done
        self._probe_cancel = threading.Event()
        self.probe_done = threading.Event()
        self.probe_done.set()
        # The attach window's thread: stopped on quit, and waited for (its probes leave the process).
        self._attach_stop = threading.Event()
        self._attach_attached = threading.Event()
        self.attach_done = threading.Event()
        self.attach_done.set()
        self._attach_timer: Timer | None = None

    def get_driver_class(self) -> type[Driver]:
        """Textual's choice, except that its Linux terminal driver becomes ``QuietInputDriver``
        (the same driver, its input thread asleep while no key comes). A driver named in
        ``TEXTUAL_DRIVER`` (Textual's setting) is used as it is."""
        chosen = super().get_driver_class()
        if chosen is LinuxDriver and not os.environ.get("TEXTUAL_DRIVER"):
            return QuietInputDriver
        return chosen

    # --- layout ------------------------------------------------------------------------------

    def get_default_screen(self) -> Screen:
        return MainScreen(id="_default")

    def compose(self) -> ComposeResult:
        yield from compose_main(self.session.thresholds)

    def on_mount(self) -> None:
        self._main_screen = self.screen
        self._tabbed = self.screen.query_one(TabbedContent)  # looked up each second otherwise
        self._views = [w for w in self.screen.query("*") if isinstance(w, View)]
        self._view_pane = {id(w): pane_of(w) for w in self._views}
        self.session.start()
        if self._install_signal_handlers:
            self._add_signal_handlers()
        if self.start_polling:
            self.poll_done.clear()
            # Draw first, then fill: the source is read (and a live one opened: NVML, the first
            # /proc scan) once the first frame is on screen, its panels saying "collecting…".
            self.call_after_refresh(self._start_polling)
            timing = self.session.auto_probe_timing()
            if timing is not None:
                self.set_timer(timing[0], self._periodic_probe)
                self.set_interval(timing[1], self._periodic_probe)
        self.refresh_views()
        self.fit_screen()

    def _start_polling(self) -> None:
        if self._poller.stop.is_set():
            self.poll_done.set()  # quit before the first frame: nothing to read
            return
        self.run_worker(self._poller.run, thread=True, group="poll", name="poll source")

    def on_unmount(self) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Stop the threads and close the recording; safe to call more than once."""
        self._poller.stop.set()
        self._poller.wake.set()
        self._probe_cancel.set()
        self._attach_stop.set()
        self.session.stop_recording(quiet=True)

    # --- messages from the worker threads ------------------------------------------------------

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        self.apply_snapshot(message.snapshot)

    def on_source_failed(self, message: SourceFailed) -> None:
        self.session.source_failed(message.error)
        self.refresh_views()

    def on_source_ended(self, message: SourceEnded) -> None:
        self.session.source_ended(getattr(self.source, "notices", ()))
        self.refresh_bindings()
        self.refresh_views()

    def apply_snapshot(self, snapshot: Snapshot) -> None:
        """The one way a snapshot enters the app: the session takes it, the views draw. Tests call it."""
        self.session.take(snapshot)
        self.refresh_views()

    # --- views -------------------------------------------------------------------------------

    def refresh_views(self) -> None:
        """Draw the views the user can see; the others catch up when their tab or size shows them.

        A DataTable of a few hundred processes costs more to redraw than everything else together,
        so hidden views are skipped rather than drawn every interval for nobody.
        """
        if not self._views or self._poller.stop.is_set() or not self.is_running:
            return  # not mounted yet, or shutting down with a worker's message still in flight
        active = self._tabs().active
        state = self.session.view_state()
        for view in self._views:
            pane = self._view_pane.get(id(view))
            shown = view.display or view.hides_itself
            if (pane is None or pane == active) and shown:
                view.show(state)

    def on_resize(self, event: events.Resize) -> None:
        self.fit_screen(event.size.width, event.size.height)  # self.size may still be the old one here
        # Crossing the wide/narrow breakpoint shows views that were skipped while hidden.
        self.call_after_refresh(self.refresh_views)

    def fit_screen(self, width: int | None = None, height: int | None = None) -> None:
        """The too-small hint on top while the terminal (``width`` x ``height``, default its size now)
        is smaller than the app draws in; gone once it is large enough again (the screens under it
        come back as they were)."""
        if not self._views:
            return  # before on_mount (a first resize comes before it): on_mount asks again
        width = self.size.width if width is None else width
        height = self.size.height if height is None else height
        small = too_small(width, height)
        top = self.screen
        if small and isinstance(top, TooSmallScreen):
            top.show_size(width, height)
        elif small:
            self.push_screen(TooSmallScreen(width, height))
        elif isinstance(top, TooSmallScreen):
            self.pop_screen()

    @overload
    def main_widget(self, selector: str) -> Widget: ...

    @overload
    def main_widget(self, selector: type[W]) -> W: ...

    @overload
    def main_widget(self, selector: str, expect_type: type[W]) -> W: ...

    def main_widget(self, selector: str | type[W], expect_type: type[W] | None = None) -> W | Widget:
        """A widget of the main screen, also while a modal (help, finding, palette) is on top."""
        screen = self._main_screen or self.screen
        if isinstance(selector, str):
            return screen.query_one(selector, expect_type) if expect_type else screen.query_one(selector)
        return screen.query_one(selector)

    def _tabs(self) -> TabbedContent:
        if self._tabbed is not None:
            return self._tabbed
        return self.main_widget(TabbedContent)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if isinstance(self.screen, TooSmallScreen):
            return action in ("quit", "suspend_process")  # the hint is all there is: q still quits
        if action == "speed":
            return not self.session.live
        if action == "no_probe":
            return not (self.session.live and self.probe_keys)
        if action == "probe":
            return self.session.live and self.probe_keys
        if action == "no_speed":
            return self.session.live
        return True

    def say(self, note: Note | str | None) -> None:
        """A pop-up with the note as plain text (never markup: "pinmon[cuda12]" stays whole), one
        line, and one at a time: it replaces the pop-up on screen, so keys pressed in a row (p, s)
        do not stack pop-ups over the panels."""
        if note is None:
            return
        if isinstance(note, str):
            note = Note(note)
        self.clear_notifications()
        self.notify(printable(note.text, TOAST_CHARS), severity=note.severity,
                    timeout=note.timeout, markup=False)

    # --- actions -----------------------------------------------------------------------------

    def action_notices(self) -> None:
        notices = self.session.notices()
        if not notices:
            self.say("no notices")
        elif not isinstance(self.screen, NoticesScreen):
            self.push_screen(NoticesScreen(notices))

    def action_no_probe(self) -> None:
        if self.session.live:  # forbidden here: the session says why
            self.say(self.session.probe_refusal())
            return
        self.say(Note("probe not available in replay: it measures this machine, not the recorded one", "warning"))

    def action_no_speed(self) -> None:
        self.say("speed applies to replays only")

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.session.thresholds))

    def action_tab(self, tab_id: str) -> None:
        tabs = self._tabs()
        if tabs.active == tab_id:
            self._focus_tab(tab_id)
        else:
            # The focus leaves the shown pane first: a focus given there a moment ago (g) must not
            # pull the tabs back to it (Pane.on_tab_pane_focused). TabActivated then moves it in.
            self.set_focus(tabs.query_one(Tabs))
            tabs.active = tab_id

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.refresh_views()
        self._focus_tab(event.pane.id or "")

    def _focus_tab(self, tab_id: str) -> None:
        # Focusing a widget in another pane would switch TabbedContent back to that pane. So the
        # focus moves at once (App.set_focus), not later as Widget.focus() does: a tab key pressed
        # in between (g then 1) would otherwise see the focus land here and pull its tab back.
        if self._tabs().active != tab_id:
            return
        self.set_focus(self._focus_target(tab_id))

    def _focus_target(self, tab_id: str) -> Widget:
        if tab_id == "processes":
            panel = self.main_widget(ProcessPanel)
            if self._filter_on_activate:
                self._filter_on_activate = False
                return panel.shown_filter()
            return panel.table()
        if tab_id == "containers":
            return self.main_widget(ContainerPanel).table()
        if tab_id == "advisor":
            return self.main_widget(FindingsPanel)
        if tab_id == "gpus" and self.main_widget("#gpu-list", GpuList).query(GpuRow):
            rows = list(self.main_widget("#gpu-list", GpuList).query(GpuRow))
            return rows[min(self.session.selected_gpu, len(rows) - 1)]
        if tab_id in ("memory", "probe"):
            return self.main_widget(f"#{tab_id}-scroll")  # arrows scroll a tall panel on a small terminal
        # Focus left in a hidden pane would pull TabbedContent back there; the tab bar is safe.
        return self._tabs().query_one(Tabs)

    def action_next_gpu(self) -> None:
        refusal = self.session.next_gpu()
        if refusal is not None:
            self.say(refusal)
            return
        self.refresh_views()
        self.action_tab("gpus")

    def action_open_gpu(self) -> None:
        """Enter on the overview: the selected GPU's detail (its row is marked ▶; g moves it)."""
        if self.screen is self._main_screen and self._tabs().active == "overview" and self.session.gpu_count():
            self.on_gpu_row_selected(GpuRow.Selected(self.session.selected_gpu))

    def on_gpu_row_selected(self, message: GpuRow.Selected) -> None:
        self.session.select_gpu(message.position)
        self.refresh_views()
        if self._tabs().active != "gpus":
            self.action_tab("gpus")
        # Enter promises the detail: on a small terminal it sits below the whole list (eight GPUs
        # at 80x24 fill more than the screen), so bring it into view; g goes back to the rows.
        detail = self.main_widget("#gpu-detail")
        self.call_after_refresh(detail.scroll_visible, animate=False)

    def action_filter(self) -> None:
        tabs = self._tabs()
        if tabs.active == "processes":
            self.main_widget(ProcessPanel).open_filter()
        else:
            self._filter_on_activate = True  # the focus moves once the tab is shown
            tabs.active = "processes"

    def action_clear_filter(self) -> None:
        panel = self.main_widget(ProcessPanel)
        if panel.filter_text:
            panel.clear_filter()

    def action_pause(self) -> None:
        self.session.toggle_pause()
        self._poller.wake.set()  # a replay's poll thread waits for the end of the pause
        self.refresh_views()

    def action_speed(self, step: int) -> None:
        note = self.session.step_speed(step)
        self.say(note)
        if note is None:
            self._poller.wake.set()  # the poll thread's wait follows the new period at once
            self.refresh_views()

    def action_record(self) -> None:
        self.say(self.session.toggle_recording())
        self.refresh_views()

    # --- probes (worker thread) --------------------------------------------------------------

    def action_probe(self, kind: ProbeKind = "quick") -> None:
        refusal = self.session.probe_refusal()
        if refusal is not None:
            self.say(refusal)
            return
        self.start_probe(kind)

    def _periodic_probe(self) -> None:
        if self.session.auto_probe_due():
            self.start_probe("quick")

    def start_probe(self, kind: ProbeKind) -> None:
        gpu_index = self.session.begin_probe(kind)
        self._probe_cancel = threading.Event()
        self.probe_done.clear()
        self.run_worker(partial(self._probe_thread, kind, gpu_index, self._probe_cancel),
                        thread=True, group="probe", name=f"{kind} probe")
        self.refresh_views()

    def _probe_thread(self, kind: ProbeKind, gpu_index: int, cancel: threading.Event) -> None:
        try:
            assert self.probe_runner is not None
            run_probe(self.probe_runner, kind, gpu_index, cancel, self.post_message, self._clock)
        finally:
            self.probe_done.set()

    def on_probe_progress(self, message: ProbeProgress) -> None:
        if self.session.probe_step(message.done, message.total, message.label):
            self.refresh_views()

    def on_probe_finished(self, message: ProbeFinished) -> None:
        self.apply_probe_result(message.result, message.seconds)

    def apply_probe_result(self, result: ProbeResult, seconds: float) -> None:
        """Keep a probe result and its cost (the session joins it into later snapshots); tests call it."""
        self.session.finish_probe(result, seconds)
        self.refresh_views()

    # --- attach (worker thread) --------------------------------------------------------------

    def action_no_attach(self) -> None:
        """a where it attaches nothing: another tab, a replay, --attach, no attach here; says why."""
        self.say(self.session.attach.refusal(None))

    def on_attach_requested(self, message: AttachRequested) -> None:
        self.attach_process(message.pid)

    def attach_process(self, pid: int | None) -> None:
        """One attach window on ``pid``, or the one line that says why not (nothing else changes)."""
        refusal = self.session.attach.refusal(pid)
        if refusal is not None or pid is None:
            self.say(refusal)
            return
        self.start_attach(pid)

    def start_attach(self, pid: int) -> None:
        window = self.session.attach.begin(pid)
        self._attach_stop = threading.Event()
        self._attach_attached = threading.Event()
        self.attach_done.clear()
        self.run_worker(partial(self._attach_thread, pid, window.seconds, self._attach_stop, self._attach_attached),
                        thread=True, group="attach", name=f"attach pid {pid}")
        self._attach_timer = self.set_interval(ATTACH_TICK_S, self.attach_tick, name="attach countdown")
        self.refresh_bindings()
        self.attach_tick()

    def _attach_thread(self, pid: int, seconds: float, stop: threading.Event, attached: threading.Event) -> None:
        try:
            assert self.attach_runner is not None
            run_attach(self.attach_runner, pid, seconds, stop, attached, self.post_message)
        finally:
            self.attach_done.set()

    def attach_tick(self) -> None:
        """The countdown: from when the probes are in; only the status line is redrawn."""
        if self._attach_attached.is_set():
            self.session.attach.mark_attached()
        if self._views and self.is_running:
            self.main_widget(StatusHeader).show(self.session.view_state())

    def on_attach_finished(self, message: AttachFinished) -> None:
        self.apply_attach_end(message.end)

    def apply_attach_end(self, end: AttachEnd) -> None:
        """The window has ended: the countdown goes, the app says how it went; tests call it."""
        if self._attach_timer is not None:
            self._attach_timer.stop()
            self._attach_timer = None
        self.say(self.session.attach.finish(end))
        self.refresh_bindings()
        self.refresh_views()

    # --- command palette ---------------------------------------------------------------------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from palette_commands(self)

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
        self.session.stop_recording(quiet=True)
        if signum == signal.SIGHUP:
            # The terminal is gone: restoring it can block for ever (Textual's writer thread dies
            # on the closed pty and its queue fills). The recording is closed and every other
            # resource is the kernel's to reclaim, so end the process if a clean exit stalls.
            # run_app cancels it once the app has returned and its threads have stopped (and
            # leaves it armed while a thread that would keep the interpreter alive lingers).
            self.hangup_watchdog = threading.Timer(HANGUP_GRACE_S, os._exit, (0,))
            self.hangup_watchdog.daemon = True
            self.hangup_watchdog.start()
        self.exit(0)


def run_app(source: Source, advisor: Callable[[Sequence[Snapshot]], list[Finding]], *,
            join_timeout_s: float = 10.0, headless: bool = False,
            before_start: Callable[[], None] | None = None, **options: Any) -> int:
    """Run the app until q or SIGTERM/SIGHUP; returns the exit code. ``options``: ``PinmonApp``'s
    (``interval_s``, ``probe_runner``, ``thresholds``: the advisor's, which the views follow where
    a rule decides how a figure looks...).

    Without a ``recorder_factory``, ``r`` records to a new ``./pinmon-DATE-TIME.jsonl.gz``. On return
    the recording is closed and the worker threads have stopped (up to ``join_timeout_s``), so the
    caller may close the source. ``before_start`` runs just before Textual takes the terminal (the
    first frame drawn before Textual loaded gives the terminal's modes back).
    """
    if options.get("recorder_factory") is None:
        from ..recording import Recorder as FileRecorder
        from ..recording import default_recording_path

        options["recorder_factory"] = lambda: FileRecorder(default_recording_path())
    app = PinmonApp(source, advisor, install_signal_handlers=True, **options)
    if before_start is not None:
        before_start()
    try:
        code = app.run(headless=headless)
    finally:
        app.shutdown()
        app.poll_done.wait(join_timeout_s)
        app.probe_done.wait(join_timeout_s)
        app.attach_done.wait(join_timeout_s)  # the window's probes out of the process
        if app.hangup_watchdog is not None and not lingering_threads():
            # Everything stopped: the watchdog would only cut short what the caller does next.
            # Where a thread lingers (Textual's input thread, on a SIGCONT without a suspend
            # before it, starts a second one and stops only the newer), it stays armed: that
            # thread would keep the interpreter from exiting, and the terminal is gone.
            app.hangup_watchdog.cancel()
    if code is None and app.return_code:
        return int(app.return_code)  # the app failed (Textual printed why): not a clean exit
    return int(code or 0)


def lingering_threads() -> list[threading.Thread]:
    """Threads other than this one that would keep the interpreter from exiting (alive, not daemons)."""
    me = threading.current_thread()
    return [t for t in threading.enumerate() if t is not me and not t.daemon and t.is_alive()
            and t is not threading.main_thread()]
