"""A delegated cgroup named after a real pod or container: it is its user's group, never merged with
the real one, never lending or borrowing a limit or a name; distinct cgroup paths stay distinct; and
a group's figures do not depend on the order its processes come in (issue 30, A2). Also the limits
that bind below a group's own cgroup (a Slurm task under its step, B2)."""
from __future__ import annotations

import dataclasses
import os
import random

import pytest

from pinmon.advise import advise
from pinmon.collect.cgroups.delegation import DelegationCheck
from pinmon.collect.cgroups.groups import GroupCollector
from pinmon.collect.cgroups.mounts import read_mounts
from pinmon.collect.cgroups.ownership import KIND_CGROUP, KIND_POD, KIND_PODMAN, CgroupPaths, delegated, owner_of
from pinmon.model import HeldMemory, HostMemory, ProcessIdentity, ProcessPinned, Snapshot

from .fakecg import fake_root, v1_group, v2_group, write

GIB = 1 << 30
MIB = 1 << 20
UID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
U_ = UID.replace("-", "_")
C = "a42d519714d616e9411dbceec4b52808bd6b1ee53e6f6497a281d655357d8b71"
POD = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{U_}.slice"
CTR = f"{POD}/cri-containerd-{C}.scope"
USER = "/user.slice/user-1500.slice/user@1500.service"
FAKE_CTR = f"{USER}/kubepods-burstable-pod{U_}.slice/cri-containerd-{C}.scope"


def proc_tree(tmp_path, cgroups: dict[int, str]) -> str:
    """A fake /proc: each pid's cgroup file."""
    proc = os.path.join(str(tmp_path), "proc")
    for pid, text in cgroups.items():
        write(os.path.join(proc, str(pid), "cgroup"), text)
    return proc


def rows(pinned: dict[int, int]) -> list[ProcessPinned]:
    return [ProcessPinned(pid=pid, identity=ProcessIdentity(name=f"p{pid}"), held=HeldMemory(pinned_bytes=b))
            for pid, b in sorted(pinned.items())]


def by_kind(groups):
    return {(g.kind, g.owner.delegated_uid): g for g in groups}


# --- the pure rule: a user@UID.service ancestor --------------------------------------------------

def test_a_pod_claimed_below_user_service_is_that_users():
    real, fake = owner_of(f"0::{CTR}\n"), owner_of(f"0::{FAKE_CTR}\n")
    assert real.delegated_uid is None and fake.delegated_uid == 1500
    assert fake.kind == KIND_POD and fake.pod_uid == real.pod_uid and fake.container_id == C
    assert fake.display.startswith("user 1500: pod 0a1b2c3d/")
    assert fake.key != real.key and fake.key.startswith("user/1500/")


def test_rootless_podman_is_shown_as_its_users():
    owner = owner_of(f"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{C}.scope\n")
    assert owner.kind == KIND_PODMAN and owner.delegated_uid == 1000
    assert owner.display == f"user 1000: podman {C[:12]}"


def test_a_units_below_user_service_are_the_users_own():
    owner = owner_of("0::/user.slice/user-1000.slice/user@1000.service/app.slice/jupyter.service\n")
    assert owner.delegated_uid == 1000 and owner.display == "user 1000: jupyter.service"
    session = owner_of("0::/user.slice/user-1000.slice/session-3.scope\n")  # root's logind made it
    assert session.delegated_uid is None and session.display == "session-3.scope (uid 1000)"


def test_distinct_cgroup_paths_of_one_claimed_container_have_distinct_keys():
    a = owner_of(f"0::/system.slice/docker-{C}.scope\n")
    b = owner_of(f"0::/machine.slice/docker-{C}.scope\n")
    assert a.container_id == b.container_id and a.key != b.key
    # and processes of one container, in sub-cgroups of its scope, share one
    c = owner_of(f"0::/system.slice/docker-{C}.scope/init\n")
    assert c.key == a.key


def test_long_paths_keep_distinct_bounded_keys():
    base = "/batch/" + "x" * 300
    a, b = owner_of(f"0::{base}/a\n"), owner_of(f"0::{base}/b\n")
    assert a.key != b.key and len(a.key) < 120 and "…#" in a.key
    evil = owner_of("0::/batch/\x1b[2Jrun\n")
    assert "\x1b" not in evil.key


def test_delegated_applies_the_directory_owner():
    owner = owner_of(f"0::/shared/team/docker-{C}.scope\n")
    d = delegated(owner, 1500)
    assert d.delegated_uid == 1500 and d.display == f"user 1500: docker {C[:12]}" and d.key != owner.key
    assert delegated(d, 7) is d  # already a user's
    plain = delegated(owner_of("0::/shared/team/run\n"), 1500)
    assert plain.kind == KIND_CGROUP and plain.key.startswith("user/1500/cgroup/")


# --- the collector: the attack of issue 30 --------------------------------------------------------

def attack_tree(tmp_path, layout="v2"):
    root = fake_root(tmp_path, layout, {
        "/kubepods.slice": v2_group(),
        "/kubepods.slice/kubepods-burstable.slice": v2_group(),
        POD: v2_group(max_=4 * GIB),
        CTR: v2_group(current=3 * GIB + 100 * MIB),
        USER: v2_group(),
        FAKE_CTR: v2_group(current=10 * MIB),
    })
    # The kubelet's log link names the real container: the fake one must not borrow it.
    logs = os.path.join(root, "var/log/containers")
    os.makedirs(logs)
    open(os.path.join(logs, f"trainer_ml_worker-{C}.log"), "w").close()
    return root


@pytest.mark.parametrize("fake_pids", [(100,), (300,), (100, 300)], ids=["lower", "higher", "both"])
def test_a_fake_pod_in_a_users_subtree_neither_joins_nor_hides_the_real_one(tmp_path, fake_pids):
    root = attack_tree(tmp_path)
    texts = {200: f"0::{CTR}\n", **{pid: f"0::{FAKE_CTR}\n" for pid in fake_pids}}
    pinned = {200: 3 * GIB, **{pid: 8 * MIB for pid in fake_pids}}
    col = GroupCollector(proc_root=proc_tree(tmp_path, texts), host_root=root)
    out, groups = col.annotate(rows(pinned))
    kinds = by_kind(groups)
    real, fake = kinds[(KIND_POD, None)], kinds[(KIND_POD, 1500)]
    assert real.processes == 1 and real.held.pinned_bytes == 3 * GIB
    assert real.limit.limit_bytes == 4 * GIB and real.limit.limit_path.endswith(POD[-80:])  # shown: its tail
    assert real.name == "ml/trainer/worker"
    assert fake.processes == len(fake_pids) and fake.limit.limit_bytes is None
    assert fake.name.startswith("user 1500: pod 0a1b2c3d/") and fake.owner.pod is None and fake.owner.container is None
    assert fake.path.endswith(FAKE_CTR[-80:]) and "user@1500.service" in FAKE_CTR
    assert {r.pid: r.identity.cgroup for r in out}[200] == real.key
    snap = Snapshot(time=1.0, host=HostMemory(hostname="h", mem_total_bytes=512 * GIB), processes=tuple(out),
                    cgroups=groups)
    (share,) = [f for f in advise([snap]) if f.rule == "pinned-cgroup-share"]
    assert share.severity == "critical" and share.values["cgroup"] == real.key


def test_a_directory_chowned_to_a_user_makes_what_is_below_it_the_users(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("chown needs root")
    team = "/shared/team"
    root = fake_root(tmp_path, "v1_only", {team: v1_group(), f"{team}/docker-{C}.scope": v1_group(limit=GIB)})
    os.chown(os.path.join(root, "sys/fs/cgroup/memory/shared/team"), 1500, 1500)
    texts = {10: f"4:memory:{team}/docker-{C}.scope\n0::/\n"}
    col = GroupCollector(proc_root=proc_tree(tmp_path, texts), host_root=root)
    _out, (g,) = col.annotate(rows({10: MIB}))
    assert g.owner.delegated_uid == 1500 and g.name == f"user 1500: docker {C[:12]}"
    assert g.key.startswith("user/1500/docker/") and g.limit.limit_bytes == GIB


def test_a_containers_own_directory_owned_by_its_user_namespace_is_not_delegation(tmp_path):
    # runc hands a user-namespaced container its own cgroup; the parents are still root's.
    if os.geteuid() != 0:
        pytest.skip("chown needs root")
    root = attack_tree(tmp_path)
    os.chown(os.path.join(root, "sys/fs/cgroup", CTR.lstrip("/")), 100000, 100000)
    mounts, _ = read_mounts(root)
    assert DelegationCheck(mounts).uid(CgroupPaths(v2=CTR)) is None
    os.chown(os.path.join(root, "sys/fs/cgroup", POD.lstrip("/")), 100000, 100000)
    assert DelegationCheck(mounts).uid(CgroupPaths(v2=CTR)) == 100000


def test_a_groups_figures_do_not_depend_on_its_processes_order(tmp_path):
    # A hybrid host: the processes of one container share its v1 memory cgroup and differ in the
    # unified line; a Slurm step's tasks sit in cgroups of their own below the step.
    job = "/slurm/uid_1000/job_7"
    root = fake_root(tmp_path, "v1_only", {
        job: v1_group(limit=8 * GIB),
        f"{job}/step_0": v1_group(usage=GIB),
        f"{job}/step_0/task_0": v1_group(limit=2 * GIB),
        f"{job}/step_0/task_1": v1_group(limit=GIB),
        f"/docker/{C}": v1_group(limit=4 * GIB),
    })
    texts = {10: f"4:memory:{job}/step_0/task_0\n0::/a\n", 11: f"4:memory:{job}/step_0/task_1\n0::/b\n",
             12: f"4:memory:{job}/step_0/task_0\n0::/c\n", 20: f"4:memory:/docker/{C}\n0::/x\n",
             21: f"4:memory:/docker/{C}\n0::/y\n"}
    proc = proc_tree(tmp_path, texts)
    pinned = {10: MIB, 11: 2 * MIB, 12: 3 * MIB, 20: 4 * MIB, 21: 5 * MIB}
    seen = set()
    for seed in range(8):
        order = rows(pinned)
        random.Random(seed).shuffle(order)
        _out, groups = GroupCollector(proc_root=proc, host_root=root).annotate(order)
        seen.add(tuple(sorted((g.key, repr(dataclasses.asdict(g))) for g in groups)))
    assert len(seen) == 1
    step = next(g for g in groups if g.kind == "slurm")
    # task_1's 1 GiB binds that task: the step's tightest limit, whichever task comes first
    assert step.limit.limit_bytes == GIB and step.limit.limit_path == f"{job}/step_0/task_1"
    assert step.processes == 3 and step.held.pinned_bytes == 6 * MIB


def test_a_limit_on_a_slurm_tasks_cgroup_below_its_step_binds(tmp_path):
    job = "/system.slice/slurmstepd.scope/job_9"
    root = fake_root(tmp_path, "v2", {
        job: v2_group(max_=16 * GIB),
        f"{job}/step_0": v2_group(current=GIB),
        f"{job}/step_0/user": v2_group(),
        f"{job}/step_0/user/task_0": v2_group(max_=2 * GIB),
    })
    texts = {10: f"0::{job}/step_0/user/task_0\n"}
    col = GroupCollector(proc_root=proc_tree(tmp_path, texts), host_root=root)
    _out, (g,) = col.annotate(rows({10: GIB}))
    assert g.name == "job 9.0" and g.path == f"{job}/step_0"
    assert g.limit.limit_bytes == 2 * GIB and g.limit.limit_path == f"{job}/step_0/user/task_0"
    assert g.limit.current_bytes == GIB
