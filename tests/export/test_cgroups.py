"""Per-group series: labels from the group (the Slurm job as ``slurm_job``, never ``job``), the top N
groups with the rest summed, untrusted names printable and cut, process series carrying their group's labels."""
import dataclasses

from tests import factories as make

from .helpers import render, samples

MIB = 1 << 20


def _series(text, name):
    return [(dict(labels), value) for (n, labels), value in samples(text).items() if n == name]


def test_groups_are_served_with_their_limit_oom_count_and_names():
    text = render([make.box_groups_snapshot(oom_kills=2)])
    pinned = dict((lab["cgroup"], v) for lab, v in _series(text, "pinmon_cgroup_pinned_bytes"))
    assert pinned["pod/0a1b2c3d-0000-4000-8000-00000000abcd/cdcdcdcdcdcd"] == 400 * make.GIB
    assert pinned["other"] == 0
    (pod,) = [lab for lab, _ in _series(text, "pinmon_cgroup_memory_limit_bytes") if lab["kind"] == "pod"]
    assert pod["pod"] == "trainer-7f9c" and pod["namespace"] == "ml" and pod["container"] == "worker"
    (job,) = [lab for lab, _ in _series(text, "pinmon_cgroup_memory_limit_bytes") if lab["kind"] == "slurm"]
    assert job["slurm_job"] == "4711" and "job" not in job
    assert dict((lab["kind"], v) for lab, v in _series(text, "pinmon_cgroup_oom_kills_total"))["pod"] == 2
    # The trainer's process series carries its pod's labels; carol's notebook, in no group, none.
    procs = {lab["pid"]: lab for lab, _ in _series(text, "pinmon_process_pinned_bytes")}
    assert procs["4242"]["pod"] == "trainer-7f9c" and procs["6060"]["slurm_job"] == "4711"
    assert procs["7070"].get("pod", "") == ""


def test_group_series_are_bounded_and_their_names_printable():
    groups = tuple(make.cgroup(key=f"docker/{i:064x}", name="x\x1b]0;PWNED\x07" + "y" * 200, pod="p\x1b[2J",
                               pinned_bytes=(i + 1) << 20) for i in range(50))
    snap = dataclasses.replace(make.box_snapshot(), cgroups=groups)
    text = render([snap], top=5)
    pinned = _series(text, "pinmon_cgroup_pinned_bytes")
    assert len(pinned) == 6  # 5 groups and "other"
    other = next(v for lab, v in pinned if lab["cgroup"] == "other")
    assert other == sum(range(1, 46)) << 20
    assert "\x1b" not in text and "\x07" not in text
    assert all(len(lab.get("pod", "")) <= 64 for lab, _ in pinned)


def test_a_groups_held_bytes_count_all_it_holds_and_its_pinned_bytes_are_its_part():
    """cgroup_held_bytes is pinned + write-combined + VmPin (what pinned-cgroup-share compares with the
    limit); cgroup_pinned_bytes is the pinned part, as for a process."""
    g = make.cgroup(limit_bytes=4 * make.GIB, pinned_bytes=2 * make.GIB, write_combined_bytes=make.MIB,
                    vm_pinned_bytes=512 * make.MIB, processes=1)
    uring = make.cgroup(key="docker/" + "cd" * 32, vm_pinned_bytes=640 * make.MIB, processes=1)
    text = render([dataclasses.replace(make.box_snapshot(), cgroups=(g, uring))], top=1)
    held = {lab["cgroup"]: v for lab, v in _series(text, "pinmon_cgroup_held_bytes")}
    pinned = {lab["cgroup"]: v for lab, v in _series(text, "pinmon_cgroup_pinned_bytes")}
    gid = next(k for k in held if k != "other")
    assert held[gid] == 2 * make.GIB + make.MIB + 512 * make.MIB and pinned[gid] == 2 * make.GIB
    assert held["other"] == 640 * make.MIB and pinned["other"] == 0  # the io_uring group, summed


def test_a_delegated_group_named_after_a_real_pod_gets_a_label_of_its_own():
    snap = make.box_groups_snapshot()
    real = next(g for g in snap.cgroups if g.kind == "pod")
    fake = make.moved(real, key="user/1500/" + real.key + "@elsewhere", name="user 1500: pod 0a1b2c3d/cdcd",
                      pod=None, namespace=None, container=None, delegated_uid=1500, pinned_bytes=MIB)
    twin = make.moved(real, key=real.key + "@another-path", pinned_bytes=2 * MIB)
    text = render([dataclasses.replace(snap, cgroups=snap.cgroups + (fake, twin))])
    ids = [lab["cgroup"] for lab, _ in _series(text, "pinmon_cgroup_pinned_bytes")]
    assert len(ids) == len(set(ids)) == 5  # the pod, the job, the user's fake, the twin, "other"
    assert "user/1500/pod/0a1b2c3d/cdcdcdcdcdcd" in ids
    assert sum(1 for i in ids if i.startswith("pod/0a1b2c3d-0000-4000-8000-00000000abcd/cdcdcdcdcdcd")) == 2
    assert all(len(i) <= 64 for i in ids)


def test_oom_kills_from_the_kernels_log_are_served_per_group_bounded():
    kills = [make.oom_kill(time=100.0 + i, pid=i) for i in range(3)]  # bob's job: 3 kills
    kills += [make.oom_kill(time=200.0 + i, pid=100 + i, key=f"docker/{i:064x}@/d{i}", kind="docker", name=f"d{i}",
                            container_id=f"{i:064x}", job=None, step=None) for i in range(6)]
    kills.append(make.oom_kill(time=300.0, pid=999, key=None, kind="unknown", name="cgroup not logged", job=None,
                               step=None, process="x\x1b]0;PWNED\x07"))
    snap = dataclasses.replace(make.box_snapshot(), oom_kills=tuple(kills))
    text = render([snap], top=3)
    recent = {lab["cgroup"]: v for lab, v in _series(text, "pinmon_oom_kills_recent")}
    assert recent["slurm/4711/0"] == 3 and recent["other"] == 5 and len(recent) == 4
    (job,) = [lab for lab, _ in _series(text, "pinmon_oom_kills_recent") if lab["cgroup"] == "slurm/4711/0"]
    assert job["slurm_job"] == "4711" and job["kind"] == "slurm"
    last = {lab["cgroup"]: v for lab, v in _series(text, "pinmon_oom_kill_last_time_seconds")}
    assert last["slurm/4711/0"] == 102.0
    shmem = {lab["cgroup"]: v for lab, v in _series(text, "pinmon_oom_kill_shmem_bytes")}
    assert shmem["slurm/4711/0"] == 48 << 30
    assert "\x1b" not in text and "PWNED" not in text  # a task name is never a label


def test_no_oom_kill_no_family():
    text = render([make.box_snapshot()])
    assert "pinmon_oom_kills_recent" not in text
