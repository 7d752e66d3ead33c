"""The terminal driver: Textual's Linux driver with an input thread that sleeps while nothing is typed.

Textual's input thread wakes ten times a second, whether or not a key came, to see whether the app
is quitting and whether a lone Esc has waited long enough to be a key (an Esc is told from the start
of an escape sequence by a short delay). On an idle box that thread cost more than the collection
did (bench/cpu_breakdown.py: 0.31% of a core, 0.12% with this driver). Here the thread waits on the terminal and on a pipe that quitting writes to; it
wakes early only while the key parser holds a partial sequence, and otherwise every
``IDLE_WAKE_S`` as a safety net. Keys, their decoding and their order are Textual's own (its
parser, its messages).

It relies on private parts of Textual (``LinuxDriver.run_input_thread`` and ``exit_event``, the
parser's pending timeout); ``supported()`` checks them and the app keeps Textual's driver where
they differ.
"""
from __future__ import annotations

import os
import selectors
import threading
from codecs import getincrementaldecoder
from typing import Optional

from textual.drivers.linux_driver import LinuxDriver

try:  # Textual's private parts: where they moved, ``supported()`` says no and the app keeps its driver
    from textual._time import get_time
    from textual._xterm_parser import XTermParser
except Exception:  # an ImportError, or whatever a changed module raises on import
    get_time = XTermParser = None

# The longest the input thread sleeps with no key pending: a bound should a wake-up ever be lost
# (quitting wakes it through the pipe at once).
IDLE_WAKE_S = 5.0
_READ_BYTES = 4096


def _names(fn) -> tuple:
    """The attribute and global names a function's code uses (no source file needed)."""
    return getattr(getattr(fn, "__code__", None), "co_names", ())


def supported() -> bool:
    """Whether this Textual's Linux driver and key parser have the parts ``QuietLinuxDriver`` uses."""
    if XTermParser is None or not callable(get_time):
        return False
    try:
        parser = XTermParser(False)
    except Exception:
        return False
    return (callable(getattr(LinuxDriver, "run_input_thread", None))
            and callable(getattr(LinuxDriver, "_run_input_thread", None))
            and "exit_event" in _names(LinuxDriver.__init__)
            and "exit_event" in _names(LinuxDriver.run_input_thread)
            and hasattr(parser, "_timeout_time") and callable(getattr(parser, "tick", None))
            and hasattr(os, "pipe2"))


class _WakingEvent(threading.Event):
    """An Event whose ``set()`` also writes a byte to a pipe, so a thread in select() wakes at once."""

    def __init__(self, wake_fd: int):
        super().__init__()
        self.wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        fd = self.wake_fd
        if fd >= 0:
            try:
                os.write(fd, b"x")
            except OSError:
                pass  # full (a wake-up is already pending) or closed: nothing more to do


class QuietLinuxDriver(LinuxDriver):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.exit_event = _WakingEvent(self._wake_w)

    def _drain_wake_pipe(self) -> None:
        try:
            while os.read(self._wake_r, _READ_BYTES):
                pass
        except OSError:
            pass  # empty (EAGAIN) or closed

    def run_input_thread(self) -> None:
        """Wait for input and dispatch events (Textual's loop, without its 10 Hz wake-up)."""
        selector = selectors.SelectSelector()  # as Textual's: select() works on any terminal fd
        fileno = self.fileno
        selector.register(fileno, selectors.EVENT_READ)
        selector.register(self._wake_r, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode

        def wait_s() -> float:
            due: Optional[float] = parser._timeout_time
            if due is None:
                return IDLE_WAKE_S
            return min(IDLE_WAKE_S, max(0.0, due - get_time()))

        try:
            while not self.exit_event.is_set():
                for key, mask in selector.select(wait_s()):
                    if key.fd == self._wake_r:
                        self._drain_wake_pipe()
                    elif mask & selectors.EVENT_READ:
                        data = decode(os.read(fileno, _READ_BYTES))
                        if not data:  # end of input (a closed or piped stdin): stop watching it
                            selector.unregister(fileno)
                            continue
                        for event in parser.feed(data):
                            self.process_message(event)
                for event in parser.tick():
                    self.process_message(event)
        finally:
            selector.close()
            try:
                for _ in parser.feed(""):
                    pass
            except Exception:
                pass  # what was left half-typed at exit is dropped, as Textual does

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
