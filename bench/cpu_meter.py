"""CPU time of a spawned program's whole tree, to the microsecond, from a cgroup of its own.

A process's user+system times come in clock ticks (10 ms): over a 25 s window a program at 0.7% of a
core is 17 ticks, and one tick is 6% of it, more than the difference two programs are compared on.
The kernel counts a cgroup's CPU in nanoseconds (cgroup v2 ``cpu.stat`` ``usage_usec``, v1
``cpuacct.usage``), every thread and child included, those that ended too. As root, ``CpuMeter`` makes
a cgroup for the program, moves it in (its threads and later children follow) and reads that count;
where it cannot (not root, no hierarchy it may write), it sums the tree's ticks as before and says so
(``kind``). ``close`` removes the cgroup once the program has ended.
"""
from __future__ import annotations

import os
import time

import psutil

V2_ROOT = "/sys/fs/cgroup"
V1_CPUACCT = ("/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct")


def process_tree(proc: psutil.Process) -> list[psutil.Process]:
    """``proc`` and its descendants (only ``proc`` where they cannot be listed)."""
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def tree_cpu_s(proc: psutil.Process) -> float:
    """User+system seconds of the tree, in clock ticks."""
    total = 0.0
    for p in process_tree(proc):
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def _is_cgroup2(path: str) -> bool:
    return os.path.exists(os.path.join(path, "cgroup.controllers"))


class CpuMeter:
    """``read()``: CPU seconds the program's tree has used so far; ``kind``: how they are counted
    ("cgroup2 usage_usec", "cgroup1 cpuacct.usage" or "ticks")."""

    def __init__(self, pid: int, root_v2: str = V2_ROOT, roots_v1: tuple[str, ...] = V1_CPUACCT):
        self.proc = psutil.Process(pid)
        self.kind = "ticks"
        self.path: str | None = None
        self._read = lambda: tree_cpu_s(self.proc)
        name = f"pinmon-bench-{os.getpid()}-{pid}-{time.monotonic_ns()}"
        if os.geteuid() != 0:
            return
        if _is_cgroup2(root_v2) and self._move(os.path.join(root_v2, name), pid):
            stat = os.path.join(self.path, "cpu.stat")  # type: ignore[arg-type]
            self.kind, self._read = "cgroup2 usage_usec", lambda: _usage_usec(stat) / 1e6
            return
        for root in roots_v1:
            if os.path.exists(os.path.join(root, "cpuacct.usage")) and self._move(os.path.join(root, name), pid):
                usage = os.path.join(self.path, "cpuacct.usage")  # type: ignore[arg-type]
                self.kind, self._read = "cgroup1 cpuacct.usage", lambda: _read_int(usage) / 1e9
                return

    def _move(self, path: str, pid: int) -> bool:
        try:
            os.mkdir(path)
        except OSError:
            return False
        try:
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(pid))
        except OSError:
            _rmdir(path)
            return False
        self.path = path
        return True

    def read(self) -> float:
        return self._read()

    def close(self) -> None:
        """Remove the cgroup (its program has ended: a cgroup with a process in it cannot go)."""
        if self.path is not None:
            for _ in range(50):
                if _rmdir(self.path):
                    break
                time.sleep(0.1)  # the last threads leave as the program's exit completes
            self.path = None


def _read_int(path: str) -> int:
    with open(path) as f:
        return int(f.read().split()[0])


def _usage_usec(path: str) -> int:
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value)
    raise OSError(f"{path}: no usage_usec")


def _rmdir(path: str) -> bool:
    try:
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
