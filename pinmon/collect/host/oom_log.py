"""Memory cgroup OOM kills, from the kernel's log records (``kmsg.py``): which process, which cgroup,
the limit and the process's memory at the kill. Pure: records in, ``KernelOomKill`` out.

A memory cgroup's OOM kill logs, in this order (kernel 4.19 and later; ``mm/oom_kill.c``,
``mm/memcontrol.c``; a capture from a v1 cgroup is in tests/fixtures/kmsg/):

1. ``python3 invoked oom-killer: gfp_mask=...``: a new OOM; whatever was pending is done.
2. ``memory: usage 4194304kB, limit 4194304kB, failcnt 12``: the OOM cgroup's usage and limit at the
   kill (the v2 ``max`` or v1's "no limit" value is logged as a huge number: no limit), then
   ``Memory cgroup stats for /path:``, naming that cgroup.
3. ``oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=...,cpuset=NAME,mems_allowed=...,oom_memcg=PATH,
   task_memcg=PATH,task=COMM,pid=N,uid=U``: the cgroup whose limit was hit, the victim's own cgroup.
4. ``Memory cgroup out of memory: Killed process N (COMM) total-vm:...kB, anon-rss:...kB,
   file-rss:...kB, shmem-rss:...kB, UID:U ...``: the victim's memory when it was killed. CUDA's pinned
   memory is a shared mapping, so it is in ``shmem-rss`` (with tmpfs and other shared memory).

Lines 1-3 are rate-limited by the kernel in an OOM storm; line 4 is not, so a kill may come with no
cgroup (``oom_memcg`` None). Lines of one OOM are never interleaved with another's (the kernel holds
``oom_lock``); lines 3 and 4 are joined by pid.

What a user controls here: the task name (``COMM``, 15 bytes) and, in a delegated subtree, cgroup
names, which may hold commas and ``key=`` text (never ``/``). The ``oom-kill:`` line is split where
it is the only split that fits the kernel's format (``split_oom_kill``): both paths start with
``/``, the victim's cgroup is the OOM cgroup or below it, and the task name is at most 15 bytes.
The kernel's own split always fits, so a forged name can at most make a line split two ways, and
such a line names no cgroup (``ambiguous``): a user can hide the cgroup of a kill in their own
subtree, never put it in another's. Every text is bounded (``MAX_PATH_CHARS``) and shown only
through ``units.printable`` downstream.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from .kmsg import KmsgRecord, unescape

MAX_PATH_CHARS = 4096
MAX_COMM_BYTES = 15        # TASK_COMM_LEN - 1
# Kills kept, the newest: every snapshot (and so every line of a recording) carries those within the
# lookback, about 700 bytes of JSON each; a job OOM-killed every minute for a day would otherwise put
# hundreds in each line.
MAX_KILLS = 64
UNLIMITED_FLOOR = 1 << 60  # a logged limit this large is "max" (v2) or v1's "no limit"
TASK_FIELD_CHARS = len(",task=") + 4 * 15  # the task name, escaped at worst, and its key

# Every line the parser reads holds one of these: the reader parses no other record.
MARKERS = (b"oom", b"emory")
_INVOKED = b" invoked oom-killer: "
_USAGE = re.compile(rb"memory: usage (\d{1,20})kB, limit (\d{1,20})kB, failcnt \d{1,20}\Z")
_STATS = re.compile(rb"Memory cgroup stats for (.*):\Z")
_OOM_KILL = b"oom-kill:constraint="
_TAIL = re.compile(rb",pid=(\d{1,10}),uid=(\d{1,10})\Z")
_KILLED = re.compile(
    rb"Memory cgroup out of memory: Killed process (\d{1,10}) \((.{0,64}?)\) total-vm:(\d{1,20})kB,"
    rb" anon-rss:(\d{1,20})kB, file-rss:(\d{1,20})kB, shmem-rss:(\d{1,20})kB(?:, UID:(\d{1,10}))?")


@dataclass(frozen=True)
class KernelOomKill:
    """One memory cgroup OOM kill as the kernel logged it; bytes; None where the log does not say."""

    seq: int                              # the log's sequence number of the kill's first line
    usec: int                             # CLOCK_MONOTONIC microseconds of that line
    pid: int
    task: str                             # the victim's name (comm), as logged: untrusted
    uid: int | None = None
    oom_memcg: str | None = None       # the cgroup whose limit was hit
    task_memcg: str | None = None      # the victim's own cgroup
    limit_bytes: int | None = None     # the OOM cgroup's limit, from the "memory: usage" line
    total_vm_bytes: int | None = None
    anon_rss_bytes: int | None = None
    file_rss_bytes: int | None = None
    shmem_rss_bytes: int | None = None
    ambiguous: bool = False               # the oom-kill line split more than one way


def _text(raw: bytes, limit: int = MAX_PATH_CHARS) -> str:
    return unescape(raw[: limit * 4]).decode("utf-8", errors="replace")[:limit]


def _positions(text: bytes, key: bytes, start: int, end: int) -> list[int]:
    out: list[int] = []
    at = text.find(key, start, end)
    while at >= 0:
        out.append(at)
        at = text.find(key, at + 1, end)
    return out


def split_oom_kill(text: bytes) -> tuple[bytes, tuple[bytes, bytes, bytes] | None, int, int] | None:
    """An ``oom-kill:`` line -> (constraint, (oom_memcg, task_memcg, task) or None where the line
    does not split exactly one way, pid, uid); None for another line.

    The OOM cgroup starts at the first ``,oom_memcg=/``: nothing before it can hold a ``/`` (the
    node masks are numbers, the cpuset is a cgroup's name). The task name starts at a ``,task=``
    among the last ``TASK_FIELD_CHARS`` before ``,pid=`` (the name is at most 15 bytes, each at most
    4 characters escaped). Between them every ``,task_memcg=/`` is tried; the kernel's split always
    fits, and a second that fits makes the line name no cgroup."""
    if not text.startswith(_OOM_KILL):
        return None
    tail = _TAIL.search(text)
    if tail is None:
        return None
    constraint = text[len(_OOM_KILL):].split(b",", 1)[0]
    end = tail.start()
    splits = set()
    i = text.find(b",oom_memcg=/", 0, end)
    if i >= 0:
        a_start = i + len(b",oom_memcg=")
        tasks = _positions(text, b",task=", max(a_start, end - TASK_FIELD_CHARS), end)
        for j in _positions(text, b",task_memcg=/", a_start, end):
            memcg = text[a_start:j]
            t_start = j + len(b",task_memcg=")
            for k in tasks:
                if k < t_start:
                    continue
                task_memcg, comm = text[t_start:k], text[k + len(b",task="):end]
                if not (task_memcg == memcg or task_memcg.startswith(memcg.rstrip(b"/") + b"/")):
                    continue
                if len(unescape(comm)) > MAX_COMM_BYTES:
                    continue
                splits.add((memcg, task_memcg, comm))
    found = splits.pop() if len(splits) == 1 else None
    return constraint, found, int(tail.group(1)), int(tail.group(2))


class OomLogParser:
    """``feed(records)``: the kills in them, joined across calls (a kill's lines may straddle two
    reads); ``kills``: the newest ``MAX_KILLS``, oldest first."""

    def __init__(self) -> None:
        self._limit: tuple[int | None, bytes | None] | None = None  # (limit bytes, stats path)
        self._by_seq: dict[int, KernelOomKill] = {}
        self._open: int | None = None  # seq of the kill whose "Killed process" line is awaited

    @property
    def kills(self) -> tuple[KernelOomKill, ...]:
        return tuple(self._by_seq[s] for s in sorted(self._by_seq))

    def feed(self, records: Iterable[KmsgRecord]) -> None:
        for r in records:
            text = r.text
            if _INVOKED in text:
                self._limit, self._open = None, None
            elif text.startswith(b"memory: usage "):
                m = _USAGE.match(text)
                if m:
                    limit = int(m.group(2)) * 1024
                    self._limit = (None if limit >= UNLIMITED_FLOOR else limit, None)
            elif text.startswith(b"Memory cgroup stats for "):
                m = _STATS.match(text)
                if m and self._limit is not None and self._limit[1] is None:
                    self._limit = (self._limit[0], m.group(1))
            elif text.startswith(_OOM_KILL):
                self._oom_kill(r)
            elif text.startswith(b"Memory cgroup out of memory: Killed process "):
                self._killed(r)

    def _keep(self, kill: KernelOomKill) -> None:
        self._by_seq[kill.seq] = kill
        while len(self._by_seq) > MAX_KILLS:
            del self._by_seq[min(self._by_seq)]

    def _oom_kill(self, r: KmsgRecord) -> None:
        split = split_oom_kill(r.text)
        if split is None:
            return
        constraint, paths, pid, uid = split
        self._open = None
        if constraint != b"CONSTRAINT_MEMCG":
            self._limit = None
            return  # the host's own OOM (or a cpuset's, a mempolicy's): not a group's limit
        limit = None
        if paths is not None and self._limit is not None and self._limit[1] in (None, paths[0]):
            limit = self._limit[0]
        self._limit = None
        kill = KernelOomKill(
            seq=r.seq, usec=r.usec, pid=pid, uid=uid, task=_text(paths[2], 64) if paths else "",
            oom_memcg=_text(paths[0]) if paths else None, task_memcg=_text(paths[1]) if paths else None,
            limit_bytes=limit, ambiguous=paths is None)
        self._keep(kill)
        self._open = kill.seq

    def _killed(self, r: KmsgRecord) -> None:
        m = _KILLED.match(r.text)
        if m is None:
            return
        pid = int(m.group(1))
        uid = int(m.group(7)) if m.group(7) is not None else None
        pending = self._by_seq.get(self._open) if self._open is not None else None
        self._open = None
        if pending is None or pending.pid != pid:
            # No oom-kill line before it (rate-limited, or a kernel before 4.19): a kill in some cgroup.
            pending = KernelOomKill(seq=r.seq, usec=r.usec, pid=pid, task="", uid=uid)
        self._keep(replace(pending, task=_text(m.group(2), 64), uid=pending.uid if pending.uid is not None else uid,
                           total_vm_bytes=int(m.group(3)) * 1024, anon_rss_bytes=int(m.group(4)) * 1024,
                           file_rss_bytes=int(m.group(5)) * 1024, shmem_rss_bytes=int(m.group(6)) * 1024))
