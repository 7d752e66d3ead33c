"""The snapshot's groups: each process row's owner (pod container, container, Slurm step, unit,
cgroup), and per group its memory limit, usage, OOM kills and pinned bytes.

Pinned pages are charged to the cgroup of the process that pinned them and cannot be reclaimed, so
the OOM killer acts at the group's own limit, long before the host's RAM is short. A group holds its
rows' pinned bytes (the ``/proc`` estimate, or a traced figure within the kernel's bounds), ``VmPin``
and write-combined bytes (``HeldMemory``, as a row does). The first two are pages charged to the group,
so where the kernel gives the group's usage they are held to it (VmPin, the kernel's own count, first),
and the group's ``held.capped`` says so.

A group is one cgroup: its key holds its path (``ownership.path_id``), so two cgroups whose names
claim one container stay two groups. A group below a directory a user owns is that user's
(``delegation.py``, ``ownership.delegated``): shown as theirs, with no name from the node's records.
The figures of a group never depend on which of its processes comes first: its owner is the first
of its processes' owners in a fixed order, and its limit the tightest over all its processes' own
cgroups (a limit on a Slurm task's cgroup below its step binds, ``limits.py``).

Cost: each row's owner comes from ``OwnerCache`` (a pid's cgroup file read once a minute, or when
the process's name changes), each group's files once per snapshot (``CgroupMemoryReader``), each
container's names once (``NameResolver``). A group whose processes are gone stays in the snapshot for
``GONE_KEEP_S`` with its limit and OOM count still read, so an OOM kill that ended its last process
shows (``cgroup-oom-kills``). The OOM count pinmon first saw for a group is kept with it
(``oom_kills_at_start``).
"""
from __future__ import annotations

import time
from collections.abc import Callable

from ...model import Cgroup, GroupLimit, GroupOwner, HeldMemory, ProcessPinned, summed
from ...model.kinds import GROUP_KINDS, GroupKind
from ...model.serial import evolve
from ...units import printable
from .delegation import DelegationCheck
from .limits import CgroupMemory, CgroupMemoryReader
from .names import NameResolver, Names
from .ownership import KIND_POD, KIND_SLURM, KIND_SYSTEMD, CgroupPaths, Owner, bounded_path, delegated
from .proc_owner import OwnerCache

# How long a group whose processes are gone stays in the snapshots.
GONE_KEEP_S = 300.0
# Groups kept in all: past this, those gone longest are dropped first.
MAX_GROUPS = 4096
NAME_CHARS = 64


def group_name(owner: Owner, names: Names) -> str:
    """What to call a group: ``namespace/pod/container`` where the node says, else the owner's own words."""
    if owner.kind == KIND_POD and names.pod_name:
        parts = [names.namespace, names.pod_name, names.container_name]
        text = "/".join(p for p in parts if p)
        if owner.helper:
            text += f" ({owner.helper})"
        return printable(text, NAME_CHARS)
    if names.container_name:
        return printable(f"{owner.kind} {names.container_name}", NAME_CHARS)
    return printable(owner.display, NAME_CHARS)


def group_kind(kind: str) -> GroupKind:
    """The owner's kind as the model's word ("unknown" for one it does not have)."""
    return next((k for k in GROUP_KINDS if k == kind), "unknown")


def held_within(held: HeldMemory, current_bytes: int | None) -> HeldMemory:
    """``held`` with its pinned bytes and VmPin, pages charged to the group and resident, at most the
    group's memory in use (``current_bytes``): VmPin, the kernel's own count, is kept first."""
    if current_bytes is None:
        return held
    vm, pinned = held.vm_pinned_bytes, held.pinned_bytes
    if (vm or 0) + (pinned or 0) <= current_bytes:
        return held
    vm = None if vm is None else min(vm, current_bytes)
    pinned = None if pinned is None else min(pinned, current_bytes - (vm or 0))
    return evolve(held, vm_pinned_bytes=vm, pinned_bytes=pinned, capped=True)


def _owner_order(owner: Owner) -> tuple:
    """A fixed order of the owners one group's processes name (they differ only outside the memory
    hierarchy's path, a hybrid host's unified line): the group's figures never depend on which of
    its processes comes first."""
    return (owner.cgroup.v2 or "", owner.cgroup.v1_memory or "", owner.display)


def _leaf_order(paths: CgroupPaths) -> tuple:
    return (paths.v2 or "", paths.v1_memory or "")


class GroupCollector:
    """``annotate(rows)`` -> (rows with their group's key, the groups)."""

    def __init__(self, proc_root: str = "/proc", host_root: str = "/",
                 clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.owners = OwnerCache(proc_root, clock=clock)
        self.memory = CgroupMemoryReader(root=host_root, clock=clock)
        self.names = NameResolver(root=host_root, clock=clock)
        self.delegation = DelegationCheck(self.memory.mounts, clock=clock)
        # key -> (owner, names, when last seen with a process, OOM count first seen)
        self._known: dict[str, tuple[Owner, Names, float, int | None]] = {}
        # key -> the group's texts, made once (printable and bounded): key, name, path
        self._texts: dict[str, tuple[str, str]] = {}
        self._bounded: dict[str, str] = {}  # a cgroup path -> as shown
        # id(owner) -> (that owner, checked at, the owner with the directories' delegation applied);
        # the owner cache hands out one object per distinct cgroup file, so this is one entry each
        self._checked: dict[int, tuple[Owner, float, Owner]] = {}

    def checked(self, owner: Owner, now: float) -> Owner:
        """``owner``, as its user's where a directory above its group is not root's."""
        kept = self._checked.get(id(owner))
        if kept is not None and kept[0] is owner and now - kept[1] < self.delegation.recheck_s:
            return kept[2]
        uid = self.delegation.uid(owner.cgroup) if owner.delegated_uid is None else None
        result = owner if uid is None else delegated(owner, uid)
        if len(self._checked) >= 4 * MAX_GROUPS:
            self._checked.clear()
        self._checked[id(owner)] = (owner, now, result)
        return result

    def annotate(self, rows: list[ProcessPinned]) -> tuple[list[ProcessPinned], tuple[Cgroup, ...]]:
        now = self._clock()
        owners = self.owners.owners([r.pid for r in rows], {r.pid: r.identity.name for r in rows})
        self.owners.prune(owners)
        members: dict[str, list[ProcessPinned]] = {}
        group_owners: dict[str, dict[int, Owner]] = {}
        out = []
        for r in rows:
            owner = owners.get(r.pid)
            if owner is None:  # gone, or its cgroup file unreadable: no group
                out.append(r)
                continue
            owner = self.checked(owner, now)
            key = owner.key
            group_rows = members.get(key)
            if group_rows is None:  # the group's first row in this snapshot
                group_rows = members[key] = []
                group_owners[key] = {}
            group_owners[key][id(owner)] = owner
            r = evolve(r, identity=evolve(r.identity, cgroup=key))
            group_rows.append(r)
            out.append(r)
        leaves: dict[CgroupPaths, set[CgroupPaths]] = {}
        for key, found in group_owners.items():
            owner = next(iter(found.values())) if len(found) == 1 else min(found.values(), key=_owner_order)
            known = self._known.get(key)
            if known is None or (known[0] is not owner and known[0] != owner):
                names = self.names.names(owner)
                at_start = known[3] if known is not None else None
                known = (owner, names, now, at_start)
                self._texts[key] = (printable(key, 400), group_name(owner, names))
            self._known[key] = (known[0], known[1], now, known[3])
            group_leaves = leaves.setdefault(known[0].cgroup, set())
            group_leaves.update(o.process_cgroup for o in found.values() if o.process_cgroup != known[0].cgroup)
        self._forget(now)
        memory = self.memory.read((k[0].cgroup for k in self._known.values()),
                                  {g: sorted(ls, key=_leaf_order) for g, ls in leaves.items() if ls})
        groups = []
        for key, (owner, names, _seen, at_start) in self._known.items():
            mem = memory.get(owner.cgroup)
            if at_start is None and mem is not None and mem.oom_kills is not None:
                at_start = mem.oom_kills
                self._known[key] = (owner, names, self._known[key][2], at_start)
            groups.append(self._group(self._texts[key], owner, names, mem, members.get(key, []), at_start))
        groups.sort(key=lambda g: (-(g.held.bytes or 0), g.key))
        return out, tuple(groups)

    def _forget(self, now: float) -> None:
        gone = [k for k, v in self._known.items() if now - v[2] > GONE_KEEP_S]
        for k in gone:
            del self._known[k]
        if len(self._known) > MAX_GROUPS:
            for k, _ in sorted(self._known.items(), key=lambda kv: kv[1][2])[: len(self._known) - MAX_GROUPS]:
                del self._known[k]
        for k in [k for k in self._texts if k not in self._known]:
            del self._texts[k]
        if len(self._bounded) > 4 * MAX_GROUPS:
            self._bounded.clear()

    def _shown(self, path: str | None) -> str | None:
        """A cgroup path as shown (printable, its tail where long), made once per path."""
        if not path:
            return None
        shown = self._bounded.get(path)
        if shown is None:
            shown = self._bounded[path] = bounded_path(path)
        return shown

    def _group(self, texts: tuple[str, str], owner: Owner, names: Names, mem: CgroupMemory | None,
               rows: list[ProcessPinned], at_start: int | None) -> Cgroup:
        notes: tuple[str, ...] = ()
        current = limit = ooms = None
        path = limit_path = None
        if mem is not None:
            current, limit, ooms, notes = mem.current_bytes, mem.limit_bytes, mem.oom_kills, mem.notes
            path, limit_path = self._shown(mem.path), self._shown(mem.limit_path)
        step = owner.slurm_step
        return Cgroup(
            key=texts[0], kind=group_kind(owner.kind), name=texts[1], path=path,
            owner=GroupOwner(
                pod=names.pod_name, namespace=names.namespace, container=names.container_name,
                container_id=owner.container_id, pod_uid=owner.pod_uid,
                job=str(owner.slurm_job) if owner.kind == KIND_SLURM and owner.slurm_job is not None else None,
                step=step if owner.kind == KIND_SLURM else None,
                unit=owner.unit if owner.kind == KIND_SYSTEMD else None, delegated_uid=owner.delegated_uid),
            limit=GroupLimit(limit_bytes=limit, limit_path=limit_path, current_bytes=current, oom_kills=ooms,
                             oom_kills_at_start=at_start),
            held=held_within(summed(r.held for r in rows), current), processes=len(rows),
            notes=tuple(printable(n, 200) for n in notes) if notes else ())

    def close(self) -> None:
        self.memory.close()
