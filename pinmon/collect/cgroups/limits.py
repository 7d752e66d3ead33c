"""A group's memory limit, usage and OOM kills, from its cgroup's files.

For a group's cgroup (``ownership.CgroupPaths``), on the hierarchy that holds the memory controller
(``mounts.py``):

| figure | cgroup v2 | cgroup v1 |
| --- | --- | --- |
| limit | the smallest ``memory.max`` on the path from the group up to the mount's root | ``memory.limit_in_bytes`` likewise; the huge page-aligned "unlimited" value (>= 2**60) is no limit |
| usage | ``memory.current`` | ``memory.usage_in_bytes`` |
| OOM kills | ``oom_kill`` in ``memory.events`` (counts the group's descendants too) | ``oom_kill`` in ``memory.oom_control`` (kernel 4.13+; counts only kills of tasks in that very cgroup) |

An ancestor's limit binds its descendants (v1: with ``memory.use_hierarchy``, always on since 5.16),
which is why the walk goes up to the root: a pod's limit sits on the pod slice above its containers,
a Slurm job's on ``job_<j>`` above its steps.

Cost: ``read`` takes every group of one snapshot at once and reads each cgroup's usage once, however
many processes it holds. Limits and OOM counts change rarely: each cgroup's ``memory.max`` (ancestors
shared by many groups: the kubepods slice once for all pods) and ``memory.events`` are read again
only after ``LIMITS_RECHECK_S``, so a changed limit or a new OOM kill shows within that time.

Reads never raise: a missing file, permission denied, a path outside the mounted hierarchy or this
cgroup namespace leave the figure None, and ``notes`` says why.
"""
from __future__ import annotations

import os
import posixpath
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from .mounts import CgroupMounts, Mount, read_mounts, to_dir
from .ownership import CgroupPaths
from .safe_read import read_file

LIMITS_RECHECK_S = 5.0
MAX_VALUE_FILE_BYTES = 4096   # memory.max is one number; memory.events / oom_control a few lines
UNLIMITED_FLOOR = 1 << 60     # v1 writes "no limit" as 9223372036854771712 (LONG_MAX, page-aligned)
MAX_DIGITS = 20               # past 64 bits: not a figure the kernel writes

V2_FILES = ("memory.max", "memory.current", "memory.events")
V1_FILES = ("memory.limit_in_bytes", "memory.usage_in_bytes", "memory.oom_control")


@dataclass(frozen=True)
class CgroupMemory:
    """One group's figures, bytes; None where unknown or, for the limit, where none is set."""

    version: Optional[int]              # the hierarchy read: 1 or 2; None when none could be
    path: Optional[str]                 # the group's cgroup path (as in /proc/PID/cgroup)
    limit_bytes: Optional[int]          # tightest limit on the path; None: no limit (or unknown)
    limit_path: Optional[str]           # the cgroup that sets that limit
    current_bytes: Optional[int]
    oom_kills: Optional[int]
    notes: tuple[str, ...] = ()         # why a figure is unknown


def parse_counter(text: Optional[str]) -> Optional[int]:
    """A non-negative integer file (memory.current, usage_in_bytes) -> int, None for junk."""
    if text is None:
        return None
    s = text.strip()
    if not s.isascii() or not s.isdigit() or len(s) > MAX_DIGITS:
        return None
    return int(s)


def parse_limit(text: Optional[str]) -> tuple[Optional[int], bool]:
    """memory.max / memory.limit_in_bytes -> (bytes or None, understood). "max" and v1's huge
    value are no limit: (None, True); junk is (None, False)."""
    if text is None:
        return None, False
    s = text.strip()
    if s == "max":
        return None, True
    value = parse_counter(s)
    if value is None:
        return None, False
    if value >= UNLIMITED_FLOOR:
        return None, True
    return value, True


def parse_keyed(text: Optional[str], key: str) -> Optional[int]:
    """The value of ``key`` in "key value" lines (memory.events, memory.oom_control), or None."""
    if text is None:
        return None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            return parse_counter(parts[1])
    return None


def _cgroup_path_of(mount: Mount, directory: str) -> str:
    """The cgroup path of a directory under ``mount`` (the inverse of ``mounts.to_dir``)."""
    rel = os.path.relpath(directory, mount.mount_point)
    base = mount.cgroup_root.rstrip("/")
    if rel == ".":
        return base or "/"
    return f"{base}/{rel}"


class CgroupMemoryReader:
    """``read(groups)`` once per snapshot: each group's ``CgroupMemory``, with limits and OOM counts
    kept for ``recheck_s``. ``root`` prefixes every path (tests, fakes); ``mounts`` skips reading
    /proc/self/mountinfo."""

    def __init__(self, root: str = "/", recheck_s: float = LIMITS_RECHECK_S,
                 clock: Callable[[], float] = time.monotonic, mounts: Optional[CgroupMounts] = None):
        self.root = root
        self.recheck_s = recheck_s
        self._clock = clock
        self.mounts_note: Optional[str] = None
        if mounts is None:
            mounts, self.mounts_note = read_mounts(root)
        self.mounts = mounts
        # directory -> (read at, value, note): limits of every cgroup on the walked paths, OOM counts
        self._limits: dict[str, tuple[float, Optional[int], Optional[str]]] = {}
        self._ooms: dict[str, tuple[float, Optional[int], Optional[str]]] = {}
        self.files_read = 0  # since creation: for tests and the bench

    def _read_text(self, path: str) -> tuple[Optional[str], Optional[str]]:
        self.files_read += 1
        got = read_file(path, MAX_VALUE_FILE_BYTES)
        if got.data is None:
            return None, got.reason
        return got.data.decode("ascii", errors="replace"), None

    def _hierarchy(self, group: CgroupPaths) -> tuple[Optional[int], Optional[Mount], Optional[str]]:
        if self.mounts.v1_memory is not None:
            return 1, self.mounts.v1_memory, group.v1_memory
        if self.mounts.v2 is not None:
            return 2, self.mounts.v2, group.v2
        return None, None, None

    def _limit_at(self, directory: str, name: str, now: float) -> tuple[Optional[int], Optional[str]]:
        cached = self._limits.get(directory)
        if cached is not None and now - cached[0] < self.recheck_s:
            return cached[1], cached[2]
        text, why = self._read_text(posixpath.join(directory, name))
        note = None
        if text is None:
            # No memory.max below a parent that does not enable the controller, nor at the root:
            # no limit there. Anything else is a figure pinmon could not read.
            value = None
            if why != "missing":
                note = f"{name}: {why}"
        else:
            value, understood = parse_limit(text)
            if not understood:
                note = f"{name}: not a limit"
        self._limits[directory] = (now, value, note)
        return value, note

    def _oom_at(self, directory: str, name: str, now: float) -> tuple[Optional[int], Optional[str]]:
        cached = self._ooms.get(directory)
        if cached is not None and now - cached[0] < self.recheck_s:
            return cached[1], cached[2]
        text, why = self._read_text(posixpath.join(directory, name))
        value = parse_keyed(text, "oom_kill")
        note = f"{name}: {why}" if text is None else None if value is not None else f"{name}: no oom_kill line"
        self._ooms[directory] = (now, value, note)
        return value, note

    def read_one(self, group: CgroupPaths, now: Optional[float] = None) -> CgroupMemory:
        now = self._clock() if now is None else now
        version, mount, path = self._hierarchy(group)
        if mount is None:
            return CgroupMemory(None, None, None, None, None, None,
                                (self.mounts_note or "no memory cgroup mounted",))
        if path is None:
            return CgroupMemory(version, None, None, None, None, None,
                                (f"no cgroup v{version} memory path for this process",))
        directory, why = to_dir(mount, path)
        if directory is None:
            return CgroupMemory(version, path, None, None, None, None, (f"{path}: {why}",))
        limit_name, current_name, oom_name = V2_FILES if version == 2 else V1_FILES
        notes: list[str] = []
        limit, limit_dir = None, None
        d = directory
        while True:
            value, note = self._limit_at(d, limit_name, now)
            if note:
                notes.append(note)
            if value is not None and (limit is None or value < limit):
                limit, limit_dir = value, d
            if d == mount.mount_point or len(d) <= len(mount.mount_point):
                break
            d = posixpath.dirname(d)
        text, why = self._read_text(posixpath.join(directory, current_name))
        current = parse_counter(text)
        if current is None:
            notes.append(f"{current_name}: {why or 'not a number'}")
        ooms, note = self._oom_at(directory, oom_name, now)
        if note:
            notes.append(note)
        return CgroupMemory(version, path, limit,
                            _cgroup_path_of(mount, limit_dir) if limit_dir is not None else None,
                            current, ooms, tuple(dict.fromkeys(notes)))

    def read(self, groups: Iterable[CgroupPaths]) -> dict[CgroupPaths, CgroupMemory]:
        """Every distinct group's figures, each cgroup's usage read once."""
        now = self._clock()
        out: dict[CgroupPaths, CgroupMemory] = {}
        for group in groups:
            if group not in out:
                out[group] = self.read_one(group, now)
        self._forget_older_than(now - 3 * self.recheck_s)
        return out

    @property
    def cached_directories(self) -> set[str]:
        """The cgroup directories whose limit or OOM count is kept now."""
        return set(self._limits) | set(self._ooms)

    def _forget_older_than(self, t: float) -> None:
        # Cgroups of groups that have gone: drop what would be read again anyway.
        for cache in (self._limits, self._ooms):
            for d in [d for d, entry in cache.items() if entry[0] < t]:
                del cache[d]
