"""A group's memory limit, usage and OOM kills, from its cgroup's files.

For a group's cgroup (``ownership.CgroupPaths``), on the hierarchy that holds the memory controller
(``mounts.py``):

| figure | cgroup v2 | cgroup v1 |
| --- | --- | --- |
| limit | the smallest ``memory.max`` on the path from each of the group's processes' own cgroups up to the mount's root; ``max`` is no limit, ``0`` a limit of zero bytes (nothing can be charged) | ``memory.limit_in_bytes`` likewise; no limit reads as the huge page-aligned value (>= 2**60, what writing ``-1`` sets); ``0`` is a limit of zero bytes (the kernel takes it on an empty cgroup) |
| usage | ``memory.current`` | ``memory.usage_in_bytes`` |
| OOM kills | ``oom_kill`` in ``memory.events`` (counts the group's descendants too) | ``oom_kill`` in ``memory.oom_control`` (kernel 4.13+; counts only kills of tasks in that very cgroup) |

An ancestor's limit binds its descendants (v1: with ``memory.use_hierarchy``, always on since 5.16),
which is why the walk goes up to the root: a pod's limit sits on the pod slice above its containers,
a Slurm job's on ``job_<j>`` above its steps. A limit below the group's own cgroup binds the
processes there: a Slurm step is the group while its processes sit in ``step_0/user/task_<n>``,
so the walk starts at each process's own cgroup (``read``'s ``leaves``), and the group's limit is the
tightest of all, whatever order its processes come in.

This is pinmon's one limit walker: the host's figure for pinmon's own cgroup
(``collect/host/memory.py``) is read through it too.

Cost: ``read`` takes every group of one snapshot at once and reads each cgroup's usage once, however
many processes it holds. Its files stay open (up to ``MAX_OPEN_FILES``; past that a file is opened
for each read) and are read again from offset 0, one system call each: opening a file by a long
cgroup path costs ten times that. A cgroup removed meanwhile fails that read (ENODEV), and the path
is opened afresh. Limits and OOM counts change rarely: each cgroup's ``memory.max`` (ancestors
shared by many groups: the kubepods slice once for all pods) and ``memory.events`` are read again
only after ``LIMITS_RECHECK_S``, so a changed limit or a new OOM kill shows within that time.
``close()`` closes the kept files; files of groups not read for three recheck periods are closed.

Reads never raise: a missing file, permission denied, a path outside the mounted hierarchy or this
cgroup namespace leave the figure None, and ``notes`` says why.
"""
from __future__ import annotations

import os
import posixpath
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .mounts import CgroupMounts, Mount, read_mounts, to_dir
from .ownership import CgroupPaths
from .safe_read import open_regular

LIMITS_RECHECK_S = 5.0
MAX_VALUE_FILE_BYTES = 4096   # memory.max is one number; memory.events / oom_control a few lines
UNLIMITED_FLOOR = 1 << 60     # v1 writes "no limit" as 9223372036854771712 (LONG_MAX, page-aligned)
MAX_DIGITS = 20               # past 64 bits: not a figure the kernel writes
# Files kept open between snapshots (three per group: ~80 groups), well under a process's usual
# limit of 1024 open files (the exporter's sockets and pinmon's other readers need the rest).
MAX_OPEN_FILES = 256
MAX_LEAF_PLANS = 16384

V2_FILES = ("memory.max", "memory.current", "memory.events")
V1_FILES = ("memory.limit_in_bytes", "memory.usage_in_bytes", "memory.oom_control")


@dataclass(frozen=True)
class CgroupMemory:
    """One group's figures, bytes; None where unknown or, for the limit, where none is set."""

    version: int | None              # the hierarchy read: 1 or 2; None when none could be
    path: str | None                 # the group's cgroup path (as in /proc/PID/cgroup)
    limit_bytes: int | None          # tightest limit on the path; None: no limit (or unknown)
    limit_path: str | None           # the cgroup that sets that limit
    current_bytes: int | None
    oom_kills: int | None
    notes: tuple[str, ...] = ()         # why a figure is unknown


def parse_counter(text: str | None) -> int | None:
    """A non-negative integer file (memory.current, usage_in_bytes) -> int, None for junk."""
    if text is None:
        return None
    s = text.strip()
    if not s.isascii() or not s.isdigit() or len(s) > MAX_DIGITS:
        return None
    return int(s)


def parse_limit(text: str | None) -> tuple[int | None, bool]:
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


def parse_keyed(text: str | None, key: str) -> int | None:
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
                 clock: Callable[[], float] = time.monotonic, mounts: CgroupMounts | None = None):
        self.root = root
        self.recheck_s = recheck_s
        self._clock = clock
        self.mounts_note: str | None = None
        if mounts is None:
            mounts, self.mounts_note = read_mounts(root)
        self.mounts = mounts
        # limit file -> (read at, value, note): every cgroup on the walked paths, ancestors shared
        self._limits: dict[str, tuple[float, int | None, str | None]] = {}
        # group -> (figures read at, _plan's tuple, _slow_part's tuple)
        self._groups: dict[CgroupPaths, tuple[float, tuple, tuple]] = {}
        # (group, a process's own cgroup below it) -> _leaf_walk's tuple
        self._leaf_plans: dict[tuple[CgroupPaths, CgroupPaths], tuple] = {}
        self._swept_at = clock()
        # file path -> (last read at, fd): kept open, read from offset 0
        self._open: dict[str, tuple[float, int]] = {}
        self.files_read = 0  # since creation: for tests and the bench

    def _read_kept(self, path: str, now: float) -> tuple[str | None, str | None]:
        """``path`` read through a file kept open, (text, None) or (None, why not)."""
        self.files_read += 1
        kept = self._open.pop(path, None)
        if kept is not None:
            try:
                data = os.pread(kept[1], MAX_VALUE_FILE_BYTES + 1, 0)
            except OSError:  # ENODEV: the cgroup was removed (perhaps made again): open anew
                os.close(kept[1])
            else:
                self._open[path] = (now, kept[1])
                if len(data) > MAX_VALUE_FILE_BYTES:
                    return None, f"larger than {MAX_VALUE_FILE_BYTES} bytes"
                return data.decode("ascii", errors="replace"), None
        fd = open_regular(path)
        if not isinstance(fd, int):
            return None, fd.reason
        try:
            data = os.read(fd, MAX_VALUE_FILE_BYTES + 1)
        except OSError as e:
            os.close(fd)
            return None, os.strerror(e.errno) if e.errno else str(e)
        if len(self._open) < MAX_OPEN_FILES and len(data) <= MAX_VALUE_FILE_BYTES:
            self._open[path] = (now, fd)
        else:
            os.close(fd)
        if len(data) > MAX_VALUE_FILE_BYTES:
            return None, f"larger than {MAX_VALUE_FILE_BYTES} bytes"
        return data.decode("ascii", errors="replace"), None

    @property
    def open_files(self) -> int:
        return len(self._open)

    def close(self) -> None:
        """Close the files kept open (the reader still works after: it opens them again)."""
        kept, self._open = self._open, {}
        for _t, fd in kept.values():
            os.close(fd)

    def __del__(self) -> None:
        # Plain descriptors are not closed by the garbage collector: a reader dropped without
        # close() must not leak up to MAX_OPEN_FILES of them.
        try:
            self.close()
        except (AttributeError, OSError):
            pass

    def __enter__(self) -> CgroupMemoryReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _hierarchy(self, group: CgroupPaths) -> tuple[int | None, Mount | None, str | None]:
        if self.mounts.v1_memory is not None:
            return 1, self.mounts.v1_memory, group.v1_memory
        if self.mounts.v2 is not None:
            return 2, self.mounts.v2, group.v2
        return None, None, None

    def _limit_at(self, limit_file: str, now: float) -> tuple[int | None, str | None]:
        cached = self._limits.get(limit_file)
        if cached is not None and now - cached[0] < self.recheck_s:
            return cached[1], cached[2]
        text, why = self._read_kept(limit_file, now)
        note = None
        if text is None:
            # No memory.max below a parent that does not enable the controller, nor at the root:
            # no limit there. Anything else is a figure pinmon could not read.
            value = None
            if why != "missing":
                note = f"{posixpath.basename(limit_file)}: {why}"
        else:
            value, understood = parse_limit(text)
            if not understood:
                note = f"{posixpath.basename(limit_file)}: not a limit"
        self._limits[limit_file] = (now, value, note)
        return value, note

    def _oom_at(self, events_file: str, now: float) -> tuple[int | None, str | None]:
        text, why = self._read_kept(events_file, now)
        value = parse_keyed(text, "oom_kill")
        name = posixpath.basename(events_file)
        return value, f"{name}: {why}" if text is None else None if value is not None else f"{name}: no oom_kill line"

    def _plan(self, group: CgroupPaths) -> tuple:
        """What to read for ``group``, worked out once: (version, path, note, usage file, events
        file, [(limit file, cgroup path)] from the group up to the mount's root)."""
        version, mount, path = self._hierarchy(group)
        if mount is None:
            return None, None, self.mounts_note or "no memory cgroup mounted", None, None, ()
        if path is None:
            return version, None, f"no cgroup v{version} memory path for this process", None, None, ()
        directory, why = to_dir(mount, path)
        if directory is None:
            return version, path, f"{path}: {why}", None, None, ()
        limit_name, current_name, oom_name = V2_FILES if version == 2 else V1_FILES
        walk = []
        d = directory
        while True:
            walk.append((posixpath.join(d, limit_name), _cgroup_path_of(mount, d)))
            if d == mount.mount_point or len(d) <= len(mount.mount_point):
                break
            d = posixpath.dirname(d)
        return (version, path, None, posixpath.join(directory, current_name),
                posixpath.join(directory, oom_name), tuple(walk))

    def _slow_part(self, plan: tuple, now: float) -> tuple:
        """(limit, limit path, OOM kills, notes) of a group's plan: the figures kept for ``recheck_s``."""
        _version, _path, note, usage_file, events_file, walk = plan
        if usage_file is None:
            return None, None, None, (note,)
        notes: list[str] = []
        limit, limit_path = None, None
        for limit_file, cgroup_path in walk:
            value, note = self._limit_at(limit_file, now)
            if note:
                notes.append(note)
            if value is not None and (limit is None or value < limit):
                limit, limit_path = value, cgroup_path
        ooms, note = self._oom_at(events_file, now)
        if note:
            notes.append(note)
        return limit, limit_path, ooms, tuple(notes)

    def _leaf_walk(self, group: CgroupPaths, plan: tuple, leaf: CgroupPaths) -> tuple:
        """[(limit file, cgroup path)] of the cgroups from ``leaf`` (a process's own cgroup) up to,
        not including, the group's: empty where ``leaf`` is not below it. Worked out once."""
        kept = self._leaf_plans.get((group, leaf))
        if kept is not None:
            return kept
        walk: list[tuple[str, str]] = []
        version, mount, path = self._hierarchy(leaf)
        usage_file = plan[3]
        if mount is not None and path is not None and usage_file is not None:
            group_dir = posixpath.dirname(usage_file)
            directory, _why = to_dir(mount, path)
            if directory is not None and directory.startswith(group_dir + "/"):
                limit_name = (V2_FILES if version == 2 else V1_FILES)[0]
                d = directory
                while d != group_dir and len(d) > len(group_dir):
                    walk.append((posixpath.join(d, limit_name), _cgroup_path_of(mount, d)))
                    d = posixpath.dirname(d)
        if len(self._leaf_plans) >= MAX_LEAF_PLANS:
            self._leaf_plans.clear()
        self._leaf_plans[(group, leaf)] = out = tuple(walk)
        return out

    def read_one(self, group: CgroupPaths, now: float | None = None,
                 leaves: Sequence[CgroupPaths] = ()) -> CgroupMemory:
        """``group``'s figures; ``leaves``: its processes' own cgroups below it, in a fixed order,
        whose limits bind those processes too (the tightest of all is the group's)."""
        now = self._clock() if now is None else now
        kept = self._groups.get(group)
        if kept is None or now - kept[0] >= self.recheck_s:
            plan = kept[1] if kept is not None else self._plan(group)
            kept = (now, plan, self._slow_part(plan, now))
            self._groups[group] = kept
        version, path, _note, usage_file, _events, _walk = kept[1]
        limit, limit_path, ooms, notes = kept[2]
        for leaf in leaves:
            for limit_file, cgroup_path in self._leaf_walk(group, kept[1], leaf):
                value, note = self._limit_at(limit_file, now)
                if note:
                    notes = notes + (note,)
                if value is not None and (limit is None or value < limit):
                    limit, limit_path = value, cgroup_path
        current = None
        if usage_file is not None:
            text, why = self._read_kept(usage_file, now)
            current = parse_counter(text)
            if current is None:
                notes = notes + (f"{posixpath.basename(usage_file)}: {why or 'not a number'}",)
        return CgroupMemory(version, path, limit, limit_path, current, ooms, tuple(dict.fromkeys(notes)))

    def read(self, groups: Iterable[CgroupPaths],
             leaves: Mapping[CgroupPaths, Sequence[CgroupPaths]] | None = None) -> dict[CgroupPaths, CgroupMemory]:
        """Every distinct group's figures, each cgroup's usage read once; ``leaves``: per group, its
        processes' own cgroups below it (``read_one``)."""
        now = self._clock()
        leaves = leaves or {}
        out: dict[CgroupPaths, CgroupMemory] = {}
        for group in groups:
            if group not in out:
                out[group] = self.read_one(group, now, leaves.get(group, ()))
        if now - self._swept_at >= self.recheck_s:
            self._swept_at = now
            self._forget_older_than(now - 3 * self.recheck_s)
        return out

    @property
    def cached_directories(self) -> set[str]:
        """The cgroup directories whose limit is kept now."""
        return {posixpath.dirname(f) for f in self._limits}

    def _forget_older_than(self, t: float) -> None:
        # Cgroups of groups that have gone: drop what would be read again anyway.
        for f in [f for f, entry in self._limits.items() if entry[0] < t]:
            del self._limits[f]
        for group in [g for g, entry in self._groups.items() if entry[0] < t]:
            del self._groups[group]
        self._leaf_plans.clear()
        for path in [p for p, (read_at, _fd) in self._open.items() if read_at < t]:
            os.close(self._open.pop(path)[1])
