"""The terminal driver: Textual's Linux driver with an input thread that sleeps while nothing is typed.

Textual's input thread wakes ten times a second, key or no key: its loop waits on the terminal for
at most 0.1 s, then asks ``exit_event.is_set()`` whether the app is quitting and lets its key
parser time out a lone Esc. On an idle box those wake-ups cost more than nvitop's whole draw loop
(docs/performance.md).

Here the thread sleeps in ``select()`` on the terminal and on a pipe that quitting writes to. When
bytes arrive it runs Textual's own loop (``LinuxDriver.run_input_thread``: its parser, its
decoding, its messages), and that loop returns once input has been quiet for ``QUIET_POLLS``
consecutive polls and ``QUIET_S`` since the last event: the driver's ``exit_event`` answers
``is_set()`` with True to the input thread at that point, and only there. Any other caller (the
app stopping its input) gets the event's real state.

Only public names of Textual are used: ``LinuxDriver``, its ``run_input_thread``, ``exit_event``,
``fileno`` and ``process_message``. ``supported()`` checks that they are there and that Textual's
loop asks ``exit_event``; where a later Textual differs, the app keeps Textual's own driver. Should
Textual's loop ever stop asking the event between polls, it simply never returns early: the
thread then behaves exactly as Textual's.
"""
from __future__ import annotations

import os
import selectors
import threading
import time

from textual.drivers.linux_driver import LinuxDriver

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


def _names(fn) -> tuple:
    """The attribute and global names a function's code uses (no source file needed)."""
    return getattr(getattr(fn, "__code__", None), "co_names", ())


def supported() -> bool:
    """Whether this Textual's Linux driver has the public parts ``QuietLinuxDriver`` builds on."""
    run = getattr(LinuxDriver, "run_input_thread", None)
    return (callable(run) and callable(getattr(LinuxDriver, "process_message", None))
            and "exit_event" in _names(LinuxDriver.__init__)
            and "exit_event" in _names(run) and "is_set" in _names(run)
            and hasattr(os, "pipe2"))


class _InputEvent(threading.Event):
    """The driver's exit event. ``set()`` also writes a byte to a pipe, so a thread asleep in
    ``select()`` wakes at once, and counts itself: an input thread stops on any ``set()`` made
    after it started, even one that was cleared again before it looked. Textual can run two input
    threads (on SIGCONT it resumes the application mode without suspending it first), and the app
    stopping joins only the newer one before clearing the event.

    While Textual's loop runs a burst of input, the input thread's ``is_set()`` is also True once
    input has been quiet (see the module's docstring); any other thread gets the real state."""

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


class QuietLinuxDriver(LinuxDriver):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._last_event_s = 0.0
        self.exit_event = _InputEvent(self._wake_w, lambda: self._last_event_s)

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
