"""A group of processes under one memory limit (``Cgroup``) and the records it is made of.

A pod's container, a Docker or Podman container, a Slurm job step, a systemd unit, or a plain cgroup:
who owns it (``GroupOwner``), the memory limit that binds it and what the kernel counts in it
(``GroupLimit``), and the pinned memory its processes hold (``HeldMemory``, as for a process). Its text
is printable and bounded (the collector makes it so).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .kinds import GROUP_KIND_WORDS, GroupKind
from .process import HeldMemory
from .serial import Serial


@dataclass(frozen=True)
class GroupOwner(Serial):
    """Who a group belongs to, in the words of what runs it (each None where it does not say)."""

    pod: Optional[str] = None
    namespace: Optional[str] = None
    container: Optional[str] = None           # the container's name where the node says it
    container_id: Optional[str] = None
    pod_uid: Optional[str] = None
    job: Optional[str] = None                 # Slurm job id
    step: Optional[str] = None                # Slurm step: a number, "batch", "extern", "interactive"
    unit: Optional[str] = None                # systemd unit
    # The user owning the delegated subtree it sits in (user@UID.service, or a directory on its path
    # not owned by root): its kind and ids are what that user named its cgroup, not the runtime's word.
    delegated_uid: Optional[int] = None


@dataclass(frozen=True)
class GroupLimit(Serial):
    """The memory limit that binds a group, and what the kernel counts in it."""

    limit_bytes: Optional[int] = None         # the tightest limit on its path; None: none (or unknown)
    limit_path: Optional[str] = None          # the cgroup that sets that limit
    current_bytes: Optional[int] = None       # memory.current / memory.usage_in_bytes
    oom_kills: Optional[int] = None           # the kernel's count of OOM kills in it
    oom_kills_at_start: Optional[int] = None  # that count when pinmon first saw the group

    @property
    def oom_kills_since_start(self) -> Optional[int]:
        """OOM kills since pinmon first saw the group; None where either count is unknown."""
        if self.oom_kills is None or self.oom_kills_at_start is None:
            return None
        return max(0, self.oom_kills - self.oom_kills_at_start)


@dataclass(frozen=True)
class Cgroup(Serial):
    key: str                                  # stable identity; ProcessIdentity.cgroup names it
    kind: GroupKind
    name: str                                 # what to call it: "ns/pod/container", a job step, a unit, a path
    path: Optional[str] = None                # its cgroup, as /proc/PID/cgroup writes it
    owner: GroupOwner = field(default_factory=GroupOwner)
    limit: GroupLimit = field(default_factory=GroupLimit)
    # Its processes' pinned, write-combined and VmPin bytes (pinned_bytes without VmPin, as for a
    # process); pinned pages and VmPin are charged to the group, so they are held to its memory in
    # use where the kernel gives it (held.capped then).
    held: HeldMemory = field(default_factory=HeldMemory)
    processes: int = 0                        # its processes in the snapshot's rows
    notes: tuple[str, ...] = ()               # why a figure is unknown

    @property
    def kind_words(self) -> str:
        """"pod container", "Slurm job step", ...: what the group is, in words."""
        return GROUP_KIND_WORDS.get(self.kind, "group")

    @property
    def subject(self) -> str:
        """How a finding or a view names it: "pod container ns/pod/container", "Slurm job step job 42.0"."""
        return f"{self.kind_words} {self.name}"
