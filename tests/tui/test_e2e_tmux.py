"""The real `pinmon demo` on a real terminal: tmux at 80x24, the screen read with capture-pane.

Checks what a user over SSH sees (the panels, a finding), that `q`, SIGTERM and a closed terminal
(SIGHUP, as when an SSH session drops) end the app with the terminal restored, and that a recording
started with `r` is complete on disk after SIGTERM. Skipped where tmux is missing (CI installs it).
"""
import gzip
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import uuid
import zlib

import pytest

from tests.waiting import wait_until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Tmux:
    """One private tmux server (its own socket) holding one 80x24 session."""

    def __init__(self, workdir, width=80, height=24):
        self.socket = f"pinmon-e2e-{uuid.uuid4().hex[:8]}"
        self.workdir = workdir
        self.size = (width, height)

    def tmux(self, *args, check=True):
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              check=check, timeout=20)

    def start(self, argv):
        rc_file = os.path.join(self.workdir, "rc")
        pid_file = os.path.join(self.workdir, "pid")
        q = shlex.quote
        # The inner shell writes its own pid and then becomes pinmon (exec), so the pid is pinmon's
        # and pinmon owns the terminal; the outer shell records the exit status and keeps the pane.
        lines = [f"cd {q(self.workdir)}", f"export PYTHONPATH={q(ROOT)} TERM=xterm-256color",
                 "unset COLUMNS LINES",
                 f"sh -c 'echo $$ > \"$0\"; shift; exec \"$@\"' {q(pid_file)} x {' '.join(map(q, argv))}",
                 f"echo $? > {q(rc_file)}", "sleep 60"]
        wrapper = os.path.join(self.workdir, "run.sh")
        with open(wrapper, "w") as f:
            f.write("\n".join(lines) + "\n")
        w, h = self.size
        self.tmux("new-session", "-d", "-s", "e2e", "-x", str(w), "-y", str(h), f"sh {q(wrapper)}")
        return rc_file, pid_file

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "e2e", check=False).stdout

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "e2e", *keys)

    def kill(self):
        self.tmux("kill-server", check=False)


def read_int(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def term(tmp_path):
    t = Tmux(str(tmp_path))
    yield t
    t.kill()


DEMO = [sys.executable, "-m", "pinmon", "demo", "--speed", "16"]


def test_demo_in_tmux_shows_panels_and_a_finding_and_quits_on_q(term):
    rc_file, _ = term.start(DEMO)
    # At 16x the demo reaches the write-combined buffer and then the pinned-memory hog within seconds.
    screen = wait_until(lambda: (s := term.screen()) and "REPLAY" in s and ("WARN" in s or "CRIT" in s) and s,
                        timeout_s=45, interval_s=0.2)
    assert screen, term.screen()
    for text in ("REPLAY 16x", "GPUs", "Host memory", "Advisor", "Pinned memory by process", "Gen5 x16",
                 "NVIDIA H200", "q Quit"):
        assert text in screen, (text, screen)
    lines = screen.splitlines()
    assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
    # The Advisor tab gives a finding its full text.
    term.keys("6")
    assert wait_until(lambda: "of RAM" in term.screen() or "pinned" in term.screen(), timeout_s=10, interval_s=0.2)
    term.keys("q")
    assert wait_until(lambda: read_int(rc_file) is not None, timeout_s=20, interval_s=0.2), term.screen()
    assert read_int(rc_file) == 0
    # The alternate screen is gone: the terminal shows the shell's screen again, not the app.
    assert "REPLAY" not in term.screen()


def recorded_lines(directory) -> int:
    """Whole lines in the recording being written in ``directory`` so far (each is sync-flushed, so
    what is on disk decompresses up to its last line); 0 before the file is there."""
    for p in directory.iterdir():
        if p.name.startswith("pinmon-") and p.name.endswith(".jsonl.gz"):
            return zlib.decompressobj(wbits=31).decompress(p.read_bytes()).count(b"\n")
    return 0


def test_sigterm_exits_cleanly_and_flushes_a_recording(term, tmp_path):
    rc_file, pid_file = term.start(DEMO)
    assert wait_until(lambda: "REPLAY" in term.screen(), timeout_s=30, interval_s=0.2), term.screen()
    term.keys("r")
    assert wait_until(lambda: "REC" in term.screen(), timeout_s=10, interval_s=0.2), term.screen()
    wait_until(lambda: recorded_lines(tmp_path) >= 3, timeout_s=20, interval_s=0.2,
               what="three snapshots in the recording")
    pid = read_int(pid_file)
    os.kill(pid, signal.SIGTERM)
    assert wait_until(lambda: read_int(rc_file) is not None, timeout_s=20, interval_s=0.2), term.screen()
    assert read_int(rc_file) == 0
    assert "REPLAY" not in term.screen()
    [rec] = [p for p in tmp_path.iterdir() if p.name.startswith("pinmon-") and p.name.endswith(".jsonl.gz")]
    with gzip.open(rec, "rt") as f:  # a complete gzip stream: the recorder was closed, not cut off
        rows = [json.loads(line) for line in f]
    assert rows and all(r["schema"] == "pinmon.snapshot/2" for r in rows)


def test_closed_terminal_sighup_ends_the_app(term):
    _, pid_file = term.start(DEMO)
    assert wait_until(lambda: "REPLAY" in term.screen(), timeout_s=30, interval_s=0.2), term.screen()
    pid = read_int(pid_file)
    assert pid and alive(pid)
    term.kill()  # the terminal goes away, as when an SSH session drops: the app gets SIGHUP
    assert wait_until(lambda: not alive(pid), timeout_s=20, interval_s=0.2), f"pinmon (pid {pid}) still running"
