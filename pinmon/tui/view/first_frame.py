"""The app's frame drawn before Textual has loaded: the tab strip and "starting…", on the terminal's
alternate screen, written with a few escape sequences as soon as the command line is read.

Loading Textual and composing the app take most of the time to the app's first frame (even a bare
Textual app needs about as long again as the whole start of nvitop: docs/performance.md); this
frame puts the app's outline on screen at once, and Textual's first frame replaces it. Keys pressed meanwhile wait in the terminal's input (echo is off until the app
takes the terminal) and reach the app when it starts; SIGTERM or SIGHUP meanwhile gives the terminal
back before ending pinmon.

Drawn only where the app itself draws: stdin and stdout terminals, and a size the app fits
(``sizing.too_small`` says no). ``handover()`` gives the terminal's modes back just before Textual
takes the terminal; ``abandon()`` leaves the alternate screen where the app never started. No Textual or Rich here (``tests/test_imports.py``).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any, TextIO

from .sizing import too_small

# The app's tabs, in order: the tab strip's ids and labels (layout.py composes the panes from it).
TABS = (("overview", "1 Overview"), ("gpus", "2 GPUs"), ("memory", "3 Memory"),
        ("processes", "4 Processes"), ("probe", "5 Probe"), ("advisor", "6 Advisor"),
        ("containers", "7 Containers"))

ENTER = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J"  # the alternate screen, cleared, the cursor hidden
LEAVE = "\x1b[?25h\x1b[?1049l"                # the cursor shown, the normal screen back
STARTING = "starting…"


def frame_text(width: int, height: int) -> str | None:
    """The frame's bytes for a ``width`` x ``height`` terminal, or None where the app would show its
    "too small" hint instead. The strip as the app lays it out: a space, then each label and two
    spaces; the first tab bold, the underline under it."""
    if too_small(width, height):
        return None
    labels = [label for _, label in TABS]
    strip = " " + "  ".join(labels)
    first = len(labels[0]) + 2
    rule = "━" * first + "\x1b[2m" + "━" * max(0, width - first) + "\x1b[22m"
    strip_shown = strip[:width]
    bold_end = 1 + len(labels[0])
    # Each row placed by the cursor (row;column), whatever the terminal does with a newline.
    return (ENTER + "\x1b[1m" + strip_shown[:bold_end] + "\x1b[22m" + strip_shown[bold_end:]
            + "\x1b[2;1H" + rule + "\x1b[3;3H" + STARTING)


# Signals whose default ends pinmon before Textual has its own handlers: while the frame shows, they
# first give the terminal back (its modes, the normal screen), then end pinmon as they would have.
ENDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class FirstFrame:
    """A frame on screen until the app takes the terminal: ``handover`` gives it to Textual, which
    leaves the alternate screen itself at exit; ``abandon`` leaves it where Textual never took it
    (a no-op after ``handover``). Each is safe to call more than once."""

    def __init__(self, out: TextIO, fd: int | None, saved_modes: list | None):
        self.out = out
        self.fd = fd
        self.saved_modes = saved_modes
        self.shown = True
        self._handlers: dict[int, Any] = {}

    def guard_signals(self) -> None:
        """SIGTERM and SIGHUP, where they would end pinmon (their default), give the terminal back first.
        Only from the main thread (Python's rule for handlers); elsewhere nothing changes."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in ENDING_SIGNALS:
            try:
                if signal.getsignal(sig) is signal.SIG_DFL:
                    self._handlers[sig] = signal.signal(sig, self._ended)
            except (OSError, ValueError):
                pass

    def _ended(self, signum: int, _frame: object) -> None:
        self.abandon()
        os.kill(os.getpid(), signum)  # the default action, now restored: pinmon ends as it would have

    def release_signals(self) -> None:
        handlers, self._handlers = self._handlers, {}
        for sig, previous in handlers.items():
            try:
                signal.signal(sig, previous)
            except (OSError, ValueError):
                pass

    def restore_modes(self) -> None:
        if self.saved_modes is None or self.fd is None:
            return
        modes, self.saved_modes = self.saved_modes, None
        try:
            import termios

            termios.tcsetattr(self.fd, termios.TCSANOW, modes)
        except (ImportError, OSError, ValueError):  # termios.error is an OSError subclass
            pass

    def handover(self) -> None:
        """The terminal's modes and the signals' handlers back as they were, for Textual to save and
        restore them itself; its screen is Textual's from now on."""
        self.release_signals()
        self.restore_modes()
        self.shown = False

    def abandon(self) -> None:
        """The app did not start: the signals' handlers, the modes, the normal screen and the cursor back."""
        self.release_signals()
        self.restore_modes()
        if not self.shown:
            return
        self.shown = False
        try:
            self.out.write(LEAVE)
            self.out.flush()
        except (OSError, ValueError):
            pass


def draw_first_frame(out: TextIO | None = None, inp: TextIO | None = None) -> FirstFrame | None:
    """Draw the frame on ``out`` (stdout) where the app will draw; None where it does not (not two
    terminals, a size the app does not fit, any error asking the terminal)."""
    out = sys.stdout if out is None else out
    inp = sys.stdin if inp is None else inp
    try:
        if not (out.isatty() and inp.isatty()):
            return None
        width, height = os.get_terminal_size(out.fileno())
        text = frame_text(width, height)
        if text is None:
            return None
        fd = inp.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    saved = quiet_input(fd)
    try:
        out.write(text)
        out.flush()
    except (OSError, ValueError):
        FirstFrame(out, fd, saved).restore_modes()
        return None
    frame = FirstFrame(out, fd, saved)
    frame.guard_signals()
    return frame


def quiet_input(fd: int) -> list | None:
    """Echo off on the terminal ``fd`` (keys typed now are not drawn over the frame); the modes before,
    or None where they cannot be read or set."""
    try:
        import termios

        before = termios.tcgetattr(fd)
        quiet = termios.tcgetattr(fd)
        quiet[3] &= ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
        return before
    except (ImportError, OSError, ValueError):
        return None
