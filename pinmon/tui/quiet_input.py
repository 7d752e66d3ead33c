"""Textual's Linux driver with an input thread that sleeps while no key comes.

Textual's input thread waits for the terminal with a 0.1 s timeout, so an idle pinmon wakes it ten
times a second only to find nothing: about a seventh of the app's CPU at 1 Hz on the GPU box (its
``textual-input`` thread, ``bench/cpu_breakdown.py --parts threads``). ``QuietInputDriver`` keeps
Textual's own loop, parser and event handling, and parks the thread once input has been quiet for
``PARK_AFTER_S``: it then blocks, with no timeout, until the terminal is readable or the driver stops.

Only public names of Textual are used: ``LinuxDriver``, its ``run_input_thread``, ``process_message``
and ``exit_event`` (the flag its loop polls between waits). The gate below answers that flag "set"
to the input thread once input is quiet; Textual's loop then returns as it does on exit, and this
driver waits for the next byte before running it again (a new parser each time, as after a
suspend). Anyone else asking the flag gets the real answer, so stopping, suspending and resuming
work as Textual wrote them; a stop also writes to a wake-up pipe, which ends the parked wait. A
Textual release whose loop no longer polls the flag simply never parks: the thread then wakes as
Textual's does.
"""
from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable
from typing import Any

from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

# Quiet this long (no event from the terminal), the input thread parks. Well above Textual's escape
# delay (0.1 s by default), so a lone Esc or a split sequence is parsed before the parser restarts.
PARK_AFTER_S = 1.0


class InputGate(threading.Event):
    """``exit_event`` for ``QuietInputDriver``: the real stop flag, plus "quiet, park now" for the
    input thread alone, and a pipe whose byte wakes a parked wait when the flag is set."""

    def __init__(self, park_after_s: float = PARK_AFTER_S, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.park_after_s = park_after_s
        self._clock = clock
        self._last_event = clock()
        self._input_ident: int | None = None
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._closed = False

    # --- what Textual calls -----------------------------------------------------------------

    def is_set(self) -> bool:
        if super().is_set():
            return True
        # Textual's input loop asks between its waits: once input has been quiet long enough, it
        # is told to stop; every other caller (disable_input, in the main thread) gets the truth.
        return (threading.get_ident() == self._input_ident
                and self._clock() - self._last_event >= self.park_after_s)

    def set(self) -> None:
        super().set()
        if self._closed:  # the descriptors' numbers may belong to other files by now
            return
        try:
            os.write(self._wake_w, b"x")
        except OSError:  # the pipe is full: a byte already waits, the wait ends either way
            pass

    def clear(self) -> None:
        super().clear()
        if not self._closed:
            self._drain()  # a stop's byte, left unread when the thread was not parked

    # --- what the driver calls --------------------------------------------------------------

    def stop_requested(self) -> bool:
        """The real flag, whoever asks."""
        return super().is_set()

    def input_thread_started(self) -> None:
        self._input_ident = threading.get_ident()
        self.touch()

    def touch(self) -> None:
        """Input came (an event, or bytes while parked): the thread stays awake a while."""
        self._last_event = self._clock()

    def wait_for_input(self, fileno: int) -> bool:
        """Block until ``fileno`` is readable (True) or a stop is requested (False), with no timeout:
        nothing runs while the terminal is quiet."""
        while not self.stop_requested():
            try:
                readable, _, _ = select.select([fileno, self._wake_r], [], [])
            except InterruptedError:
                continue
            except (OSError, ValueError):  # the terminal is gone: nothing more to read
                return False
            if self._wake_r in readable:
                self._drain()
            if fileno in readable and not self.stop_requested():
                self.touch()
                return True
        return False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _drain(self) -> None:
        try:
            while os.read(self._wake_r, 64):
                pass
        except OSError:  # empty (EAGAIN): drained
            pass


class QuietInputDriver(LinuxDriver):
    """``LinuxDriver`` whose input thread parks while the terminal is quiet (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gate = InputGate()
        self.exit_event = self._gate

    def run_input_thread(self) -> None:
        gate = self._gate
        if self.exit_event is not gate:  # replaced by someone else: Textual's own loop, which never parks
            super().run_input_thread()
            return
        gate.input_thread_started()
        while True:
            super().run_input_thread()  # returns on a stop, or once input has been quiet
            if gate.stop_requested() or not gate.wait_for_input(self.fileno):
                return

    def process_message(self, message: Message) -> None:
        self._gate.touch()
        super().process_message(message)

    def close(self) -> None:
        super().close()
        self._gate.close()
