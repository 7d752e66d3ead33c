"""The owner of each process, read from ``/proc/PID/cgroup`` and kept for a while.

A process's cgroup changes rarely (a runtime moves it once, when the container starts), so a pid's
owner is read again only after ``OWNER_RECHECK_S``, or at once when the caller's ``token`` for the
pid changes: pass the process's start time, and a pid reused by a new process is read anew. Pids
not asked for in a snapshot are forgotten at the next ``prune``. A file that cannot be read (the
process exited, permission denied) gives None, not an exception.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Hashable, Iterable, Optional

from .ownership import Owner, owner_of
from .safe_read import read_file

OWNER_RECHECK_S = 30.0
MAX_CGROUP_FILE_BYTES = 64 << 10  # ~16 lines of at most a few hundred bytes each


def read_owner(pid: int, proc_root: str = "/proc") -> Optional[Owner]:
    """The owner of ``pid`` now, or None when its cgroup file cannot be read."""
    got = read_file(os.path.join(proc_root, str(int(pid)), "cgroup"), MAX_CGROUP_FILE_BYTES)
    if got.data is None:
        return None
    return owner_of(got.data.decode("utf-8", errors="replace"))


class OwnerCache:
    """``owner(pid, token)`` with each pid's file read at most once per ``recheck_s``."""

    def __init__(self, proc_root: str = "/proc", recheck_s: float = OWNER_RECHECK_S,
                 clock: Callable[[], float] = time.monotonic):
        self.proc_root = proc_root
        self.recheck_s = recheck_s
        self._clock = clock
        self._entries: dict[int, tuple[float, Hashable, Optional[Owner]]] = {}
        self.reads = 0  # files read since creation: for tests and the bench

    def owner(self, pid: int, token: Hashable = None) -> Optional[Owner]:
        now = self._clock()
        entry = self._entries.get(pid)
        if entry is not None and entry[1] == token and now - entry[0] < self.recheck_s:
            return entry[2]
        self.reads += 1
        found = read_owner(pid, self.proc_root)
        self._entries[pid] = (now, token, found)
        return found

    def prune(self, live_pids: Iterable[int]) -> None:
        """Forget every pid not in ``live_pids`` (call once per snapshot with the pids scanned)."""
        keep = set(live_pids)
        for pid in [p for p in self._entries if p not in keep]:
            del self._entries[pid]
