"""Which findings the exporter serves as ``pinmon_finding`` series when there are more than it may serve.

A finding's subject is often a name a user chose (a cgroup of their own delegated subtree, a process),
and findings grow with what users start: 101 processes in 101 docker-shaped cgroups with small limits
make 101 criticals. Cut by severity alone, and within a severity by the advisor's order (the groups'
order, which names decide), they pushed out a real pod's and container's criticals. So each finding has
an owner, and every owner gets a share before anyone gets more:

- the owner of a finding about a group (``values["cgroup"]``) is the user of the delegated subtree it
  sits in (``GroupOwner.delegated_uid``, also carried as ``values["delegated_uid"]`` by a finding about
  a group that is gone); a group that is no one's subtree (a runtime's, systemd's, a Slurm step) is its
  own owner: only root makes those;
- the owner of a finding about a process (``values["pid"]``) is the delegated user of its group, else
  the user it runs as;
- any other finding (the host, a GPU, the probe) is owned by its rule.

The first ``OWNER_QUOTA`` findings of each owner (its worst first) come before anyone's next ones,
severity first among them; what room is left goes by severity, each owner's next finding in turn. So a
user with a thousand criticals gets their share and the rest of the room goes to everyone else's
findings, warnings included; with room for all, none is left out. A user's own groups and processes
share one owner (their uid for delegated groups, their name for processes outside them): more subjects
buy no more room.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

from ...model import SEVERITY_RANK, Finding, Snapshot
from ...model.kinds import Severity

MAX_FINDING_SERIES = 100
# Findings of one owner served before any owner's next one: with ten owners at their quota the cap is full.
OWNER_QUOTA = 10

SeriesKey = tuple[str, Severity, str]  # (rule, severity, subject): one pinmon_finding series


class Selection(NamedTuple):
    served: list[SeriesKey]
    dropped: dict[Severity, int]  # series left out, by severity


class Owners:
    """Who owns a finding, from the snapshot it was made of."""

    def __init__(self, snapshot: Snapshot | None) -> None:
        self._delegated: dict[str, int | None] = {}
        self._procs: dict[int, tuple[str | None, str | None]] = {}  # pid -> (group key, user)
        if snapshot is not None:
            self._delegated = {g.key: g.owner.delegated_uid for g in snapshot.cgroups}
            self._procs = {p.pid: (p.identity.cgroup, p.identity.user) for p in snapshot.processes}

    def of(self, f: Finding) -> tuple[str, str]:
        values = f.values if isinstance(f.values, dict) else {}
        uid = values.get("delegated_uid")
        if isinstance(uid, int) and not isinstance(uid, bool):
            return ("uid", str(uid))
        group = values.get("cgroup")
        if isinstance(group, str):
            owner = self._delegated.get(group)
            return ("uid", str(owner)) if owner is not None else ("group", group)
        pid = values.get("pid")
        if isinstance(pid, int) and not isinstance(pid, bool) and pid in self._procs:
            key, user = self._procs[pid]
            owner = self._delegated.get(key) if key is not None else None
            if owner is not None:
                return ("uid", str(owner))
            if user:
                return ("user", user)
        return ("rule", f.rule)


def select(findings: Iterable[Finding], snapshot: Snapshot | None, cap: int = MAX_FINDING_SERIES,
           quota: int = OWNER_QUOTA) -> Selection:
    """The series to serve, in order, and what was left out (see the module docstring). A finding
    repeated with the same three labels is one series, owned by its first finding's owner."""
    owners = Owners(snapshot)
    first: dict[SeriesKey, tuple[int, tuple[str, str]]] = {}
    for i, f in enumerate(findings):
        key: SeriesKey = (f.rule, f.severity, f.subject)
        if key not in first:
            first[key] = (i, owners.of(f))
    by_owner: dict[tuple[str, str], list[SeriesKey]] = defaultdict(list)
    for key in sorted(first, key=lambda k: (-SEVERITY_RANK.get(k[1], 0), first[k][0])):
        by_owner[first[key][1]].append(key)
    ranked: list[tuple[tuple[bool, int, int, int], SeriesKey]] = []
    for series in by_owner.values():
        for position, key in enumerate(series):
            ranked.append(((position >= quota, -SEVERITY_RANK.get(key[1], 0), position, first[key][0]), key))
    ranked.sort(key=lambda r: r[0])
    served = [key for _, key in ranked[:cap]]
    dropped: dict[Severity, int] = defaultdict(int)
    for _, key in ranked[cap:]:
        dropped[key[1]] += 1
    return Selection(served, dict(dropped))
