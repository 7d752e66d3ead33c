"""``VmPin`` of every process, read only while the kernel counts pinned pages that no mapping explains.

CUDA's pinned memory shows in ``/proc/PID/maps``; io_uring registered buffers and RDMA memory regions
do not, but the kernel accounts them in each process's ``VmPin`` (``cgroups/vmpin.py``). Reading every
process's status costs about 16 us a process (7.8 ms for 500 on the H200 box,
``bench/results/cgroup_cost_h200.json``), so the scan runs only while the kernel's count of pinned
pages exceeds what the mappings explain by ``NEEDED_MIN_BYTES``, and then at most every
``SCAN_EVERY_S``; in between, the last scan's figures stand for the pids still alive. A scan never
raises: a process that exits or denies access is left out.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

from ..cgroups.vmpin import parse_vmpin
from ..rawfile import READ_FLAGS

# Unexplained pinned bytes below this are noise (the kernel folds per-CPU deltas about once a second).
NEEDED_MIN_BYTES = 4 << 20
SCAN_EVERY_S = 10.0
# The VmPin line sits in the first 2 KiB of a status file; the rest need not be read.
STATUS_HEAD_BYTES = 4096


def read_vmpin(pid: int, proc_root: str = "/proc") -> int | None:
    try:
        fd = os.open(os.path.join(proc_root, str(pid), "status"), READ_FLAGS)
    except (OSError, ValueError):
        return None
    try:
        return parse_vmpin(os.read(fd, STATUS_HEAD_BYTES))
    except OSError:
        return None
    finally:
        os.close(fd)


class VmPinScan:
    """``read(pids, unexplained_bytes)`` -> {pid: VmPin bytes} of the processes with any."""

    def __init__(self, proc_root: str = "/proc", clock: Callable[[], float] = time.monotonic,
                 every_s: float = SCAN_EVERY_S):
        self.proc_root = proc_root
        self._clock = clock
        self.every_s = every_s
        self._found: dict[int, int] = {}
        self._at: float | None = None
        self.scans = 0  # full scans so far (tests and the bench read it)

    def read(self, pids: Iterable[int], unexplained_bytes: int | None) -> dict[int, int]:
        if unexplained_bytes is None or unexplained_bytes < NEEDED_MIN_BYTES:
            self._found, self._at = {}, None
            return {}
        now = self._clock()
        pids = list(pids)
        if self._at is not None and now - self._at < self.every_s:
            live = set(pids)
            self._found = {pid: b for pid, b in self._found.items() if pid in live}
            return dict(self._found)
        self.scans += 1
        found = {}
        for pid in pids:
            value = read_vmpin(pid, self.proc_root)
            if value:
                found[pid] = value
        self._found, self._at = found, now
        return dict(found)
