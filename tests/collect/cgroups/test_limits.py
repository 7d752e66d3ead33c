"""Limits, usage and OOM kills from fake cgroup trees (v2, v1, hybrid), the tightest limit on the
path, unreadable and junk files, and how often each file is read."""
from __future__ import annotations

import os

import pytest

from pinmon.collect.cgroups.limits import CgroupMemoryReader, parse_counter, parse_keyed, parse_limit
from pinmon.collect.cgroups.ownership import CgroupPaths, owner_of

from .fakecg import fake_root, v1_group, v2_group

MIB = 1 << 20
UID_ = "0a1b2c3d_4e5f_4a6b_8c7d_9e0f1a2b3c4d"
C = "a42d519714d616e9411dbceec4b52808bd6b1ee53e6f6497a281d655357d8b71"
POD = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice"
CTR = f"{POD}/cri-containerd-{C}.scope"


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_parsers():
    assert parse_limit("max\n") == (None, True)
    assert parse_limit("9223372036854771712\n") == (None, True)
    assert parse_limit("4294967296\n") == (4294967296, True)
    assert parse_limit("junk") == (None, False) and parse_limit(None) == (None, False)
    assert parse_limit("-1") == (None, False) and parse_limit("1" * 30) == (None, False)
    assert parse_counter("123\n") == 123 and parse_counter("") is None and parse_counter("١٢") is None
    assert parse_keyed("oom 2\noom_kill 3\n", "oom_kill") == 3
    assert parse_keyed("oom_kill_disable 0\nunder_oom 0\n", "oom_kill") is None


def test_v2_pod_limit_above_the_container_binds(tmp_path):
    root = fake_root(tmp_path, "v2", {
        "/kubepods.slice": v2_group(max_=64 << 30),
        "/kubepods.slice/kubepods-burstable.slice": v2_group(),
        POD: v2_group(max_=4 << 30),
        CTR: v2_group(max_="max", current=3 << 30, oom_kill=2),
    })
    owner = owner_of(f"0::{CTR}\n")
    got = CgroupMemoryReader(root).read([owner.cgroup])[owner.cgroup]
    assert got.version == 2 and got.path == CTR
    assert got.limit_bytes == 4 << 30 and got.limit_path == POD
    assert got.current_bytes == 3 << 30 and got.oom_kills == 2 and got.notes == ()


def test_v2_container_limit_tighter_than_its_pod(tmp_path):
    root = fake_root(tmp_path, "v2", {POD: v2_group(max_=4 << 30), CTR: v2_group(max_=512 * MIB)})
    got = CgroupMemoryReader(root).read_one(CgroupPaths(v2=CTR))
    assert got.limit_bytes == 512 * MIB and got.limit_path == CTR


def test_v2_no_limit_anywhere_is_none_without_a_note(tmp_path):
    root = fake_root(tmp_path, "v2", {"/system.slice/nginx.service": v2_group(current=5)})
    got = CgroupMemoryReader(root).read_one(CgroupPaths(v2="/system.slice/nginx.service"))
    assert got.limit_bytes is None and got.limit_path is None and got.current_bytes == 5
    assert got.notes == ()


def test_v1_unlimited_value_is_no_limit_and_the_job_limit_binds(tmp_path):
    job = "/slurm/uid_1000/job_7"
    root = fake_root(tmp_path, "v1_only", {
        "/": v1_group(),
        "/slurm": v1_group(),
        "/slurm/uid_1000": v1_group(),
        job: v1_group(limit=8 << 30),
        f"{job}/step_0": v1_group(usage=6 << 30, oom_kill=1),
    })
    owner = owner_of(f"4:memory:{job}/step_0/task_0\n0::/\n")
    assert owner.cgroup.v1_memory == f"{job}/step_0"
    got = CgroupMemoryReader(root).read([owner.cgroup])[owner.cgroup]
    assert got.version == 1 and got.limit_bytes == 8 << 30 and got.limit_path == job
    assert got.current_bytes == 6 << 30 and got.oom_kills == 1


def test_hybrid_host_reads_v1_memory_not_the_unified_path(tmp_path):
    root = fake_root(tmp_path, "hybrid", {f"/docker/{C}": v1_group(limit=MIB, usage=100)})
    owner = owner_of(f"11:memory:/docker/{C}\n1:name=systemd:/docker/{C}\n0::/\n")
    got = CgroupMemoryReader(root).read_one(owner.cgroup)
    assert got.version == 1 and got.limit_bytes == MIB and got.current_bytes == 100


def test_v1_kernel_without_oom_kill_line(tmp_path):
    files = v1_group(limit=MIB)
    files["memory.oom_control"] = "oom_kill_disable 0\nunder_oom 0\n"
    root = fake_root(tmp_path, "v1_only", {"/g": files})
    got = CgroupMemoryReader(root).read_one(CgroupPaths(v1_memory="/g"))
    assert got.oom_kills is None and got.limit_bytes == MIB
    assert got.notes == ("memory.oom_control: no oom_kill line",)


def test_missing_and_junk_files_leave_figures_none_with_reasons(tmp_path):
    files = v2_group(max_="lots")
    del files["memory.current"]
    root = fake_root(tmp_path, "v2", {"/g": files})
    got = CgroupMemoryReader(root).read_one(CgroupPaths(v2="/g"))
    assert got.limit_bytes is None and got.current_bytes is None
    assert "memory.max: not a limit" in got.notes and "memory.current: missing" in got.notes


def test_a_gone_cgroup(tmp_path):
    root = fake_root(tmp_path, "v2", {})
    got = CgroupMemoryReader(root).read_one(CgroupPaths(v2="/gone"))
    assert got.current_bytes is None and got.oom_kills is None and got.limit_bytes is None
    assert "memory.current: missing" in got.notes


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_permission_denied_is_a_note(tmp_path):
    root = fake_root(tmp_path, "v2", {"/g": v2_group(max_=MIB)})
    os.chmod(os.path.join(root, "sys/fs/cgroup/g/memory.max"), 0)
    got = CgroupMemoryReader(root).read_one(CgroupPaths(v2="/g"))
    assert got.limit_bytes is None and "memory.max: permission denied" in got.notes


def test_a_fifo_or_link_in_place_of_a_cgroup_file_is_refused(tmp_path):
    root = fake_root(tmp_path, "v2", {"/g": v2_group(max_=MIB)})
    d = os.path.join(root, "sys/fs/cgroup/g")
    os.unlink(os.path.join(d, "memory.current"))
    os.mkfifo(os.path.join(d, "memory.current"))
    os.unlink(os.path.join(d, "memory.events"))
    os.symlink("/proc/self/status", os.path.join(d, "memory.events"))
    got = CgroupMemoryReader(root).read_one(CgroupPaths(v2="/g"))
    assert got.current_bytes is None and got.oom_kills is None and got.limit_bytes == MIB
    assert "memory.current: not a regular file" in got.notes
    assert "memory.events: a symbolic link (refused)" in got.notes


def test_paths_outside_the_namespace_and_no_mount(tmp_path):
    root = fake_root(tmp_path, "v2", {})
    got = CgroupMemoryReader(root).read_one(CgroupPaths(v2="/../../kubepods.slice/x.scope"))
    assert got.limit_bytes is None and "outside this cgroup namespace" in got.notes[0]
    got = CgroupMemoryReader(str(tmp_path / "empty")).read_one(CgroupPaths(v2="/x"))
    assert got.version is None and "mountinfo" in got.notes[0]
    root = fake_root(tmp_path, "v1_only", {})
    got = CgroupMemoryReader(root).read_one(CgroupPaths(v2="/x"))  # v1 host, no v1 path
    assert got.version == 1 and got.path is None and got.notes


def test_each_group_read_once_per_snapshot_and_limits_kept_between(tmp_path):
    tree = {"/kubepods.slice": v2_group(max_=64 << 30)}
    groups = []
    for i in range(5):
        cg = f"/kubepods.slice/c{i}.scope"
        tree[cg] = v2_group(max_=(i + 1) * MIB, current=i)
        groups += [CgroupPaths(v2=cg)] * 10  # ten processes each
    root = fake_root(tmp_path, "v2", tree)
    clock = Clock()
    reader = CgroupMemoryReader(root, recheck_s=5.0, clock=clock)
    first = reader.read(groups)
    assert len(first) == 5
    # per group: its limit, its usage, its events; the shared ancestors once; the root's absent max
    assert reader.files_read == 5 * 3 + 1 + 1
    clock.t += 1.0
    n = reader.files_read
    again = reader.read(groups)
    assert reader.files_read - n == 5  # usage only
    assert again == first
    # a changed limit and a new OOM kill show after the recheck time
    with open(os.path.join(root, "sys/fs/cgroup/kubepods.slice/c0.scope/memory.max"), "w") as f:
        f.write("123\n")
    with open(os.path.join(root, "sys/fs/cgroup/kubepods.slice/c0.scope/memory.events"), "w") as f:
        f.write("oom_kill 4\n")
    g0 = CgroupPaths(v2="/kubepods.slice/c0.scope")
    assert reader.read([g0])[g0].limit_bytes == MIB
    clock.t += 5.0
    later = reader.read([g0])[g0]
    assert later.limit_bytes == 123 and later.oom_kills == 4


def test_caches_forget_cgroups_not_read_for_a_while(tmp_path):
    root = fake_root(tmp_path, "v2", {"/a": v2_group(max_=MIB), "/b": v2_group(max_=MIB)})
    clock = Clock()
    reader = CgroupMemoryReader(root, recheck_s=1.0, clock=clock)
    reader.read([CgroupPaths(v2="/a"), CgroupPaths(v2="/b")])
    clock.t += 10
    reader.read([CgroupPaths(v2="/a")])
    assert not any(d.endswith("/b") for d in reader.cached_directories)
    assert any(d.endswith("/a") for d in reader.cached_directories)


def test_files_stay_open_up_to_the_bound_and_close(tmp_path, monkeypatch):
    from pinmon.collect.cgroups import limits

    tree = {f"/g{i}": v2_group(max_=(i + 1) * MIB, current=i) for i in range(6)}
    root = fake_root(tmp_path, "v2", tree)
    monkeypatch.setattr(limits, "MAX_OPEN_FILES", 5)
    groups = [CgroupPaths(v2=f"/g{i}") for i in range(6)]
    reader = CgroupMemoryReader(root)
    first = reader.read(groups)
    assert reader.open_files == 5
    assert [first[g].current_bytes for g in groups] == list(range(6))  # past the bound: still read
    assert [first[g].limit_bytes for g in groups] == [(i + 1) * MIB for i in range(6)]
    with open(os.path.join(root, "sys/fs/cgroup/g0/memory.current"), "w") as f:
        f.write("77\n")  # the same file, rewritten: a kept file reads it from offset 0
    assert reader.read([groups[0]])[groups[0]].current_bytes == 77
    reader.close()
    assert reader.open_files == 0
    assert reader.read([groups[0]])[groups[0]].current_bytes == 77


def test_a_kept_file_that_fails_is_opened_again(tmp_path, monkeypatch):
    root = fake_root(tmp_path, "v2", {"/g": v2_group(current=5)})
    reader = CgroupMemoryReader(root)
    g = CgroupPaths(v2="/g")
    assert reader.read_one(g).current_bytes == 5
    real_pread = os.pread

    def gone(fd, n, off):  # what a removed cgroup's file answers
        raise OSError(19, "No such device")

    monkeypatch.setattr(os, "pread", gone)
    with open(os.path.join(root, "sys/fs/cgroup/g/memory.current"), "w") as f:
        f.write("6\n")
    assert reader.read_one(g).current_bytes == 6
    monkeypatch.setattr(os, "pread", real_pread)
    assert reader.read_one(g).current_bytes == 6


def test_a_reader_dropped_without_close_closes_its_files(tmp_path):
    import gc

    root = fake_root(tmp_path, "v2", {"/g": v2_group(max_=MIB, current=1)})
    before = len(os.listdir("/proc/self/fd"))
    reader = CgroupMemoryReader(root)
    reader.read([CgroupPaths(v2="/g")])
    assert reader.open_files == 3 and len(os.listdir("/proc/self/fd")) == before + 3
    del reader
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_limit_below_the_group_binds_through_its_processes_cgroups(tmp_path):
    step = "/system.slice/slurmstepd.scope/job_7/step_0"
    root = fake_root(tmp_path, "v2", {
        "/system.slice/slurmstepd.scope/job_7": v2_group(max_=8 << 30),
        step: v2_group(current=1 << 30),
        f"{step}/user/task_0": v2_group(max_=2 << 30),
        "/elsewhere": v2_group(max_=MIB),
    })
    group = CgroupPaths(v2=step)
    reader = CgroupMemoryReader(root)
    assert reader.read_one(group).limit_bytes == 8 << 30  # the group's own walk
    leaf = CgroupPaths(v2=f"{step}/user/task_0")
    got = reader.read([group], {group: [leaf, CgroupPaths(v2="/elsewhere")]})[group]
    # The task's limit binds; a "leaf" that is not below the group is not walked.
    assert got.limit_bytes == 2 << 30 and got.limit_path == f"{step}/user/task_0"
    assert got.current_bytes == 1 << 30 and got.path == step


def test_zero_is_a_limit_on_both_versions(tmp_path):
    root = fake_root(tmp_path / "v2", "v2", {"/z": v2_group(max_=0)})
    assert CgroupMemoryReader(root).read_one(CgroupPaths(v2="/z")).limit_bytes == 0
    root = fake_root(tmp_path / "v1", "v1_only", {"/z": v1_group(limit=0)})
    assert CgroupMemoryReader(root).read_one(CgroupPaths(v1_memory="/z")).limit_bytes == 0
