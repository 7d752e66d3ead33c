"""The group rules' OOM findings: ``oom-killed`` from the kernel's log (critical when the killed
process's resident memory was mostly shared, where pinned memory is; one finding per group, naming it
first) and ``cgroup-oom-kills`` for a live group's count, a rise since start or a lifetime count at
first sight."""
from __future__ import annotations

import dataclasses

from pinmon.advise import advise
from pinmon.advise.thresholds import Thresholds
from pinmon.model import Snapshot
from tests import factories as make

GIB = 1 << 30


def oom_findings(snap: Snapshot, t: Thresholds = Thresholds()):
    return [f for f in advise([snap], t) if f.rule == "oom-killed"]


def test_a_job_killed_with_mostly_shared_memory_is_critical_and_named_first():
    snap = make.snapshot(oom_kills=(make.oom_kill(),))
    (f,) = oom_findings(snap)
    assert f.severity == "critical" and f.subject == "Slurm job 4711 step 0"
    assert f.message.startswith("python3 (pid 5151) was OOM-killed 100 s before this snapshot")
    assert "64.0 GiB memory limit" in f.message and "48.0 GiB of its 60.0 GiB" in f.message and "80%" in f.message
    assert f.values["shmem_fraction"] == 0.8 and f.values["cgroup"] == make.JOB_KEY
    assert f.values["job"] == "4711" and f.values["memory_limit_bytes"] == 64 * GIB
    assert "pinned" in f.advice and "--mem" in f.advice


def test_little_shared_memory_is_a_warning_and_the_threshold_is_configurable():
    kill = make.oom_kill(anon_rss_bytes=50 * GIB, shmem_rss_bytes=8 * GIB)
    (f,) = oom_findings(make.snapshot(oom_kills=(kill,)))
    assert f.severity == "warning" and "not the main consumer" in f.advice
    (f,) = oom_findings(make.snapshot(oom_kills=(kill,)), Thresholds(oom_shmem_critical_fraction=0.1))
    assert f.severity == "critical"


def test_unknown_figures_still_tell_the_kill():
    kill = make.oom_kill(memory_limit_bytes=None, anon_rss_bytes=None, file_rss_bytes=None, shmem_rss_bytes=None,
                         limit_source=None)
    (f,) = oom_findings(make.snapshot(oom_kills=(kill,)))
    assert f.severity == "warning" and "at its group's memory limit" in f.message and "shared" not in f.message


def test_one_finding_per_group_with_its_count_and_latest_kill():
    kills = (make.oom_kill(time=800.0, pid=1), make.oom_kill(time=900.0, pid=2, shmem_rss_bytes=GIB),
             make.oom_kill(time=950.0, pid=3, key="pod/x@/p", kind="pod", name="ml/trainer/worker"))
    found = {f.subject: f for f in oom_findings(make.snapshot(oom_kills=kills))}
    job = found["Slurm job 4711 step 0"]
    assert job.values["oom_kills"] == 2 and job.values["pid"] == 2 and "2 OOM kills in this group" in job.message
    assert job.severity == "critical"  # the earlier kill's share was 80%
    assert found["pod ml/trainer/worker"].values["pid"] == 3


def test_a_kill_in_a_users_delegated_cgroup_says_whose_word_the_name_is():
    kill = make.oom_kill(key="user/1500/podman/x@/u", kind="podman", name="user 1500: podman a42d519714d6",
                         delegated_uid=1500, job=None, step=None)
    (f,) = oom_findings(make.snapshot(oom_kills=(kill,)))
    assert f.subject == "Podman container user 1500: podman a42d519714d6"
    assert "user 1500" in f.message and f.values["delegated_uid"] == 1500


def test_no_kill_no_finding():
    assert oom_findings(make.snapshot()) == []


# --- cgroup-oom-kills ----------------------------------------------------------------------------

def groups_with(oom_kills: int, at_start: int) -> Snapshot:
    snap = make.box_groups_snapshot()
    pod = make.moved(snap.cgroups[0], oom_kills=oom_kills, oom_kills_at_start=at_start)
    return dataclasses.replace(snap, cgroups=(pod,) + snap.cgroups[1:])


def count_findings(history):
    return [f for f in advise(history) if f.rule == "cgroup-oom-kills"]


def test_a_lifetime_count_at_first_sight_is_a_warning():
    (f,) = count_findings([groups_with(3, 3)])
    assert f.severity == "warning" and "3 OOM kills" in f.message and "before pinmon first saw it" in f.message
    assert f.values["oom_kills"] == 0 and f.values["oom_kills_before"] == 3


def test_kills_since_start_are_critical_and_say_the_earlier_ones():
    (f,) = count_findings([groups_with(3, 3), groups_with(4, 3)])
    assert f.severity == "critical" and "1 process OOM-killed" in f.message and "(3 more before)" in f.message


def test_no_kill_ever_no_finding():
    assert count_findings([groups_with(0, 0)]) == []
