"""``OomKill``: a process the kernel killed at a memory cgroup's limit, as its log tells it.

A group's cgroup goes with its last process: a Slurm job OOM-killed by its pinned memory ends, and
nothing live is left to show. The kernel's log keeps the kill (``collect/host/oom_log.py``); a
snapshot carries those within the lookback (``Snapshot.oom_kills``), each with the group named as a
live group is named, so the advisor (``oom-killed``), ``check``, recordings and the exporter can say
why the job died.
"""
from __future__ import annotations

from dataclasses import dataclass

from .group import group_short, group_subject
from .kinds import GroupKind, LimitSource
from .serial import Serial


@dataclass(frozen=True)
class OomKill(Serial):
    """One memory cgroup OOM kill. Bytes; None where the log does not say. Every text is printable
    and bounded (the task name and cgroup names are user text)."""

    time: float                                # when, Unix seconds (the log's monotonic time + boot time)
    pid: int
    process: str                               # the task's name (comm)
    seq: int | None = None                  # the kernel log's sequence number of the kill
    uid: int | None = None
    # The group, named as live groups are (Cgroup's fields of the same names); key equals the key a
    # live group of that cgroup has. kind "unknown" where the log names no cgroup.
    key: str | None = None
    kind: GroupKind = "unknown"
    name: str = "n/a"
    job: str | None = None                  # Slurm job id
    step: str | None = None
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None
    container_id: str | None = None
    pod_uid: str | None = None
    delegated_uid: int | None = None        # a user's delegated subtree: its names are that user's word
    path: str | None = None                 # the victim's cgroup (task_memcg)
    limit_path: str | None = None           # the cgroup whose limit was hit (oom_memcg)
    memory_limit_bytes: int | None = None   # that limit
    limit_source: LimitSource | None = None  # "kernel log": the limit logged at the kill; "cgroup": read since
    total_vm_bytes: int | None = None
    anon_rss_bytes: int | None = None
    file_rss_bytes: int | None = None
    shmem_rss_bytes: int | None = None      # shared memory resident at the kill: CUDA's pinned memory is here

    @property
    def subject(self) -> str:
        """How a finding names the killed process's group, as ``Cgroup.subject`` names a live one."""
        return group_subject(self.kind, self.name, self.job, self.step)

    @property
    def short(self) -> str:
        """Its group's name where room is scarce, as ``Cgroup.short``."""
        return group_short(self.kind, self.name, self.job, self.step)

    @property
    def rss_bytes(self) -> int | None:
        """Its resident memory at the kill (anon + file + shmem); None where the log does not say."""
        parts = (self.anon_rss_bytes, self.file_rss_bytes, self.shmem_rss_bytes)
        return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)

    @property
    def shmem_fraction(self) -> float | None:
        """Shared memory's share of its resident memory at the kill (pinned memory is shared memory)."""
        rss = self.rss_bytes
        if not rss or self.shmem_rss_bytes is None:
            return None
        return self.shmem_rss_bytes / rss
