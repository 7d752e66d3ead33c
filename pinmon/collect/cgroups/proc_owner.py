"""The owner of each process, read from ``/proc/PID/cgroup`` and kept for a while.

The processes of one container have the same file, word for word: ``OwnerCache`` parses each
distinct text once (a bounded memo), so a pid costs one read and one dict look-up.

A process's cgroup changes rarely (a runtime moves it once, when the container starts), so a pid's
owner is read again only after ``OWNER_RECHECK_S``, or at once when the caller's ``token`` for the
pid changes: pass the process's start time, and a pid reused by a new process is read anew. Pids
not asked for in a snapshot are forgotten at the next ``prune``. A file that cannot be read (the
process exited, permission denied) gives None, not an exception.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable, Iterable

from .ownership import Owner, owner_of
from .safe_read import read_file

OWNER_RECHECK_S = 60.0
MAX_MEMO_TEXTS = 4096   # distinct cgroup files parsed and kept: far above a node's containers
MAX_CGROUP_FILE_BYTES = 64 << 10  # ~16 lines of at most a few hundred bytes each


def read_cgroup_text(pid: int, proc_root: str = "/proc") -> str | None:
    """``pid``'s /proc/PID/cgroup, or None when it cannot be read (gone, denied)."""
    got = read_file(os.path.join(proc_root, str(int(pid)), "cgroup"), MAX_CGROUP_FILE_BYTES)
    return None if got.data is None else got.data.decode("utf-8", errors="replace")


def read_owner(pid: int, proc_root: str = "/proc") -> Owner | None:
    """The owner of ``pid`` now, or None when its cgroup file cannot be read."""
    text = read_cgroup_text(pid, proc_root)
    return None if text is None else owner_of(text)


class OwnerCache:
    """``owner(pid, token)`` with each pid's file read at most once per ``recheck_s``."""

    def __init__(self, proc_root: str = "/proc", recheck_s: float = OWNER_RECHECK_S,
                 clock: Callable[[], float] = time.monotonic):
        self.proc_root = proc_root
        self.recheck_s = recheck_s
        self._clock = clock
        self._entries: dict[int, tuple[float, Hashable, Owner | None]] = {}
        self._memo: dict[str, Owner] = {}
        self.reads = 0  # files read since creation: for tests and the bench

    def owner(self, pid: int, token: Hashable = None) -> Owner | None:
        now = self._clock()
        entry = self._entries.get(pid)
        if entry is not None and entry[1] == token and now - entry[0] < self.recheck_s:
            return entry[2]
        return self._read(pid, token, now)

    def owners(self, pids: Iterable[int], tokens: dict | None = None) -> dict[int, Owner | None]:
        """``owner`` of each pid (``tokens``: pid -> token), with one look at the clock."""
        now = self._clock()
        tokens = tokens or {}
        out: dict[int, Owner | None] = {}
        entries = self._entries
        for pid in pids:
            token = tokens.get(pid)
            entry = entries.get(pid)
            if entry is not None and entry[1] == token and now - entry[0] < self.recheck_s:
                out[pid] = entry[2]
            else:
                out[pid] = self._read(pid, token, now)
        return out

    def _read(self, pid: int, token: Hashable, now: float) -> Owner | None:
        self.reads += 1
        text = read_cgroup_text(pid, self.proc_root)
        found = None if text is None else self._parse(text)
        self._entries[pid] = (now, token, found)
        return found

    def _parse(self, text: str) -> Owner:
        owner = self._memo.get(text)
        if owner is None:
            if len(self._memo) >= MAX_MEMO_TEXTS:
                self._memo.clear()  # a flood of distinct texts: start again rather than grow
            owner = self._memo[text] = owner_of(text)
        return owner

    def prune(self, live_pids: Iterable[int]) -> None:
        """Forget every pid not in ``live_pids`` (call once per snapshot with the pids scanned)."""
        keep = set(live_pids)
        for pid in [p for p in self._entries if p not in keep]:
            del self._entries[pid]
