"""Everything pinmon relies on in Textual beyond its documented API, in one place.

Checked against Textual 6.12.0 and 8.2.8: the oldest and the newest that pyproject.toml allows
(``.ci/run`` runs the TUI tests on both). Each part says what it relies on, why, and what pinmon does
where a Textual release differs. Nothing here imports a private Textual module or name
(tests/test_imports.py); the private attributes read below are read guarded.

1. The quiet input thread (``QuietLinuxDriver``). Textual's Linux driver polls the terminal ten times a
   second, key or no key. This driver sleeps in ``select()`` until the terminal has bytes, then runs
   Textual's own input loop (``LinuxDriver.run_input_thread``), which returns once input has been
   quiet: the driver's ``exit_event`` answers ``is_set()`` with True to the input thread at that
   point. It relies on that loop asking ``exit_event.is_set()`` between its 0.1 s polls, which
   ``quiet_input_supported`` checks in the loop's code names (``co_names``) with the other public
   names it uses; where they differ, Textual's own driver runs (``choose_driver``).
   ``PINMON_QUIET_INPUT=0`` turns it off. tests/tui/test_pty_session.py drives the real app on a
   pseudo-terminal through a resize, a paste, SIGTSTP and Ctrl-Z with fg, a lone SIGCONT and a
   hang-up, with each input thread: the quiet one stays the default while that test passes on both
   Textual releases. After a hang-up, an input thread Textual's own driver left running
   (``lingering_input_threads``) keeps the app's hang-up watchdog armed, so the process still ends.
2. Text drawn once (``drawn``, ``remember_drawn``): the text a widget last got is kept on the widget
   as ``_pinmon_drawn`` (an attribute of pinmon's on Textual's object), so a second that repeats it
   costs nothing.
3. When new text needs a layout pass (``needs_layout``): the reasoning about Textual's sizing of a
   ``Static`` (an auto width follows the widest line, an auto height the line count and wrapping).
   Wrong here means a stale size, never a wrong text: a layout is asked for whenever in doubt.
4. Heights that Textual may leave stale (``ask_layout``): a plain widget's content height is cached
   per width until ``clear_cached_dimensions()``, and a layout asked for while the screen's own one is
   pending (at start-up in a real terminal, as the breakpoint class arrives) was seen to be lost. The
   rows widgets and text set through ``widgets.base.set_content`` clear the cache and look at their
   height after the next refreshes, asking again.
5. Repainting all of a widget (``paint_all``): ``Widget.render_line`` renders again only the
   widget's dirty regions; a widget that renders its own lines clears them (``_dirty_regions``)
   when it draws everything anew.
6. The tab strip's type (``CONTENT_TABS``): the status line is composed right after TabbedContent's
   strip, found by its type; should a release not compose one, the lines follow the panes.
7. ``BLANK`` containers: Textual's switch for widgets that draw only their background; releases
   without it ignore the attribute (``HONOURS_BLANK``).
8. What the screen shows and which widgets an update renders, for the tests (``screen_update``,
   ``count_renders``): the compositor's full render and ``Widget.render_lines``.
"""
from __future__ import annotations

import os
import selectors
import threading
import time
from typing import Callable, Optional

from textual.widget import Widget

# --- 1. the quiet input thread ------------------------------------------------------------------

ENV = "PINMON_QUIET_INPUT"
# Textual's loop returns after this many polls in a row that each waited out its timeout (no byte
# came; Textual's wait is 0.1 s, a poll that returns sooner had input)...
QUIET_POLLS = 10
QUIET_POLL_S = 0.09
# ...and this long after the last key, mouse or paste event: a paste or an escape sequence in
# progress is never cut off.
QUIET_S = 1.0
# The longest the thread sleeps between looks at the event, should a wake-up through the pipe
# ever be lost (quitting writes to the pipe, which wakes it at once).
IDLE_WAKE_S = 60.0
_READ_BYTES = 4096

try:
    from textual.drivers.linux_driver import LinuxDriver
except Exception:  # not Linux (no termios), or the driver moved: Textual's own driver runs
    LinuxDriver = None  # type: ignore[assignment,misc]


def _names(fn) -> tuple:
    """The attribute and global names a function's code uses (no source file needed)."""
    return getattr(getattr(fn, "__code__", None), "co_names", ())


def quiet_input_supported() -> bool:
    """Whether this Textual's Linux driver has the public parts ``QuietLinuxDriver`` builds on."""
    if LinuxDriver is None:
        return False
    run = getattr(LinuxDriver, "run_input_thread", None)
    return (callable(run) and callable(getattr(LinuxDriver, "process_message", None))
            and "exit_event" in _names(LinuxDriver.__init__)
            and "exit_event" in _names(run) and "is_set" in _names(run)
            and hasattr(os, "pipe2"))


def quiet_input_wanted(env=None) -> bool:
    """True unless the user turned the quiet input thread off."""
    value = (os.environ if env is None else env).get(ENV, "")
    return value.strip().lower() not in ("0", "no", "false", "off")


def choose_driver(stock: type, env=None) -> type:
    """``stock`` (the driver Textual picked) or the quiet driver: the quiet one unless turned off,
    where Textual picked its Linux driver itself (no ``TEXTUAL_DRIVER``) and it has the parts the
    quiet one builds on; on any mismatch, Textual's own."""
    if not quiet_input_wanted(env) or LinuxDriver is None:
        return stock
    try:
        from textual import constants

        if constants.DRIVER is not None or stock is not LinuxDriver:
            return stock  # a driver chosen through TEXTUAL_DRIVER, or not Linux: kept
        return QuietLinuxDriver if quiet_input_supported() else stock
    except Exception:
        return stock


class _InputEvent(threading.Event):
    """The driver's exit event. ``set()`` also writes a byte to a pipe, so a thread asleep in
    ``select()`` wakes at once, and counts itself: an input thread stops on any ``set()`` made
    after it started, even one that was cleared again before it looked. Textual can run two input
    threads (on SIGCONT it resumes the application mode without suspending it first), and the app
    stopping joins only the newer one before clearing the event.

    While Textual's loop runs a burst of input, the input thread's ``is_set()`` is also True once
    input has been quiet (``QUIET_POLLS``, ``QUIET_S``); any other thread gets the real state."""

    def __init__(self, wake_fd: int, last_event):
        super().__init__()
        self.wake_fd = wake_fd
        self.sets = 0
        self._last_event = last_event  # () -> monotonic time of the last input event
        self._thread = threading.local()  # per input thread: when it started, its burst

    def set(self) -> None:
        self.sets += 1
        super().set()
        fd = self.wake_fd
        if fd >= 0:
            try:
                os.write(fd, b"x")
            except OSError:
                pass  # full (a wake-up is already pending) or closed: nothing more to do

    def begin_thread(self) -> None:
        self._thread.started_at = self.sets
        self._thread.burst = False

    def stopped(self) -> bool:
        """Whether the calling input thread must end: the event is set, or was since it started."""
        return super().is_set() or self.sets != getattr(self._thread, "started_at", self.sets)

    def begin_burst(self, bytes_pending) -> None:
        t = self._thread
        t.burst, t.last_poll, t.quiet_polls, t.bytes_pending = True, time.monotonic(), 0, bytes_pending

    def end_burst(self) -> None:
        self._thread.burst = False

    def is_set(self) -> bool:
        t = self._thread
        if not getattr(t, "burst", False):
            return super().is_set()
        if self.stopped():
            return True
        now = time.monotonic()
        waited = now - t.last_poll
        t.last_poll = now
        t.quiet_polls = t.quiet_polls + 1 if waited >= QUIET_POLL_S else 0
        return (t.quiet_polls >= QUIET_POLLS and now - self._last_event() >= QUIET_S
                and not t.bytes_pending())


class QuietLinuxDriver(LinuxDriver if LinuxDriver is not None else object):  # type: ignore[misc]
    """Textual's Linux driver whose input thread sleeps while no key comes (see part 1)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._wake_r = self._wake_w = -1
        self._last_event_s = 0.0
        self.exit_event = _InputEvent(-1, lambda: self._last_event_s)
        self._open_wake_pipe()

    def _open_wake_pipe(self) -> None:
        """The pipe that wakes a sleeping input thread, made again where ``close()`` closed it:
        Textual's suspend (SIGTSTP, Ctrl-Z) closes the driver and its resume starts application
        mode on the same driver, with a new input thread."""
        if self._wake_r < 0:
            self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            self.exit_event.wake_fd = self._wake_w

    def start_application_mode(self) -> None:
        self._open_wake_pipe()
        super().start_application_mode()

    def process_message(self, message) -> None:
        self._last_event_s = time.monotonic()  # an event from the terminal: input is not quiet
        super().process_message(message)

    def _drain_wake_pipe(self) -> None:
        try:
            while os.read(self._wake_r, _READ_BYTES):
                pass
        except OSError:
            pass  # empty (EAGAIN) or closed

    def _bytes_pending(self) -> bool:
        try:
            with selectors.SelectSelector() as sel:
                sel.register(self.fileno, selectors.EVENT_READ)
                return bool(sel.select(0))
        except (OSError, ValueError):
            return False

    def run_input_thread(self) -> None:
        """Sleep until the terminal has input, then read it with Textual's own loop until quiet."""
        event = self.exit_event
        self._drain_wake_pipe()  # a wake-up meant for a thread before this one
        event.begin_thread()
        with selectors.SelectSelector() as sleeper:  # as Textual's: select() works on any terminal fd
            sleeper.register(self.fileno, selectors.EVENT_READ)
            sleeper.register(self._wake_r, selectors.EVENT_READ)
            while not event.stopped():
                ready = {key.fd for key, _ in sleeper.select(IDLE_WAKE_S)}
                if event.stopped():
                    break  # the pipe's byte stays: another input thread may be asleep on it too
                if self._wake_r in ready:
                    self._drain_wake_pipe()
                if self.fileno not in ready:
                    continue
                event.begin_burst(self._bytes_pending)
                try:
                    super().run_input_thread()
                finally:
                    event.end_burst()

    def close(self) -> None:
        super().close()
        # Forget the fd before closing it: a later set() must not write into a reused descriptor.
        self.exit_event.wake_fd = -1
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._wake_r = self._wake_w = -1


def lingering_input_threads() -> list[threading.Thread]:
    """Textual's input threads still running (Textual names them "textual-input"). Textual's own
    driver can leave one behind: on a SIGCONT without a suspend before it, it starts a second input
    thread, and stopping joins only the newer one; the older one, not a daemon, then keeps the
    interpreter from exiting. (The quiet driver's threads end on any stop: ``_InputEvent``.)"""
    return [t for t in threading.enumerate() if t.name == "textual-input" and t.is_alive()
            and t is not threading.current_thread()]


# --- 2 and 3. text drawn once, and when it needs a layout pass ------------------------------------

Shape = tuple[int, int]  # (lines, widest line)


def drawn(widget) -> Optional[tuple]:
    """(key, shape) of the text the widget last got from ``remember_drawn``; None before."""
    return getattr(widget, "_pinmon_drawn", None)


def remember_drawn(widget, key, shape: Shape) -> None:
    widget._pinmon_drawn = (key, shape)


def needs_layout(widget, old: Shape, new: Shape) -> bool:
    """Whether new text of shape ``new`` could change a ``Static``'s size (``old``: the last one).

    A layout pass costs far more than a repaint (the whole screen is arranged again), and at 1 Hz
    most new text is the same lines with other numbers in them. Only an auto width follows the
    widest line; an auto height follows the line count, and also the widest line where a line
    longer than the widget wraps onto a row of its own.
    """
    if old[0] != new[0]:
        return True
    if old[1] == new[1]:
        return False
    width = getattr(widget.styles, "width", None)  # None: not set, the widget fills its parent
    if width is not None and width.is_auto:
        return True
    if getattr(widget.styles, "text_wrap", "wrap") == "nowrap":
        return False  # long lines are cut (ellipsis), never wrapped onto more rows
    room = widget.content_region.width
    return room <= 0 or max(old[1], new[1]) > room


# --- 4. heights Textual may leave stale ---------------------------------------------------------

# Looks at the height after a layout was asked for, each after a refresh.
HEIGHT_CHECKS = 3


def ask_layout(widget: Widget, lines: Callable[[], Optional[int]]) -> None:
    """A layout pass for a widget whose content may take another height: its cached content height
    cleared, and its height looked at after the next refreshes (``lines()``: the lines it draws now,
    None while not known), asking again where the height on screen differs."""
    widget.clear_cached_dimensions()
    widget.refresh(layout=True)
    widget._pinmon_height_checks = HEIGHT_CHECKS  # type: ignore[attr-defined]
    widget.call_after_refresh(_check_height, widget, lines)


def _check_height(widget: Widget, lines: Callable[[], Optional[int]]) -> None:
    left = getattr(widget, "_pinmon_height_checks", 0)
    if left <= 0 or not widget.is_mounted:
        return
    widget._pinmon_height_checks = left - 1  # type: ignore[attr-defined]
    height = widget.styles.height
    if height is not None and not height.is_auto:
        return  # a set height: the content does not size it
    count = lines()
    if count is None:
        widget.call_after_refresh(_check_height, widget, lines)  # not drawn yet: after the next refresh
    elif widget.content_size.height != count:
        widget.clear_cached_dimensions()
        widget.refresh(layout=True)
        widget.call_after_refresh(_check_height, widget, lines)


# --- 5. repainting all of a widget --------------------------------------------------------------

def paint_all(widget: Widget) -> None:
    """Forget the widget's dirty regions: its lines are all drawn anew. Where a release keeps them
    elsewhere, nothing is cleared and Textual repaints what it tracked (correct, only more work)."""
    regions = getattr(widget, "_dirty_regions", None)
    if regions is not None and hasattr(regions, "clear"):
        regions.clear()


# --- 6 and 7. the tab strip, BLANK containers ----------------------------------------------------

try:
    from textual.widgets.tabbed_content import ContentTabs as CONTENT_TABS
except Exception:  # moved: no type matches, the status line follows the panes
    CONTENT_TABS = type("NoContentTabs", (), {})

HONOURS_BLANK = hasattr(Widget, "BLANK")


# --- 8. for the tests: the screen as drawn, and the widgets an update renders ---------------------

def screen_update(app):
    """The whole screen as the compositor draws it (a Rich renderable), modal screens included."""
    return app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)


def screen_strips(app) -> list:
    """The current screen's lines as strips."""
    return app.screen._compositor.render_strips()


def count_renders(monkeypatch) -> list:
    """Patch ``Widget.render_lines`` (with pytest's ``monkeypatch``) to note each widget it renders;
    returns the list it fills."""
    rendered: list = []
    real = Widget.render_lines

    def counting(self, crop):
        rendered.append(self)
        return real(self, crop)

    monkeypatch.setattr(Widget, "render_lines", counting)
    return rendered
