"""Owners from /proc/PID/cgroup files in the runtimes' real formats (tests/fixtures/cgroups/proc_cgroup),
and the forgeries an owner must not be fooled by."""
from __future__ import annotations

import os

import pytest

from pinmon.collect.cgroups.ownership import (
    DISPLAY_MAX_CHARS,
    KIND_CGROUP,
    KIND_DOCKER,
    KIND_POD,
    KIND_PODMAN,
    KIND_SLURM,
    KIND_SYSTEMD,
    KIND_UNKNOWN,
    CgroupPaths,
    owner_of,
    parse_proc_cgroup,
)

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "fixtures", "cgroups", "proc_cgroup")
C = "a42d519714d616e9411dbceec4b52808bd6b1ee53e6f6497a281d655357d8b71"
P = "94a1b9dffb88f34d73bb91ba12beb9644f68b29e507683f542e6919982664063"
UID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
U_ = UID.replace("-", "_")
STATIC = "a81259cef8e959c624df1d456e5d3297"


def fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return f.read()


# name -> (expected fields, expected group CgroupPaths)
EXPECTED = {
    "k8s_systemd_containerd_v2": (
        dict(kind=KIND_POD, pod_uid=UID, qos="burstable", container_id=C, runtime="containerd",
             display=f"pod 0a1b2c3d/{C[:12]}"),
        CgroupPaths(v2=f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{U_}.slice/"
                       f"cri-containerd-{C}.scope")),
    "k8s_systemd_crio_v2": (
        dict(kind=KIND_POD, pod_uid=UID, qos="besteffort", container_id=C, runtime="cri-o", helper=None),
        CgroupPaths(v2=f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{U_}.slice/"
                       f"crio-{C}.scope")),
    "k8s_systemd_crio_conmon_v2": (
        dict(kind=KIND_POD, pod_uid=UID, container_id=C, runtime="cri-o", helper="conmon",
             display=f"pod 0a1b2c3d/{C[:12]} (conmon)"), None),
    "k8s_systemd_docker_v1": (
        dict(kind=KIND_POD, pod_uid=UID, qos="guaranteed", container_id=C, runtime="docker"),
        CgroupPaths(v2="/", v1_memory=f"/kubepods.slice/kubepods-pod{U_}.slice/docker-{C}.scope")),
    "k8s_systemd_kind_v2": (dict(kind=KIND_POD, pod_uid=UID, qos="besteffort", container_id=C), None),
    "k8s_systemd_static_pod_v2": (dict(kind=KIND_POD, pod_uid=STATIC, container_id=C), None),
    "k8s_cgroupfs_containerd_v1": (
        dict(kind=KIND_POD, pod_uid=UID, qos="burstable", container_id=C, runtime=None),
        CgroupPaths(v2="/", v1_memory=f"/kubepods/burstable/pod{UID}/{C}")),
    "k8s_cgroupfs_guaranteed_v1": (dict(kind=KIND_POD, pod_uid=UID, qos="guaranteed", container_id=C), None),
    "k8s_cgroupfs_crio_v2": (
        dict(kind=KIND_POD, pod_uid=UID, qos="besteffort", container_id=C, runtime="cri-o"),
        CgroupPaths(v2=f"/kubepods/besteffort/pod{UID}/crio-{C}")),
    "k8s_outside_cgroupns_v2": (
        dict(kind=KIND_POD, pod_uid=UID, container_id=C),
        CgroupPaths(v2=f"/../../kubepods-burstable.slice/kubepods-burstable-pod{U_}.slice/"
                       f"cri-containerd-{C}.scope")),
    "docker_cgroupfs_v1": (dict(kind=KIND_DOCKER, container_id=C, runtime="docker",
                                display=f"docker {C[:12]}"),
                           CgroupPaths(v2="/", v1_memory=f"/docker/{C}")),
    "docker_systemd_v2": (dict(kind=KIND_DOCKER, container_id=C),
                          CgroupPaths(v2=f"/system.slice/docker-{C}.scope")),
    "docker_systemd_hybrid": (dict(kind=KIND_DOCKER, container_id=C),
                              CgroupPaths(v2=f"/system.slice/docker-{C}.scope",
                                          v1_memory=f"/system.slice/docker-{C}.scope")),
    "podman_rootful_v2": (dict(kind=KIND_PODMAN, container_id=C, runtime="podman", user_uid=None),
                          CgroupPaths(v2=f"/machine.slice/libpod-{C}.scope")),
    "podman_rootless_v2": (dict(kind=KIND_PODMAN, container_id=C, user_uid=1000), None),
    "podman_pod_v2": (dict(kind=KIND_PODMAN, container_id=C, podman_pod_id=P), None),
    "podman_conmon_v2": (dict(kind=KIND_PODMAN, container_id=C, helper="conmon"), None),
    "podman_cgroupfs_v1": (dict(kind=KIND_PODMAN, container_id=C),
                           CgroupPaths(v2="/", v1_memory=f"/libpod_parent/libpod-{C}")),
    "slurm_v1": (dict(kind=KIND_SLURM, slurm_job=4242, slurm_step="0", user_uid=1000, display="job 4242.0"),
                 CgroupPaths(v2="/", v1_memory="/slurm/uid_1000/job_4242/step_0")),
    "slurm_v1_batch": (dict(kind=KIND_SLURM, slurm_job=4242, slurm_step="batch",
                            display="job 4242.batch"), None),
    "slurm_v1_multi_slurmd": (dict(kind=KIND_SLURM, slurm_job=4242, slurm_step="extern"), None),
    "slurm_v2": (dict(kind=KIND_SLURM, slurm_job=4242, slurm_step="0", user_uid=None),
                 CgroupPaths(v2="/system.slice/slurmstepd.scope/job_4242/step_0")),
    "slurm_v2_extern": (dict(kind=KIND_SLURM, slurm_step="extern"), None),
    "slurm_v2_interactive": (dict(kind=KIND_SLURM, slurm_step="interactive"), None),
    "slurm_v2_multi_slurmd": (dict(kind=KIND_SLURM, slurm_job=4242, slurm_step="batch"), None),
    "slurm_v2_stepd": (dict(kind=KIND_SLURM, slurm_job=4242, slurm_step="0"), None),
    "slurm_v2_daemon": (dict(kind=KIND_SYSTEMD, unit="slurmstepd.scope"), None),
    "systemd_service_v2": (dict(kind=KIND_SYSTEMD, unit="nginx.service", display="nginx.service"),
                           CgroupPaths(v2="/system.slice/nginx.service")),
    "systemd_session_v2": (dict(kind=KIND_SYSTEMD, unit="session-3.scope", user_uid=1000,
                                display="session-3.scope (uid 1000)"), None),
    "systemd_user_service_v2": (dict(kind=KIND_SYSTEMD, unit="jupyter.service", user_uid=1000), None),
    "systemd_init_v2": (dict(kind=KIND_SYSTEMD, unit="init.scope"), None),
    "systemd_service_hybrid": (dict(kind=KIND_SYSTEMD, unit="ssh.service"),
                               CgroupPaths(v2="/system.slice/ssh.service", v1_memory="/system.slice/ssh.service")),
    "plain_v1": (dict(kind=KIND_CGROUP, display="/process_api/203294a1e013a629aa0792e2c8120092"),
                 CgroupPaths(v2="/", v1_memory="/process_api/203294a1e013a629aa0792e2c8120092")),
    "plain_v2": (dict(kind=KIND_CGROUP, display="/batch/team-a/run7"), CgroupPaths(v2="/batch/team-a/run7")),
    "root_v2": (dict(kind=KIND_CGROUP, display="/"), CgroupPaths(v2="/")),
}


def test_every_fixture_has_an_expectation():
    assert sorted(os.listdir(FIXTURES)) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_owner_of_real_formats(name):
    owner = owner_of(fixture(name))
    fields, group = EXPECTED[name]
    for key, value in fields.items():
        assert getattr(owner, key) == value, key
    if group is not None:
        assert owner.cgroup == group
    assert len(owner.display) <= DISPLAY_MAX_CHARS


def test_processes_of_one_container_share_a_key_and_a_group():
    a = owner_of(f"0::/machine.slice/libpod-{C}.scope/container\n")
    b = owner_of(f"0::/machine.slice/libpod-{C}.scope\n")
    c = owner_of(f"0::/machine.slice/libpod-{C[::-1]}.scope\n")
    assert a.key == b.key and a.cgroup == b.cgroup
    assert c.key != a.key


def test_slurm_tasks_of_one_step_share_the_step_group():
    a = owner_of("0::/system.slice/slurmstepd.scope/job_1/step_0/user/task_0\n")
    b = owner_of("0::/system.slice/slurmstepd.scope/job_1/step_0/user/task_1\n")
    assert a == b and a.key == "slurm/1/0@/system.slice/slurmstepd.scope/job_1/step_0"
    assert a.process_cgroup.v2.endswith("task_0") and b.process_cgroup.v2.endswith("task_1")


def test_memory_line_wins_on_a_hybrid_host():
    # Slurm's v1 memory cgroup names the job, while systemd's hierarchy shows slurmd's unit.
    owner = owner_of(fixture("slurm_v1"))
    assert owner.kind == KIND_SLURM


@pytest.mark.parametrize("path", [
    f"/system.slice/docker-{C[:-1]}.scope",                 # 63 digits
    f"/system.slice/docker-{C.upper()}.scope",              # not lower-case hex
    f"/system.slice/docker-{C}x.scope",
    f"/docker/{C}/../../etc",
    f"/kubepods.slice/kubepods-pod{U_}z.slice/cri-containerd-{C}.scope",
    f"/kubepods/burstable/pod{UID}/crio-{C[:40]}",
    f"/kubepods/burstable/podnot-a-uid/{C}",
    "/slurm/uid_1000/job_12a/step_0",
    "/slurm/uid_x/job_12/step_0",
    "/system.slice/slurmstepd.scope/job_12/step_evil/user/task_0",
    "/system.slice/slurmstepd.scope/job_12345678901/step_0",  # 11 digits
    "/system.slice/ev\x1b[31mil.service",
    f"/machine.slice/libpod-{C[:12]}.scope",
])
def test_an_id_that_fails_its_check_gives_the_plain_path(path):
    owner = owner_of(f"0::{path}\n")
    assert owner.kind == KIND_CGROUP
    assert owner.container_id is None and owner.pod_uid is None and owner.slurm_job is None
    assert "\x1b" not in owner.display and len(owner.display) <= DISPLAY_MAX_CHARS


def test_a_forged_id_on_the_memory_line_is_not_rescued_by_another_line():
    text = f"11:memory:/system.slice/docker-{C[:-1]}.scope\n0::/system.slice/docker-{C}.scope\n"
    assert owner_of(text).kind == KIND_CGROUP


def test_a_line_break_in_a_cgroup_name_cannot_forge_a_second_line():
    # A delegated cgroup's owner names a cgroup "x\n0::/kubepods/..."; the kernel writes it as is.
    forged = f"0::/user.slice/x\n0::/kubepods/burstable/pod{UID}/{C}\n"
    assert parse_proc_cgroup(forged) == (None, None, [])
    owner = owner_of(forged)
    assert owner.kind == KIND_UNKNOWN and owner.pod_uid is None


@pytest.mark.parametrize("text", ["", "\n", "garbage", "0::relative\n", "x::/\n", "1:memory\n",
                                  "0::/\n" * 100, None, b"0::/".decode() + "\x00"])
def test_malformed_files_give_unknown_or_plain_never_raise(text):
    owner = owner_of(text)
    assert owner.kind in (KIND_UNKNOWN, KIND_CGROUP)


def test_escape_sequences_and_long_paths_are_shown_printable_and_bounded():
    evil = "/batch/\x1b]0;pwned\x07" + "a" * 500 + "/leaf"
    owner = owner_of(f"0::{evil}\n")
    assert owner.kind == KIND_CGROUP
    assert "\x1b" not in owner.display and "\x07" not in owner.display
    assert len(owner.display) == DISPLAY_MAX_CHARS and owner.display.endswith("/leaf")
    assert owner.cgroup.v2 == evil  # the path itself is kept for reading, never shown raw
    assert "\x1b" not in owner.key


def test_non_utf8_bytes_decoded_with_replacement_are_shown_safely():
    text = b"0::/batch/\xff\xfe\x1b[2J\n".decode("utf-8", errors="replace")
    owner = owner_of(text)
    assert owner.kind == KIND_CGROUP and "\x1b" not in owner.display


def test_a_kernel_thread_has_the_root_cgroup():
    assert owner_of("0::/\n").display == "/"
