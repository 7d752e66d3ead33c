"""The attach tests' set-up: the stand-in libcuda built with gcc, the reasons to skip, and a child
process (``child.py``) that calls it on command."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "standin_libcuda.c")
CHILD = os.path.join(HERE, "child.py")
TRACEFS = "/sys/kernel/tracing"


def why_not() -> str | None:
    """Why the real-kernel attach tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "attach tests need root (uprobes are set through tracefs)"
    if shutil.which("gcc") is None:
        return "attach tests need gcc to build the stand-in libcuda"
    from pinmon.attach.tracefs import TracefsError, open_tracefs
    try:
        fs = open_tracefs()
    except TracefsError as e:
        return f"attach tests need tracefs: {e}"
    if not fs.has_uprobes:
        return "attach tests need a kernel with uprobe events (CONFIG_UPROBE_EVENTS)"
    return None


def build(directory: str, source: str = SOURCE, name: str = "libcuda.so.1") -> str:
    path = os.path.join(directory, name)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-fno-ipa-icf", "-o", path, source], check=True,
                   capture_output=True, timeout=120)
    return path


class Child:
    """A process that has loaded ``lib`` and calls it when told."""

    def __init__(self, lib: str) -> None:
        self.proc = subprocess.Popen([sys.executable, CHILD, lib], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self.pid = self.proc.pid
        hello = json.loads(self.proc.stdout.readline())
        self.buffers = hello["buffers"]

    def call(self, fn: str, *args, n: int = 1, rate: float | None = None, thread: bool = False) -> dict:
        self.proc.stdin.write(json.dumps({"fn": fn, "args": list(args), "n": n, "rate": rate, "thread": thread}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"quit": True}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
