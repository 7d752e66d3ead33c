"""The attach tests' set-up: the stand-in libcuda built with gcc, the reasons to skip, a child
process (``child.py``) that calls it on command, the fixtures that give both (``lib``, ``child``:
``tests/conftest.py`` loads this module as a plugin, so every test may ask for them), ``CUDA`` (every process counts as a CUDA one: the child maps no
NVIDIA device) and ``ours``/``mine`` (pinmon's groups and instances left in tracefs)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

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


CUDA = lambda pid, maps: True  # the stand-in's child maps no NVIDIA device


def ours(fs=None) -> tuple[set[str], set[str]]:
    """Every group and instance named like pinmon's, on this machine now."""
    from pinmon.attach.probes import listed_events
    from pinmon.attach.tracefs import open_tracefs

    fs = fs or open_tracefs()
    groups = {g for g in listed_events(fs) if g.startswith("pinmon_")}
    instances = {n for n in os.listdir(fs.path("instances")) if n.startswith("pinmon_")}
    return groups, instances


def mine() -> tuple[bool, bool]:
    """Whether this process's group and instance are there."""
    g = f"pinmon_{os.getpid()}"
    groups, instances = ours()
    return g in groups, g in instances


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    """The stand-in libcuda, built once a module."""
    return build(str(tmp_path_factory.mktemp("standin")))


@pytest.fixture
def child(lib):
    """A child process that has loaded the stand-in, closed after the test."""
    c = Child(lib)
    yield c
    c.close()


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
