"""A group of processes under one memory limit (``Cgroup``) and the records it is made of.

A pod's container, a Docker or Podman container, a Slurm job step, a systemd unit, or a plain cgroup:
who owns it (``GroupOwner``), the memory limit that binds it and what the kernel counts in it
(``GroupLimit``), and the pinned memory its processes hold (``HeldMemory``, as for a process). Its text
is printable and bounded (the collector makes it so).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .kinds import GROUP_KIND_SHORT, GROUP_KIND_WORDS, GROUP_NAME_LEAD, GroupKind
from .process import HeldMemory
from .serial import Serial


def bare_group_name(kind: GroupKind, name: str) -> str:
    """A group's name without a leading word its kind says: "ml/trainer/worker", "1a2b3c4d5e6f", "4711.0"."""
    lead = GROUP_NAME_LEAD.get(kind)
    if lead and name.startswith(lead) and len(name) > len(lead):
        return name[len(lead):]
    return name


def group_subject(kind: GroupKind, name: str, job: str | None = None, step: str | None = None) -> str:
    """How a finding names a group, each kind once: "pod ns/pod/container", "Docker container 1a2b...",
    "Slurm job 4711 step 0", "systemd unit x.service", "cgroup /path"."""
    if kind == "slurm" and job:
        return f"Slurm job {job}" + (f" step {step}" if step else "")
    return f"{GROUP_KIND_WORDS.get(kind, 'group')} {bare_group_name(kind, name)}"


def group_short(kind: GroupKind, name: str, job: str | None = None, step: str | None = None) -> str:
    """The short form where room is scarce: "pod ns/pod/container", "docker 1a2b...", "job 4711.0",
    "unit x.service", "cgroup /path"."""
    if kind == "slurm" and job:
        return f"job {job}" + (f".{step}" if step else "")
    return f"{GROUP_KIND_SHORT.get(kind, 'group')} {bare_group_name(kind, name)}"


@dataclass(frozen=True)
class GroupOwner(Serial):
    """Who a group belongs to, in the words of what runs it (each None where it does not say)."""

    pod: str | None = None
    namespace: str | None = None
    container: str | None = None           # the container's name where the node says it
    container_id: str | None = None
    pod_uid: str | None = None
    job: str | None = None                 # Slurm job id
    step: str | None = None                # Slurm step: a number, "batch", "extern", "interactive"
    unit: str | None = None                # systemd unit
    # The user owning the delegated subtree it sits in (user@UID.service, or a directory on its path
    # not owned by root): its kind and ids are what that user named its cgroup, not the runtime's word.
    delegated_uid: int | None = None


@dataclass(frozen=True)
class GroupLimit(Serial):
    """The memory limit that binds a group, and what the kernel counts in it."""

    limit_bytes: int | None = None         # the tightest limit on its path; None: none (or unknown)
    limit_path: str | None = None          # the cgroup that sets that limit
    current_bytes: int | None = None       # memory.current / memory.usage_in_bytes
    oom_kills: int | None = None           # the kernel's count of OOM kills in it
    oom_kills_at_start: int | None = None  # that count when pinmon first saw the group

    @property
    def oom_kills_since_start(self) -> int | None:
        """OOM kills since pinmon first saw the group; None where either count is unknown."""
        if self.oom_kills is None or self.oom_kills_at_start is None:
            return None
        return max(0, self.oom_kills - self.oom_kills_at_start)


@dataclass(frozen=True)
class Cgroup(Serial):
    key: str                                  # stable identity; ProcessIdentity.cgroup names it
    kind: GroupKind
    name: str                                 # what to call it: "ns/pod/container", a job step, a unit, a path
    path: str | None = None                # its cgroup, as /proc/PID/cgroup writes it
    owner: GroupOwner = field(default_factory=GroupOwner)
    limit: GroupLimit = field(default_factory=GroupLimit)
    # Its processes' pinned, write-combined and VmPin bytes (pinned_bytes without VmPin, as for a
    # process); pinned pages and VmPin are charged to the group, so they are held to its memory in
    # use where the kernel gives it (held.capped then).
    held: HeldMemory = field(default_factory=HeldMemory)
    processes: int = 0                        # its processes in the snapshot's rows
    notes: tuple[str, ...] = ()               # why a figure is unknown

    @property
    def subject(self) -> str:
        """How a finding or a view names it: "pod ns/pod/container", "Slurm job 42 step 0" (``group_subject``)."""
        return group_subject(self.kind, self.name, self.owner.job, self.owner.step)

    @property
    def short(self) -> str:
        """Its name where room is scarce: "pod ns/pod/container", "job 42.0" (``group_short``)."""
        return group_short(self.kind, self.name, self.owner.job, self.owner.step)
