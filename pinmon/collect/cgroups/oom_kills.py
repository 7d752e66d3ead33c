"""Memory cgroup OOM kills from the kernel's log, with their groups named as live groups are.

``OomKillReader.read()`` once per snapshot: the kernel's records logged since the last call
(``host/kmsg.py``, one descriptor kept open, so the ring is read once), the kills in them
(``host/oom_log.py``), and those within the lookback as ``model.OomKill``:

- **The group**: the victim's cgroup (``task_memcg``) read as a process in it would be
  (``ownership.owner_of_path``), through the live groups' own code: the same kind, ids, name and
  key (a kill in a live group has that group's key), a delegated subtree its user's
  (``GroupCollector.checked``: a ``user@UID.service`` ancestor, or a directory above it root does not
  own, where those are still there), names only from the node's records a live group would use.
- **The limit**: the one logged at the kill (``memory: usage ..., limit ...`` of the OOM cgroup),
  which is what bound then; where the log has none (lines lost), the OOM cgroup's limit now if that
  cgroup is still there (``limit_source`` says which).
- **The time**: the record's ``CLOCK_MONOTONIC`` microseconds plus the boot time (wall clock minus
  monotonic clock, taken when the kill is first read).
- **The memory**: the ``Killed process`` line's total-vm, anon-rss, file-rss and shmem-rss (pinned
  memory is shared memory).

Each kill is named once (kept with it); the lookback is applied at every call, so a kill leaves the
snapshots when it grows older than it. A lookback of 0 turns the reader off (the log is not opened).
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace

from ...limits import DEFAULT_OOM_LOOKBACK_S
from ...model import OomKill
from ...model.kinds import LimitSource
from ...units import printable
from ..host.kmsg import KmsgReader
from ..host.oom_log import MARKERS, KernelOomKill, OomLogParser
from .groups import GroupCollector, group_kind, group_name
from .mounts import to_dir
from .ownership import KIND_SLURM, CgroupPaths, bounded_path, owner_of_path

TASK_CHARS = 64


def _monotonic() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


class OomKillReader:
    """``read()`` -> (the kills within ``lookback_s``, oldest first; notices)."""

    def __init__(self, groups: GroupCollector, lookback_s: float = DEFAULT_OOM_LOOKBACK_S,
                 kmsg: KmsgReader | None = None, wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = _monotonic):
        self.groups = groups
        self.lookback_s = lookback_s
        self.kmsg = kmsg if kmsg is not None else KmsgReader()
        self.parser = OomLogParser()
        self._wall, self._monotonic = wall, monotonic
        self._named: dict[KernelOomKill, OomKill] = {}

    def read(self) -> tuple[tuple[OomKill, ...], tuple[str, ...]]:
        if self.lookback_s <= 0:
            return (), ()
        self.parser.feed(self.kmsg.read_new(MARKERS))
        now = self._wall()
        boot = now - self._monotonic()
        cutoff = now - self.lookback_s
        kept: dict[KernelOomKill, OomKill] = {}
        out = []
        for k in self.parser.kills:
            named = self._named.get(k)
            if named is None:
                named = self._name(k, boot + k.usec / 1e6)
            kept[k] = named
            if named.time >= cutoff:
                out.append(named)
        self._named = kept
        return tuple(out), (self.kmsg.notice,) if self.kmsg.notice else ()

    def close(self) -> None:
        self.kmsg.close()

    def _memory_hierarchy_is_v1(self) -> bool:
        return self.groups.memory.mounts.v1_memory is not None

    def _paths(self, path: str) -> CgroupPaths:
        return CgroupPaths(None, path) if self._memory_hierarchy_is_v1() else CgroupPaths(path, None)

    def _exists(self, path: str) -> bool:
        mounts = self.groups.memory.mounts
        mount = mounts.v1_memory or mounts.v2
        if mount is None:
            return False
        directory, _why = to_dir(mount, path)
        return directory is not None and os.path.isdir(directory)

    def _limit(self, k: KernelOomKill) -> tuple[int | None, LimitSource | None]:
        if k.limit_bytes is not None:
            return k.limit_bytes, "kernel log"
        if k.oom_memcg is not None and self._exists(k.oom_memcg):
            limit = self.groups.memory.read_one(self._paths(k.oom_memcg)).limit_bytes
            if limit is not None:
                return limit, "cgroup"
        return None, None

    def _name(self, k: KernelOomKill, when: float) -> OomKill:
        limit, source = self._limit(k)
        kill = OomKill(time=max(0.0, when), pid=k.pid, process=printable(k.task, TASK_CHARS), seq=k.seq, uid=k.uid,
                       limit_path=bounded_path(k.oom_memcg) if k.oom_memcg is not None else None,
                       memory_limit_bytes=limit, limit_source=source, total_vm_bytes=k.total_vm_bytes,
                       anon_rss_bytes=k.anon_rss_bytes, file_rss_bytes=k.file_rss_bytes,
                       shmem_rss_bytes=k.shmem_rss_bytes)
        if k.task_memcg is None:
            why = "cgroup not logged (lines ambiguous)" if k.ambiguous else "cgroup not logged"
            return replace(kill, kind="unknown", name=why)
        owner = self.groups.checked(owner_of_path(k.task_memcg, self._memory_hierarchy_is_v1()), self._monotonic())
        names = self.groups.names.names(owner)
        return replace(
            kill, key=printable(owner.key, 400), kind=group_kind(owner.kind), name=group_name(owner, names),
            job=str(owner.slurm_job) if owner.kind == KIND_SLURM and owner.slurm_job is not None else None,
            step=owner.slurm_step if owner.kind == KIND_SLURM else None,
            pod=names.pod_name, namespace=names.namespace, container=names.container_name,
            container_id=owner.container_id, pod_uid=owner.pod_uid, delegated_uid=owner.delegated_uid,
            path=bounded_path(k.task_memcg))
