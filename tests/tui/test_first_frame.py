"""The outline drawn before Textual loads: what it writes, where it is skipped, that it gives the
terminal back as it found it, and, on a real pseudo-terminal, that the app's own frame follows it."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import termios

import pytest

from pinmon.tui.view import first_frame as ff
from pinmon.tui.view.sizing import MIN_HEIGHT, MIN_WIDTH
from tests.waiting import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


def shown(text: str) -> str:
    return ESCAPES.sub("", text)


def test_the_outline_has_every_tab_and_says_it_is_starting():
    text = ff.frame_text(80, 24)
    assert text is not None and text.startswith(ff.ENTER)
    plain = shown(text)
    for _, label in ff.TABS:
        assert label in plain
    assert ff.STARTING in plain
    assert "Quit" not in plain  # the footer's keys are the app's, drawn once they answer


@pytest.mark.parametrize("size", [(MIN_WIDTH, MIN_HEIGHT), (80, 24), (300, 100)])
def test_no_row_is_wider_than_the_terminal(size):
    width, height = size
    rows = re.split(r"\x1b\[\d+;\d+H", ff.frame_text(width, height))
    assert all(len(shown(r)) <= width for r in rows)


@pytest.mark.parametrize("size", [(MIN_WIDTH - 1, 24), (80, MIN_HEIGHT - 1), (40, 12)])
def test_a_terminal_the_app_does_not_fit_gets_no_outline(size):
    assert ff.frame_text(*size) is None  # the app shows its "too small" hint there


def test_not_a_terminal_draws_nothing():
    out = io.StringIO()
    assert ff.draw_first_frame(out, io.StringIO()) is None
    assert out.getvalue() == ""


class Pty:
    """A pseudo-terminal pair in this process: ``out``/``inp`` on the terminal side, ``master`` read here."""

    def __init__(self, cols=80, rows=24):
        import fcntl
        import struct

        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.out = os.fdopen(os.dup(self.slave), "w", encoding="utf-8")
        self.inp = os.fdopen(os.dup(self.slave), "r", encoding="utf-8")
        os.set_blocking(self.master, False)

    def written_bytes(self) -> bytes:
        data = b""
        try:
            while chunk := os.read(self.master, 65536):
                data += chunk
        except (BlockingIOError, OSError):
            pass
        return data

    def written(self) -> str:
        return self.written_bytes().decode("utf-8", "replace")

    def close(self):
        for f in (self.out, self.inp):
            f.close()
        os.close(self.slave)
        os.close(self.master)


@pytest.fixture
def tty():
    p = Pty()
    yield p
    p.close()


class PtyProcess:
    """``argv`` run on a new 80x24 pseudo-terminal, its controlling terminal, from ``/`` (nothing of the
    working directory on its path); ``before`` the terminal's modes at the start, ``text()`` all it
    wrote so far."""

    def __init__(self, argv, env=None):
        import fcntl

        self.pty = Pty()
        self.before = termios.tcgetattr(self.pty.slave)
        self.out = bytearray()
        slave = self.pty.slave

        def controlling_tty():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": ROOT, **(env or {})}
        env.pop("COLUMNS", None)
        env.pop("LINES", None)
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd="/",
                                     start_new_session=True, preexec_fn=controlling_tty)

    def text(self) -> str:
        self.out.extend(self.pty.written_bytes())
        return self.out.decode("utf-8", "replace")

    def modes(self) -> list:
        return termios.tcgetattr(self.pty.slave)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.pty.close()


def test_echo_is_off_while_it_shows_and_back_after_the_handover(tty):
    before = termios.tcgetattr(tty.slave)
    assert before[3] & termios.ECHO
    frame = ff.draw_first_frame(tty.out, tty.inp)
    assert frame is not None
    assert not termios.tcgetattr(tty.slave)[3] & termios.ECHO  # keys typed now wait, undrawn
    assert "1 Overview" in shown(tty.written())
    frame.handover()
    assert termios.tcgetattr(tty.slave) == before
    frame.abandon()  # Textual owns the screen now: nothing more is written
    assert tty.written() == ""


def test_an_app_that_never_starts_leaves_the_alternate_screen(tty):
    before = termios.tcgetattr(tty.slave)
    frame = ff.draw_first_frame(tty.out, tty.inp)
    tty.written()
    frame.abandon()
    frame.abandon()
    assert tty.written() == ff.LEAVE
    assert termios.tcgetattr(tty.slave) == before


def test_an_error_before_the_app_starts_gives_the_terminal_back(tty, monkeypatch):
    from pinmon.cli import common

    def broken(*args):
        raise RuntimeError("the app failed before Textual took the terminal")

    before = termios.tcgetattr(tty.slave)
    frame = ff.draw_first_frame(tty.out, tty.inp)
    monkeypatch.setattr(common, "_run_app", broken)
    with pytest.raises(RuntimeError):
        common.run_app(source=None, settings=None, frame=frame)
    assert tty.written().endswith(ff.LEAVE)
    assert termios.tcgetattr(tty.slave) == before


@pytest.mark.parametrize("argv", [["demo", "--speed", "1"], ["--no-probe", "--interval", "1"]], ids=["demo", "live"])
def test_the_real_app_draws_the_outline_first_then_its_frame_and_restores_the_terminal(tmp_path, argv):
    app = PtyProcess([sys.executable, "-m", "pinmon", *argv], env={"HOME": str(tmp_path)})
    try:
        wait_until(lambda: "q Quit" in shown(app.text()), timeout_s=60, what="the app's own frame")
        text = app.text()
        assert text.startswith(ff.ENTER)
        assert text.index(ff.STARTING) < text.index("Quit")  # the outline, then the app's frame
        os.write(app.pty.master, b"q")
        wait_until(lambda: app.proc.poll() is not None, timeout_s=30, what="the app to quit on q",
                   retry_on=(OSError,))
        app.text()
        assert app.proc.returncode == 0
        assert app.modes() == app.before  # echo and the line discipline as they were
    finally:
        app.close()


def test_the_frame_guards_sigterm_and_sighup_until_the_handover(tty):
    import signal

    sigs = (signal.SIGTERM, signal.SIGHUP)
    saved = {s: signal.getsignal(s) for s in sigs}  # a test run may have its own handlers there
    try:
        for s in sigs:
            signal.signal(s, signal.SIG_DFL)  # as a fresh pinmon has them
        frame = ff.draw_first_frame(tty.out, tty.inp)
        assert all(signal.getsignal(s) == frame._ended for s in sigs)
        frame.handover()
        assert all(signal.getsignal(s) == signal.SIG_DFL for s in sigs)
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def test_a_handler_already_there_is_left_alone(tty):
    import signal

    saved = signal.getsignal(signal.SIGTERM)

    def mine(signum, frame):
        pass

    try:
        signal.signal(signal.SIGTERM, mine)
        frame = ff.draw_first_frame(tty.out, tty.inp)
        assert signal.getsignal(signal.SIGTERM) is mine
        frame.handover()
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, saved)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_signal_before_the_app_starts_gives_the_terminal_back_then_ends_pinmon(sig):
    import signal

    code = ("import os, signal, sys\n"
            "from pinmon.tui.view.first_frame import draw_first_frame\n"
            "frame = draw_first_frame()\n"
            "assert frame is not None\n"
            f"os.kill(os.getpid(), signal.{sig})\n"
            "signal.pause()\n")
    child = PtyProcess([sys.executable, "-c", code])
    try:
        wait_until(lambda: (child.text(), child.proc.poll() is not None)[1], timeout_s=30,
                   what="the signal to end it")
        text = child.text()
        assert child.proc.returncode == -getattr(signal, sig)  # ended by the signal, as without the frame
        assert ff.STARTING in text and text.endswith(ff.LEAVE)
        assert child.modes() == child.before
    finally:
        child.close()


def test_a_terminal_that_cannot_encode_the_frame_gets_none_and_its_modes_back(tty):
    before = termios.tcgetattr(tty.slave)
    latin1 = os.fdopen(os.dup(tty.slave), "w", encoding="latin-1")
    try:
        assert ff.draw_first_frame(latin1, tty.inp) is None  # "━" has no latin-1 byte
        assert tty.written() == ""
        assert termios.tcgetattr(tty.slave) == before
    finally:
        latin1.close()
