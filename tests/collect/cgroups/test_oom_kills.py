"""OOM kills from the kernel's log as the snapshot carries them: the group named as live groups are
(a Slurm step, a pod, a user's delegated cgroup), the limit logged at the kill or read from a cgroup
still there, the time from the log's monotonic clock and the boot time, and the lookback. On a real
v1 cgroup here (root): a job-shaped group OOM-killed with shared memory, its cgroup removed, then
reported by the live collector."""
from __future__ import annotations

import os

import pytest

from pinmon.advise import advise
from pinmon.collect.cgroups.groups import GroupCollector
from pinmon.collect.cgroups.oom_kills import OomKillReader
from pinmon.collect.cgroups.ownership import owner_of
from pinmon.collect.host.kmsg import KmsgReader
from pinmon.collect.live import LiveCollector

from ..test_oom_log import FakeKmsg, fixture_records, oom, record
from .fakecg import fake_root, v2_group
from .realcg import Child, memory_cgroup

MIB = 1 << 20
GIB = 1 << 30
UID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
U_ = UID.replace("-", "_")
C = "a42d519714d616e9411dbceec4b52808bd6b1ee53e6f6497a281d655357d8b71"
POD = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{U_}.slice"
CTR = f"{POD}/cri-containerd-{C}.scope"
USER = "/user.slice/user-1500.slice/user@1500.service"
BOOT = 1_800_000_000.0  # the wall clock at boot in these tests


def oom_reader(tmp_path, items, layout="v2", tree=None, lookback_s=86400.0, uptime_s=3600.0):
    root = fake_root(tmp_path, layout, tree or {})
    fake = FakeKmsg(items)
    kmsg = KmsgReader("/dev/kmsg", opener=fake.open, reader=fake.read)
    kmsg.close = lambda: None
    groups = GroupCollector(proc_root=str(tmp_path / "proc"), host_root=root)
    return OomKillReader(groups, lookback_s, kmsg, wall=lambda: BOOT + uptime_s, monotonic=lambda: uptime_s), fake


def test_a_slurm_steps_kill_from_the_real_capture(tmp_path):
    # The capture's usec is 1513 s after boot; the v1 box's paths name a Slurm job's step.
    r, _ = oom_reader(tmp_path, fixture_records(), layout="v1_only")
    (k,), notices = r.read()
    assert notices == ()
    assert k.kind == "slurm" and k.job == "4242" and k.step == "0" and k.name == "job 4242.0"
    assert k.pid == 28879 and k.process == "python3" and k.uid == 0
    assert k.memory_limit_bytes == 48 * MIB and k.limit_source == "kernel log"
    assert k.limit_path.endswith("slurm/uid_0/job_4242") and k.path.endswith("job_4242/step_0/task_0")
    assert k.shmem_rss_bytes == 46080 * 1024 and round(k.shmem_fraction, 2) == 0.77
    assert k.time == pytest.approx(BOOT + 1513.071119)
    assert k.key.startswith("slurm/4242/0@")


def test_a_kill_in_a_pod_has_the_live_groups_key_and_name(tmp_path):
    tree = {CTR: v2_group()}
    r, _ = oom_reader(tmp_path, oom(10, POD, CTR), tree=tree)
    logs = tmp_path / "var/log/containers"
    logs.mkdir(parents=True)
    (logs / f"trainer_ml_worker-{C}.log").write_text("")
    (k,), _ = r.read()
    assert k.kind == "pod" and k.key == owner_of(f"0::{CTR}\n").key
    assert k.name == "ml/trainer/worker" and k.pod == "trainer" and k.namespace == "ml"
    assert k.memory_limit_bytes == 4 * GIB and k.process == "python3"


def test_a_kill_in_a_users_cgroup_named_after_a_pod_is_that_users(tmp_path):
    fake = f"{USER}/kubepods-burstable-pod{U_}.slice/cri-containerd-{C}.scope"
    r, _ = oom_reader(tmp_path, oom(10, fake, fake))
    logs = tmp_path / "var/log/containers"
    logs.mkdir(parents=True)
    (logs / f"trainer_ml_worker-{C}.log").write_text("")
    (k,), _ = r.read()
    assert k.delegated_uid == 1500 and k.name.startswith("user 1500: pod 0a1b2c3d/")
    assert k.pod is None and k.key.startswith("user/1500/") and k.key != owner_of(f"0::{CTR}\n").key


def test_the_lookback(tmp_path):
    # Kills 10 s and 3000 s after boot; it is now 3600 s after boot.
    items = oom(10, "/a", "/a", pid=1) + oom(20, "/b", "/b", pid=2)
    items = [x.replace(b",1000000,", b",10000000,") for x in items[:5]] + \
            [x.replace(b",1000000,", b",3000000000,") for x in items[5:]]
    r, _ = oom_reader(tmp_path, items, lookback_s=1800.0)
    kills, _ = r.read()
    assert [k.pid for k in kills] == [2]
    r.lookback_s = 86400.0
    kills, _ = r.read()
    assert [k.pid for k in kills] == [1, 2]


def test_a_lookback_of_zero_leaves_the_log_unread(tmp_path):
    r, fake = oom_reader(tmp_path, oom(10, "/a", "/a"), lookback_s=0)
    assert r.read() == ((), ()) and fake.opened == 0


def test_each_read_takes_only_new_records(tmp_path):
    r, fake = oom_reader(tmp_path, oom(10, "/a", "/a", pid=1))
    (a,), _ = r.read()
    fake.items = oom(20, "/b", "/b", pid=2)
    kills, _ = r.read()
    assert [k.pid for k in kills] == [1, 2] and kills[0] is a  # named once, kept
    assert r.kmsg.records_read == 10


def test_without_a_logged_limit_a_cgroup_still_there_gives_it(tmp_path):
    items = [x for x in oom(10, "/job", "/job/step") if b"memory: usage" not in x]
    r, _ = oom_reader(tmp_path, items, tree={"/job": v2_group(max_=2 * GIB), "/job/step": v2_group()})
    (k,), _ = r.read()
    assert k.memory_limit_bytes == 2 * GIB and k.limit_source == "cgroup"
    items = [x for x in oom(10, "/gone", "/gone") if b"memory: usage" not in x]
    r, _ = oom_reader(tmp_path / "b", items, tree={"/": v2_group(max_=GIB)})
    (k,), _ = r.read()
    assert k.memory_limit_bytes is None and k.limit_source is None  # never an ancestor's for a gone cgroup


def test_a_kill_the_log_names_no_cgroup_for(tmp_path):
    killed = ("Memory cgroup out of memory: Killed process 7 (python3) total-vm:1kB, anon-rss:1kB, file-rss:1kB,"
              " shmem-rss:8kB, UID:1000 pgtables:1kB oom_score_adj:0")
    r, _ = oom_reader(tmp_path, [record(1, killed, 3)])
    (k,), _ = r.read()
    assert k.kind == "unknown" and k.key is None and k.name == "cgroup not logged" and k.uid == 1000


def test_a_hostile_task_name_is_printable_and_bounded(tmp_path):
    r, _ = oom_reader(tmp_path, oom(10, "/a", "/a", comm="\\x1b]0;pwn\\x07"))
    (k,), _ = r.read()
    assert "\x1b" not in k.process and "\x07" not in k.process and len(k.process) <= 64


def test_no_kernel_log_is_a_notice_in_the_snapshot(tmp_path):
    root = fake_root(tmp_path, "v2", {})
    (tmp_path / "procfs").mkdir()
    with LiveCollector(use_nvml=False, host_root=root, proc_root=str(tmp_path / "procfs")) as col:
        snap = col.snapshot()
    assert snap.oom_kills == () and any("kernel log" in n and "missing" in n for n in snap.notices)
    with LiveCollector(use_nvml=False, host_root=root, proc_root=str(tmp_path / "procfs"), oom_lookback_s=0) as col:
        assert not any("kernel log" in n for n in col.snapshot().notices)


# --- a real kill on this box's cgroup v1 ----------------------------------------------------------

SHARED_THEN_GROW = """
import mmap
s = mmap.mmap(-1, {shared}, flags=mmap.MAP_SHARED)
for i in range(0, {shared}, mmap.PAGESIZE):
    s[i] = 1
a = mmap.mmap(-1, {grow})
for i in range(0, {grow}, mmap.PAGESIZE):
    a[i] = 1
"""


def test_a_job_killed_by_its_shared_memory_is_reported_after_its_cgroup_is_gone():
    if not os.access("/dev/kmsg", os.R_OK):
        pytest.skip("reading the kernel's log needs root")
    with memory_cgroup(48 * MIB) as base:
        if base.version != 1:
            pytest.skip("the Slurm v1 layout is made on a v1 memory hierarchy")
        job = base.child("slurm").child("uid_0").child("job_77")
        job.set_limit(48 * MIB)
        task = job.child("step_0").child("task_0")
        with Child(SHARED_THEN_GROW.format(shared=32 * MIB, grow=64 * MIB)) as child:
            task.add(child.pid)
            child.send()
            assert child.wait() == -9
            pid = child.pid
    # The cgroups are gone: only the kernel's log tells.
    with LiveCollector(use_nvml=False, pids=[os.getpid()], kernel_read_every_s=0) as col:
        snap = col.snapshot()
    (k,) = [k for k in snap.oom_kills if k.pid == pid]
    assert k.kind == "slurm" and k.job == "77" and k.step == "0" and k.name == "job 77.0"
    assert k.memory_limit_bytes == 48 * MIB and k.limit_source == "kernel log"
    assert k.shmem_rss_bytes >= 32 * MIB and k.process.startswith("python")
    (f,) = [f for f in advise([snap]) if f.rule == "oom-killed" and f.values.get("pid") == pid]
    assert f.severity == "critical" and f.subject == "Slurm job 77 step 0"
