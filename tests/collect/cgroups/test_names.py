"""Pod, namespace and container names from the kubelet's log links and the runtimes' state files
(fixtures in their real formats), and the traps a pod's author can plant in them."""
from __future__ import annotations

import json
import os
import shutil
import threading

import pytest

from pinmon.collect.cgroups.names import (
    MAX_STATE_FILE_BYTES,
    NAME_MAX_CHARS,
    NO_NAMES,
    NameResolver,
    Names,
    names_from_docker_config,
    names_from_oci_spec,
    parse_container_log_name,
    parse_pod_log_dir,
)
from pinmon.collect.cgroups.ownership import owner_of

from .fakecg import FIXTURES

C = "a42d519714d616e9411dbceec4b52808bd6b1ee53e6f6497a281d655357d8b71"
S = "5f1e0d3c2b4a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
UID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
U_ = UID.replace("-", "_")
POD = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{U_}.slice"
CONTAINERD = ("run", "containerd", "io.containerd.runtime.v2.task", "k8s.io")
CRIO = ("run", "containers", "storage", "overlay-containers")
DOCKER = ("var", "lib", "docker", "containers")


def runtime_fixture(name: str) -> bytes:
    with open(os.path.join(FIXTURES, "runtime", name), "rb") as f:
        return f.read()


def put(root, parts, data: bytes):
    path = os.path.join(str(root), *parts)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def containerd_owner(cid=C):
    return owner_of(f"0::{POD}/cri-containerd-{cid}.scope\n")


def crio_owner(cid=C):
    return owner_of(f"0::{POD}/crio-{cid}.scope\n")


def kubelet_logs(root, pod="trainer-7d9f8b6c5-x2k4q", ns="ml-team", container="trainer", cid=C):
    """What the kubelet makes: /var/log/pods/<ns>_<pod>_<uid>/<container>/0.log and the link
    /var/log/containers/<pod>_<ns>_<container>-<id>.log to it."""
    target = put(root, ("var", "log", "pods", f"{ns}_{pod}_{UID}", container, "0.log"), b"log line\n")
    links = os.path.join(str(root), "var", "log", "containers")
    os.makedirs(links, exist_ok=True)
    os.symlink(target, os.path.join(links, f"{pod}_{ns}_{container}-{cid}.log"))


# --- parsers ----------------------------------------------------------------------------------------

def test_container_log_names():
    assert parse_container_log_name(f"trainer-7d9f8b6c5-x2k4q_ml-team_trainer-{C}.log") == (
        C, Names("trainer-7d9f8b6c5-x2k4q", "ml-team", "trainer", "kubelet logs"))
    # a dotted pod name (a DNS subdomain) and a container name with dashes
    assert parse_container_log_name(f"web.v2-0_default_side-car-{C}.log")[1].container_name == "side-car"
    for bad in (f"a_b_c-{C[:-1]}.log", f"a_b-{C}.log", f"a_b_c_d-{C}.log", f"a_b_c-{C}.txt",
                f"A_b_c-{C}.log", f"a_b_\x1b[31m-{C}.log", f"a_b_{'c' * 64}-{C}.log", "", ".log"):
        assert parse_container_log_name(bad) is None, bad


def test_pod_log_dirs():
    assert parse_pod_log_dir(f"ml-team_trainer-0_{UID}") == (UID, Names("trainer-0", "ml-team", None,
                                                                         "kubelet logs"))
    assert parse_pod_log_dir("ns_pod_not-a-uid") is None
    assert parse_pod_log_dir(f"ns_pod_{UID}_x") is None


def test_containerd_spec_names_the_pod_and_container():
    assert names_from_oci_spec(runtime_fixture("containerd_config.json"), UID) == Names(
        "trainer-7d9f8b6c5-x2k4q", "ml-team", "trainer", "containerd")


def test_containerd_sandbox_spec_names_the_pod():
    assert names_from_oci_spec(runtime_fixture("containerd_sandbox_config.json"), UID) == Names(
        "trainer-7d9f8b6c5-x2k4q", "ml-team", None, "containerd")


def test_crio_spec_names_the_pod_and_container():
    assert names_from_oci_spec(runtime_fixture("crio_config.json"), UID) == Names(
        "inference-0", "serving", "server", "cri-o")


def test_a_spec_of_another_pod_is_not_used():
    other = "ffffffff-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    assert names_from_oci_spec(runtime_fixture("containerd_config.json"), other) is None
    assert names_from_oci_spec(runtime_fixture("crio_config.json"), other) is None
    assert names_from_docker_config(runtime_fixture("cri_dockerd_config.v2.json"), other) is None


def test_docker_names():
    assert names_from_docker_config(runtime_fixture("docker_config.v2.json"), None) == Names(
        None, None, "gpu-bench", "docker")
    assert names_from_docker_config(runtime_fixture("cri_dockerd_config.v2.json"), UID) == Names(
        "trainer-7d9f8b6c5-x2k4q", "ml-team", "trainer", "docker")


@pytest.mark.parametrize("data", [
    None, b"", b"not json", b"[1, 2]", b'"str"', b"\xff\xfe\x00garbage",
    b'{"annotations": [1]}', b'{"annotations": {"io.kubernetes.cri.container-name": 5}}',
    b"[" * 100_000 + b"]" * 100_000,                       # nested past the parser's limit
    b'{"annotations": ' * 5000 + b"{}" + b"}" * 5000,
])
def test_junk_specs_give_no_names_and_never_raise(data):
    assert names_from_oci_spec(data, UID) is None
    assert names_from_docker_config(data, None) is None


def test_escape_sequences_huge_strings_and_non_utf8_in_names_are_shown_safely():
    ann = {"io.kubernetes.cri.sandbox-name": "\x1b]0;owned\x07pod" + "p" * 10_000,
           "io.kubernetes.cri.sandbox-namespace": "ns\u202e\r\nFAKE",
           "io.kubernetes.cri.container-name": "c\x1b[2J"}
    got = names_from_oci_spec(json.dumps({"annotations": ann}).encode(), UID)
    for text in (got.pod_name, got.namespace, got.container_name):
        assert len(text) <= NAME_MAX_CHARS
        assert not any(ch in text for ch in "\x1b\x07\r\n\u202e")
    assert got.pod_name.endswith("…")
    # invalid UTF-8 in the file: JSON refuses it, no names (and no exception)
    raw = b'{"annotations": {"io.kubernetes.cri.container-name": "\xff\xfe"}}'
    assert names_from_oci_spec(raw, UID) is None
    # a Docker name outside Docker's alphabet
    assert names_from_docker_config(b'{"Name": "/evil\\u001b[31m"}', None) is None


# --- the resolver on a fake node ---------------------------------------------------------------------

class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_kubelet_log_links_come_first_and_no_link_is_followed(tmp_path):
    kubelet_logs(tmp_path)
    put(tmp_path, CONTAINERD + (C, "config.json"), runtime_fixture("containerd_config.json"))
    r = NameResolver(str(tmp_path))
    assert r.names(containerd_owner()) == Names("trainer-7d9f8b6c5-x2k4q", "ml-team", "trainer",
                                                "kubelet logs")
    assert r.state_reads == 0


def test_the_listing_is_read_again_on_a_miss_at_most_every_recheck(tmp_path):
    clock = Clock()
    r = NameResolver(str(tmp_path), clock=clock, listing_recheck_s=10, negative_recheck_s=10)
    assert r.names(containerd_owner()) == NO_NAMES
    kubelet_logs(tmp_path)
    assert r.names(containerd_owner()) == NO_NAMES  # within the recheck time: not listed again
    assert r.containers.listings == 1
    clock.t += 10
    assert r.names(containerd_owner()).container_name == "trainer"
    assert r.containers.listings == 2
    for _ in range(5):
        r.names(containerd_owner())
    assert r.containers.listings == 2  # hits cost no listing


def test_containerd_state_file_when_the_logs_do_not_name_it(tmp_path):
    put(tmp_path, CONTAINERD + (C, "config.json"), runtime_fixture("containerd_config.json"))
    r = NameResolver(str(tmp_path))
    want = Names("trainer-7d9f8b6c5-x2k4q", "ml-team", "trainer", "containerd")
    assert r.names(containerd_owner()) == want
    assert r.names(containerd_owner()) == want
    assert r.state_reads == 1  # once per container id


def test_crio_state_file(tmp_path):
    put(tmp_path, CRIO + (C, "userdata", "config.json"), runtime_fixture("crio_config.json"))
    assert NameResolver(str(tmp_path)).names(crio_owner()).container_name == "server"


def test_cgroupfs_driver_tries_each_runtime(tmp_path):
    put(tmp_path, CRIO + (C, "userdata", "config.json"), runtime_fixture("crio_config.json"))
    owner = owner_of(f"0::/kubepods/besteffort/pod{UID}/{C}\n")
    assert owner.runtime is None
    assert NameResolver(str(tmp_path)).names(owner).pod_name == "inference-0"


def test_docker_container_name(tmp_path):
    put(tmp_path, DOCKER + (C, "config.v2.json"), runtime_fixture("docker_config.v2.json"))
    owner = owner_of(f"0::/system.slice/docker-{C}.scope\n")
    assert NameResolver(str(tmp_path)).names(owner) == Names(None, None, "gpu-bench", "docker")


def test_pod_level_and_conmon_processes_are_named_from_the_pod_log_dir(tmp_path):
    kubelet_logs(tmp_path)
    conmon = owner_of(f"0::{POD}/crio-conmon-{C}.scope\n")
    got = NameResolver(str(tmp_path)).names(conmon)
    assert got == Names("trainer-7d9f8b6c5-x2k4q", "ml-team", None, "kubelet logs")


def test_podman_slurm_systemd_and_plain_show_ids_only(tmp_path):
    r = NameResolver(str(tmp_path))
    for text in (f"0::/machine.slice/libpod-{C}.scope\n", "0::/system.slice/slurmstepd.scope/job_1/step_0\n",
                 "0::/system.slice/nginx.service\n", "0::/x\n"):
        assert r.names(owner_of(text)) == NO_NAMES


def test_an_unnamed_id_is_asked_again_only_after_the_negative_recheck(tmp_path):
    clock = Clock()
    r = NameResolver(str(tmp_path), clock=clock, negative_recheck_s=30)
    r.names(containerd_owner())
    r.names(containerd_owner())
    assert r.state_reads == 1
    clock.t += 30
    r.names(containerd_owner())
    assert r.state_reads == 2


# --- traps in the runtime's state dir ---------------------------------------------------------------

def _host_secret(tmp_path) -> str:
    """A host file that looks like a spec naming another pod: following a link would show it."""
    doc = {"annotations": {"io.kubernetes.cri.sandbox-name": "HOST-SECRET",
                           "io.kubernetes.cri.container-name": "HOST-SECRET"}}
    return put(tmp_path, ("etc", "shadow.json"), json.dumps(doc).encode())


def test_trap_config_json_linked_to_a_host_file(tmp_path):
    secret = _host_secret(tmp_path)
    d = os.path.join(str(tmp_path), *CONTAINERD, C)
    os.makedirs(d)
    os.symlink(secret, os.path.join(d, "config.json"))
    assert NameResolver(str(tmp_path)).names(containerd_owner()) == NO_NAMES


def test_trap_linked_directory_component(tmp_path):
    secret = _host_secret(tmp_path)
    os.makedirs(os.path.join(str(tmp_path), *CONTAINERD))
    os.symlink(os.path.dirname(secret), os.path.join(str(tmp_path), *CONTAINERD, C))
    os.rename(secret, os.path.join(os.path.dirname(secret), "config.json"))
    assert NameResolver(str(tmp_path)).names(containerd_owner()) == NO_NAMES
    # CRI-O: the userdata directory is the link
    os.makedirs(os.path.join(str(tmp_path), *CRIO, C))
    os.symlink(os.path.dirname(secret), os.path.join(str(tmp_path), *CRIO, C, "userdata"))
    assert NameResolver(str(tmp_path)).names(crio_owner()) == NO_NAMES


def test_trap_fifo_as_config_json(tmp_path):
    d = os.path.join(str(tmp_path), *CONTAINERD, C)
    os.makedirs(d)
    os.mkfifo(os.path.join(d, "config.json"))
    out = []
    t = threading.Thread(target=lambda: out.append(NameResolver(str(tmp_path)).names(containerd_owner())),
                         daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "the resolver blocked on a FIFO"
    assert out == [NO_NAMES]


def test_trap_huge_config_json(tmp_path):
    doc = json.loads(runtime_fixture("containerd_config.json"))
    doc["process"]["env"] = ["X=" + "x" * MAX_STATE_FILE_BYTES]
    put(tmp_path, CONTAINERD + (C, "config.json"), json.dumps(doc).encode())
    assert NameResolver(str(tmp_path)).names(containerd_owner()) == NO_NAMES


def test_trap_deeply_nested_json(tmp_path):
    put(tmp_path, CONTAINERD + (C, "config.json"), b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
    assert NameResolver(str(tmp_path)).names(containerd_owner()) == NO_NAMES


def test_trap_log_link_names_with_escapes_are_skipped(tmp_path):
    links = os.path.join(str(tmp_path), "var", "log", "containers")
    os.makedirs(links)
    open(os.path.join(links, f"\x1b[2Jpod_ns_c-{C}.log"), "w").close()
    open(os.path.join(links, f"pod_ns_{'c' * 100}-{C}.log"), "w").close()  # a container name past 63
    assert NameResolver(str(tmp_path)).names(containerd_owner()) == NO_NAMES


def test_trap_the_logs_directory_itself_linked_elsewhere_is_listed_only_by_name(tmp_path):
    # /var/log/containers is the kubelet's; its entries are links by design and never opened.
    kubelet_logs(tmp_path)
    pods = os.path.join(str(tmp_path), "var", "log", "pods")
    shutil.rmtree(pods)  # every link now dangles: the names still say everything
    assert NameResolver(str(tmp_path)).names(containerd_owner()).pod_name == "trainer-7d9f8b6c5-x2k4q"
