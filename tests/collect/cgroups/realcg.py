"""Real memory cgroups made by the tests (root, a v1 memory hierarchy or a v2 one with the memory
controller delegated from the root), and child processes moved into them. ``memory_cgroup`` skips
the test, saying why, where the machine does not allow it, and removes what it made, always;
``pinned_in_docker_scope`` runs a process pinning known bytes with io_uring in such a group and
returns the live collector's snapshot of it."""
from __future__ import annotations

import contextlib
import errno
import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from pinmon.collect.cgroups.mounts import read_mounts, to_dir
from pinmon.collect.cgroups.ownership import parse_proc_cgroup
from pinmon.collect.live import LiveCollector
from tests.waiting import NotYet, read_until, wait_until

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_SEQ = itertools.count()


@dataclass
class RealCgroup:
    version: int
    directory: str        # where its files are
    path: str             # its path as /proc/PID/cgroup writes it

    def child(self, name: str) -> RealCgroup:
        if self.version == 2:
            _write(os.path.join(self.directory, "cgroup.subtree_control"), "+memory")
        d = os.path.join(self.directory, name)
        os.mkdir(d)
        return RealCgroup(self.version, d, f"{self.path.rstrip('/')}/{name}")

    def set_limit(self, nbytes: int) -> None:
        if self.version == 2:
            _write(os.path.join(self.directory, "memory.max"), str(nbytes))
            if os.path.exists(os.path.join(self.directory, "memory.swap.max")):
                _write(os.path.join(self.directory, "memory.swap.max"), "0")
        else:
            _write(os.path.join(self.directory, "memory.limit_in_bytes"), str(nbytes))
            memsw = os.path.join(self.directory, "memory.memsw.limit_in_bytes")
            if os.path.exists(memsw):
                _write(memsw, str(nbytes))

    def add(self, pid: int) -> None:
        _write(os.path.join(self.directory, "cgroup.procs"), str(pid))

    def usage_bytes(self) -> int:
        name = "memory.current" if self.version == 2 else "memory.usage_in_bytes"
        with open(os.path.join(self.directory, name)) as f:
            return int(f.read())


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _own_path(version: int) -> str | None:
    with open("/proc/self/cgroup") as f:
        v2, v1_mem, _ = parse_proc_cgroup(f.read())
    return v1_mem if version == 1 else v2


def _parent() -> RealCgroup:
    """Where a test cgroup can go: below this process's own v1 memory cgroup, or below the v2 root
    where the root delegates the memory controller. Skips otherwise."""
    if os.geteuid() != 0:
        pytest.skip("making cgroups needs root")
    mounts, why = read_mounts("/")
    if mounts.v1_memory is not None:
        own = _own_path(1)
        if own is None:
            pytest.skip("no v1 memory cgroup for this process")
        d, why = to_dir(mounts.v1_memory, own)
        if d is None:
            pytest.skip(f"this process's memory cgroup is not reachable: {why}")
        return RealCgroup(1, d, own)
    if mounts.v2 is not None:
        root = mounts.v2.mount_point
        try:
            with open(os.path.join(root, "cgroup.subtree_control")) as f:
                delegated = "memory" in f.read().split()
        except OSError as e:
            pytest.skip(f"cgroup v2 root not readable: {e}")
        if not delegated:
            pytest.skip("cgroup v2 root does not delegate the memory controller")
        return RealCgroup(2, root, mounts.v2.cgroup_root)
    pytest.skip(why or "no memory cgroup hierarchy mounted")


def _rmdir_tree(directory: str) -> None:
    def removed(d: str) -> bool:
        try:
            os.rmdir(d)
        except FileNotFoundError:
            pass
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            raise NotYet(f"{d}: busy") from None  # a killed task's exit can lag its reaping
        return True

    for d, _dirs, _files in sorted(os.walk(directory), key=lambda x: -len(x[0])):
        wait_until(lambda d=d: removed(d), timeout_s=5.0, interval_s=0.1, what=f"the cgroup {d} removed")


@contextlib.contextmanager
def memory_cgroup(limit_bytes: int) -> Iterator[RealCgroup]:
    """A fresh memory cgroup with ``limit_bytes`` as its limit; removed (with any children) after."""
    parent = _parent()
    name = f"pinmon-test-{os.getpid()}-{next(_SEQ)}"
    try:
        if parent.version == 2:
            made = RealCgroup(2, os.path.join(parent.directory, name),
                              f"{parent.path.rstrip('/')}/{name}")
            os.mkdir(made.directory)
        else:
            made = parent.child(name)
    except OSError as e:
        pytest.skip(f"cannot make a cgroup in {parent.directory}: {e}")
    try:
        made.set_limit(limit_bytes)
        yield made
    finally:
        _rmdir_tree(made.directory)


class Child:
    """A Python child process that runs ``script`` after it reads a line ("go") on stdin, so the
    test can move it into a cgroup first; stdout lines come back through ``line()``."""

    def __init__(self, script: str):
        self.proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline()\n" + script],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
                                     env={**os.environ, "PYTHONPATH": REPO})

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, text: str = "go") -> None:
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def line(self) -> str:
        return self.proc.stdout.readline().strip()

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        for f in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                f.close()

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- a process pinning known bytes (io_uring) in a group -------------------------------------------

PIN_AND_WAIT = """
import sys
from tests.iouring import PinnedBuffer, Unavailable
try:
    buf = PinnedBuffer({n}).__enter__()
except Unavailable as e:
    print("unavailable " + str(e), flush=True)
    sys.exit(0)
print("pinned", flush=True)
sys.stdin.readline()
{then}
"""


def snapshot_until(col, ok, seconds=10.0):
    """The collector's snapshots until one meets ``ok`` (the last one after ``seconds``)."""
    return read_until(col.snapshot, ok, timeout_s=seconds, interval_s=0.2)


def group_of(snap, pid):
    """The group of process ``pid`` in ``snap``; None where it has no row or no group."""
    row = next((p for p in snap.processes if p.pid == pid), None)
    if row is None or row.identity.cgroup is None:
        return None
    return next(g for g in snap.cgroups if g.key == row.identity.cgroup)


def pinned_in_docker_scope(container_id: str, pinned: int, limit: int):
    """A memory cgroup with ``limit`` and in it a Docker container's scope, where a child pins
    ``pinned`` bytes with io_uring: the live collector's snapshot once the group shows them all, and the
    child's pid. Skips, saying why, where cgroups or io_uring are not there."""
    with memory_cgroup(limit) as job:
        scope = job.child(f"docker-{container_id}.scope")
        with Child(PIN_AND_WAIT.format(n=pinned, then="")) as child:
            scope.add(child.pid)
            child.send()
            said = child.line()
            if said.startswith("unavailable"):
                pytest.skip(said)
            with LiveCollector(use_nvml=False, pids=[child.pid], kernel_read_every_s=0) as col:
                snap = snapshot_until(col, lambda s: (group_of(s, child.pid) or 0) and
                                       (group_of(s, child.pid).held.vm_pinned_bytes or 0) >= pinned)
            child.send()
    return snap, child.pid
