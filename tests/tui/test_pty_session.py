"""The real app on a pseudo-terminal it controls, through what a terminal session does to it: keys
after a quiet spell, a resize, a paste, SIGTSTP then fg (SIGCONT), Ctrl-Z then fg, a SIGCONT alone,
and a closed terminal (SIGHUP with SIGCONT). Every key typed arrives exactly once, and the app ends
within seconds of the hang-up.

The app runs on its own driver (``QuietInputDriver``: Textual's, its input thread asleep while the
terminal is quiet) and, as a user may choose with ``TEXTUAL_DRIVER``, on Textual's; .ci/run runs the
TUI tests on the oldest Textual allowed as well as the newest.
"""
from __future__ import annotations

import fcntl
import os
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest

from tests.waiting import wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STEP_S = 10.0  # the longest any one step may take before the test calls it a hang


class Session:
    """The app on a new pseudo-terminal, as its session's controlling terminal."""

    def __init__(self, tmp_path, env_extra):
        self.log = tmp_path / "events.log"
        self.master, slave = os.openpty()
        self.set_size(80, 24, slave)
        env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": ROOT, **env_extra}
        env.pop("COLUMNS", None)
        env.pop("LINES", None)

        def controlling_tty():  # the child: a session of its own, this terminal its controlling one
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "pty_app.py"), str(self.log)],
                                     stdin=slave, stdout=slave, stderr=slave, env=env, cwd=str(tmp_path),
                                     start_new_session=True, preexec_fn=controlling_tty, close_fds=True)
        os.close(slave)
        os.set_blocking(self.master, False)

    def set_size(self, cols, rows, fd=None):
        fcntl.ioctl(self.master if fd is None else fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def drain(self):
        """Read what the app drew, so its writes never block on a full terminal."""
        try:
            while os.read(self.master, 65536):
                pass
        except (BlockingIOError, OSError):
            pass

    def type(self, data: bytes):
        os.write(self.master, data)

    def lines(self) -> list[str]:
        try:
            return self.log.read_text().splitlines()
        except FileNotFoundError:
            return []

    def wait(self, predicate, what: str, timeout: float = STEP_S):
        """``wait_until``, reading the terminal's output meanwhile; a timeout shows the app's log."""
        try:
            wait_until(lambda: (self.drain(), predicate())[1], timeout_s=timeout, what=what)
        except AssertionError as e:
            raise AssertionError(f"{e}; the app's log: {self.lines()}") from None

    def wait_line(self, line: str, count: int = 1):
        self.wait(lambda: self.lines().count(line) >= count, repr(line))

    def lines_starting(self, prefix: str) -> int:
        return sum(line.startswith(prefix) for line in self.lines())

    def threads(self) -> int:
        try:
            return len(os.listdir(f"/proc/{self.proc.pid}/task"))
        except OSError:
            return 0

    def state(self) -> str:
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return "gone"

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        os.close(self.master)


QUIET_SPELL_S = 2.0
# Textual's input thread wakes every 0.1 s (20 times in the spell); parked, it wakes for nothing.
PARKED_MAX_WAKEUPS = 2
STOCK_DRIVER = "textual.drivers.linux_driver:LinuxDriver"


@pytest.fixture(params=["quiet", "stock"])
def session(tmp_path, request):
    s = Session(tmp_path, {"TEXTUAL_DRIVER": STOCK_DRIVER} if request.param == "stock" else {})
    s.driver = request.param
    yield s
    s.close()


def voluntary_switches(pid: int, tid: int) -> int:
    """How many times the thread has gone to sleep and been woken (the kernel's count)."""
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches in the thread's status")


def test_a_terminal_session_loses_no_key_and_a_hang_up_ends_the_app(session):
    s = session
    s.wait_line("mounted")

    s.type(b"x")
    s.wait_line("key x")
    (tid,) = [int(line.split()[1]) for line in s.lines() if line.startswith("input_thread ")]
    time.sleep(1.5)  # not a wait: a quiet spell, after which the next key must still arrive
    before = voluntary_switches(s.proc.pid, tid)
    time.sleep(QUIET_SPELL_S)  # not a wait: the spell over which the wake-ups are counted
    wakeups = voluntary_switches(s.proc.pid, tid) - before
    if s.driver == "quiet":
        assert wakeups <= PARKED_MAX_WAKEUPS, f"the parked input thread woke {wakeups} times"
    else:  # the comparison that shows the count can tell the two apart
        assert wakeups >= QUIET_SPELL_S / 0.1 / 2
    s.type(b"y")
    s.wait_line("key y")
    time.sleep(1.5)  # not a wait: parked again, a lone Esc (the first byte after) is still told from a sequence
    s.type(b"\x1b")
    s.wait_line("key escape")

    s.set_size(100, 30)  # the kernel sends SIGWINCH to the terminal's foreground process group
    s.wait_line("resize 100x30")
    s.type(b"\x1b[A")  # an escape sequence: one key
    s.wait_line("key up")

    s.type(b"\x1b[200~pasted text\x1b[201~")
    s.wait_line("paste 'pasted text'")
    s.type(b"v")
    s.wait_line("key v")

    time.sleep(1.5)  # not a wait: parked, the suspend below must wake the input thread to stop it
    for how, key in ((lambda: os.kill(s.proc.pid, signal.SIGTSTP), "w"), (lambda: s.type(b"\x1a"), "k")):
        how()  # SIGTSTP from outside, then Ctrl-Z typed: the app stops itself
        s.wait(lambda: s.state() == "T", "stopped")
        os.kill(s.proc.pid, signal.SIGCONT)  # fg
        s.wait(lambda: s.state() in ("S", "R"), "running again")
        s.type(key.encode())
        s.wait_line(f"key {key}")

    # A SIGCONT alone: Textual resumes without having suspended, starting a second writer and input
    # thread and sending the terminal's size again. The key is typed once both have happened.
    threads, resizes = s.threads(), s.lines_starting("resize ")
    os.kill(s.proc.pid, signal.SIGCONT)
    s.wait(lambda: s.threads() >= threads + 2 and s.lines_starting("resize ") > resizes,
           "the resume's threads and size")
    s.type(b"j")
    s.wait_line("key j")

    typed = ["x", "y", "escape", "up", "v", "w", "k", "j"]
    keys = [line[4:] for line in s.lines() if line.startswith("key ")]
    assert [k for k in keys if k != "ctrl+z"] == typed  # each once, in order: none lost, none twice

    os.killpg(s.proc.pid, signal.SIGHUP)  # the terminal closes: SIGHUP, then SIGCONT, to the session
    os.killpg(s.proc.pid, signal.SIGCONT)
    s.wait(lambda: s.proc.poll() is not None, "the app's exit after the hang-up")


def test_q_after_a_quiet_spell_ends_the_app(session):
    s = session
    s.wait_line("mounted")
    # The input thread parked (on the quiet driver): q must still be read, and the stop must wake the
    # parked wait rather than leave the app waiting on its input thread.
    time.sleep(1.5)  # not a wait: a quiet spell
    s.type(b"q")
    # A stop that left the parked wait asleep would hold the app on its input thread for good.
    s.wait(lambda: s.proc.poll() is not None, "the app's exit after q")
    assert s.proc.returncode == 0
    assert "key q" in s.lines()
