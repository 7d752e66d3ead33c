"""The exporter's cap on ``pinmon_finding`` series cannot be filled by one user (issue 30, A4): the
attack's shape built with fakes (a cgroup tree, processes, the real advisor), then scraped."""
from __future__ import annotations

import hashlib
import os

import pytest

from pinmon.advise import advise
from pinmon.collect.cgroups.groups import GroupCollector
from pinmon.export.families.finding_quota import MAX_FINDING_SERIES, OWNER_QUOTA, Owners, select
from pinmon.model import HeldMemory, HostMemory, ProcessIdentity, ProcessPinned, Snapshot
from tests import factories as make
from tests.collect.cgroups.fakecg import fake_root, v2_group, write

from .helpers import render, samples, value

MIB, GIB = 1 << 20, 1 << 30
UID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
U_ = UID.replace("-", "_")
POD = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{U_}.slice"
POD_CTR = f"{POD}/cri-containerd-{'c' * 64}.scope"
DOCKER = f"/system.slice/docker-{'d' * 64}.scope"
USER = "/user.slice/user-1500.slice/user@1500.service"


def cid(i: int) -> str:
    # The attacker's ids sort before the real ones ("0000..." < "cccc..." < "dddd...").
    return "0" * 8 + hashlib.sha256(str(i).encode()).hexdigest()[8:]


def attack(tmp_path, n=101):
    """A snapshot of a real pod and a real Docker container, each at 75% of its limit, and ``n`` of
    user 1500's processes, each in a docker-shaped cgroup of its own delegated subtree with a 64 MiB
    limit, 48 MiB pinned; the user's groups come first, as the names they chose sort."""
    tree = {"/kubepods.slice": v2_group(), "/kubepods.slice/kubepods-burstable.slice": v2_group(),
            POD: v2_group(max_=4 * GIB), POD_CTR: v2_group(current=3 * GIB + 100 * MIB),
            DOCKER: v2_group(max_=GIB, current=GIB), USER: v2_group()}
    texts, rows = {}, []
    for i in range(n):
        path = f"{USER}/docker-{cid(i)}.scope"
        tree[path] = v2_group(max_=64 * MIB, current=60 * MIB)
        texts[1000 + i] = f"0::{path}\n"
        rows.append(ProcessPinned(pid=1000 + i, identity=ProcessIdentity(name="x", user="mallory"),
                                  held=HeldMemory(pinned_bytes=48 * MIB)))
    texts[200], texts[300] = f"0::{POD_CTR}\n", f"0::{DOCKER}\n"
    rows += [ProcessPinned(pid=200, identity=ProcessIdentity(name="trainer", user="root"),
                           held=HeldMemory(pinned_bytes=3 * GIB)),
             ProcessPinned(pid=300, identity=ProcessIdentity(name="loader", user="root"),
                           held=HeldMemory(pinned_bytes=768 * MIB))]
    root = fake_root(tmp_path, "v2", tree)
    for pid, text in texts.items():
        write(os.path.join(str(tmp_path), "proc", str(pid), "cgroup"), text)
    out, groups = GroupCollector(proc_root=os.path.join(str(tmp_path), "proc"), host_root=root).annotate(rows)
    groups = tuple(sorted(groups, key=lambda g: g.owner.delegated_uid is None))  # the user's first
    return Snapshot(time=1.0, host=HostMemory(hostname="h", mem_total_bytes=512 * GIB, effective_mem_limit_bytes=512 * GIB),
                    processes=tuple(out), cgroups=groups)


@pytest.mark.hardening
def test_101_groups_of_one_user_cannot_push_out_a_real_pods_and_containers_criticals(tmp_path):
    snap = attack(tmp_path)
    findings = advise([snap])
    crit = [f for f in findings if f.rule == "pinned-cgroup-share" and f.severity == "critical"]
    assert len(crit) == 103
    real = {g.subject for g in snap.cgroups if g.owner.delegated_uid is None}
    # In the advisor's order (by subject within a severity), the real pod comes past the cap: a cut by
    # severity alone dropped it.
    assert len(real) == 2 and [i for i, f in enumerate(crit) if f.subject.startswith("pod ")] == [102]
    text = render([snap], findings)
    served = {dict(labs)["subject"] for (n, labs), _ in samples(text).items() if n == "pinmon_finding"}
    assert len(served) == MAX_FINDING_SERIES and real <= served
    assert value(text, "pinmon_rule_findings", rule="pinned-cgroup-share", severity="critical") == 103
    assert value(text, "pinmon_finding_series_dropped", severity="critical") == 3
    assert value(text, "pinmon_finding_series_dropped", severity="warning") == 0
    assert "# HELP pinmon_finding 1 for each active advisor finding (rule ids are stable); 3 left out" in text


@pytest.mark.hardening
def test_one_users_criticals_leave_room_for_everyone_elses_warnings():
    # 500 criticals of one delegated user against one warning each of twelve other owners.
    flood = [make.finding("pinned-cgroup-share", "critical", f"user 1500: docker {i:04}",
                          values={"delegated_uid": 1500})
             for i in range(500)]
    others = [make.finding("pinned-growth", "warning", f"pid {i} (job)", values={"pid": i}) for i in range(12)]
    procs = tuple(make.process(pid=i, user=f"u{i}") for i in range(12))
    chosen = select(flood + others, make.snapshot(processes=procs))
    assert len(chosen.served) == MAX_FINDING_SERIES
    assert {k[2] for k in chosen.served} >= {f.subject for f in others}
    assert chosen.dropped == {"critical": 500 - (MAX_FINDING_SERIES - 12)}
    # With room for all, nothing is left out, and the worst come first.
    few = select(flood[:3] + others[:2], make.snapshot(processes=procs))
    assert few.dropped == {} and [k[1] for k in few.served] == ["critical"] * 3 + ["warning"] * 2


def test_owners_of_findings():
    snap = make.snapshot(
        processes=[make.process(pid=7, user="alice", cgroup="user/1500/docker/x"), make.process(pid=8, user="bob"),
                   make.process(pid=9, user=None)],
        cgroups=(make_group("user/1500/docker/x", 1500), make_group("pod/real", None)))
    owners = Owners(snap)

    def owner(**values):
        return owners.of(make.finding("r", "warning", "s", values=values))

    assert owner(cgroup="user/1500/docker/x") == ("uid", "1500")
    assert owner(cgroup="pod/real") == ("group", "pod/real")
    assert owner(cgroup="gone/key", delegated_uid=1500) == ("uid", "1500")  # an OOM kill of a group now gone
    assert owner(pid=7) == ("uid", "1500") and owner(pid=8) == ("user", "bob")
    assert owner(pid=9) == ("rule", "r") and owner(pid=4242) == ("rule", "r") and owner() == ("rule", "r")
    assert owner(delegated_uid=True) == ("rule", "r")


def make_group(key, delegated_uid):
    from pinmon.model import Cgroup, GroupOwner

    return Cgroup(key=key, kind="docker", name=key, owner=GroupOwner(delegated_uid=delegated_uid))


def test_a_repeated_finding_is_one_series_and_the_quota_is_per_owner():
    same = [make.finding("pcie-errors", "warning", "gpu0")] * 3
    assert select(same, None).served == [("pcie-errors", "warning", "gpu0")]
    many = [make.finding("mlock-not-pinned", "warning", f"pid {i}") for i in range(OWNER_QUOTA + 5)]
    assert len(select(many, None, cap=OWNER_QUOTA + 5).served) == OWNER_QUOTA + 5
