"""Rules on the kernel's count of pinned pages, mlock and NUMA placement, on hand-made snapshots."""
import pytest

from pinmon.advise import RULE_DOCS, Thresholds, advise
from pinmon.config import parse_config

from .helpers import GIB, MIB, make_gpu, make_probe, make_proc, make_snap


def rule(snap, rule_id, thresholds=Thresholds()):
    return [f for f in advise([snap], thresholds) if f.rule == rule_id]


def kernel_host(kernel, unattributed, wc=0, **more):
    fields = dict(kernel_pinned_bytes=kernel, unattributed_pinned_bytes=unattributed,
                  pinned_bytes_total=kernel + wc, pinned_bytes_source="kernel", write_combined_bytes_est=wc,
                  pinned_bytes_est=kernel - unattributed)
    fields.update(more)
    return fields


def test_new_rules_are_registered_and_documented():
    for rule_id in ("pinned-unattributed", "mlock-not-pinned", "pinned-numa-remote"):
        assert rule_id in RULE_DOCS


# --- pinned-ram-share on the best figure -----------------------------------------------------------

def test_ram_share_on_registered_memory_the_estimate_cannot_see():
    # 70 GiB registered: no maps show it, the kernel counts it.
    snap = make_snap(**kernel_host(70 * GIB, 70 * GIB), effective_mem_limit_bytes=128 * GIB)
    (f,) = rule(snap, "pinned-ram-share")
    assert f.severity == "critical"
    assert f.message == "pinned 70.0 GiB (kernel's count) = 55% of 128.0 GiB effective RAM"
    assert f.values["kernel_count"] == 1 and f.values["pinned_bytes"] == 70 * GIB


def test_ram_share_counts_write_combined_with_the_kernel_count():
    snap = make_snap(**kernel_host(30 * GIB, 0, wc=10 * GIB), effective_mem_limit_bytes=100 * GIB)
    (f,) = rule(snap, "pinned-ram-share")
    assert f.severity == "warning" and f.values["pinned_bytes"] == 40 * GIB
    assert "(kernel's count + write-combined est.)" in f.message


def test_ram_share_says_estimate_without_the_kernel_count():
    snap = make_snap(pinned_bytes_est=60 * GIB, pinned_bytes_total=61 * GIB, pinned_bytes_source="est.",
                     effective_mem_limit_bytes=100 * GIB)
    (f,) = rule(snap, "pinned-ram-share")
    assert f.message.startswith("pinned 61.0 GiB (est.) = 61%") and f.values["kernel_count"] == 0


def test_ram_share_in_a_limited_cgroup_reports_the_larger_share():
    # Host-wide 40 GiB of 512 GiB is 8%; this cgroup's own 12 GiB of its 16 GiB limit is 75%.
    snap = make_snap(**kernel_host(40 * GIB, 28 * GIB, pinned_bytes_est=12 * GIB), mem_total_bytes=512 * GIB,
                     effective_mem_limit_bytes=16 * GIB, cgroup_limit_bytes=16 * GIB)
    (f,) = rule(snap, "pinned-ram-share")
    assert f.severity == "critical" and f.values["kernel_count"] == 0
    assert "in this cgroup's processes (est.)" in f.message and "cgroup limit" in f.message
    # The other way round: the host is full of pins, the cgroup holds none.
    snap = make_snap(**kernel_host(300 * GIB, 300 * GIB), mem_total_bytes=512 * GIB,
                     effective_mem_limit_bytes=16 * GIB, cgroup_limit_bytes=16 * GIB)
    (f,) = rule(snap, "pinned-ram-share")
    assert f.severity == "critical" and f.values["kernel_count"] == 1
    assert f.message == "pinned 300.0 GiB host-wide (kernel's count) = 59% of 512.0 GiB RAM"


def test_low_available_memory_uses_the_best_figure():
    snap = make_snap(**kernel_host(8 * GIB, 8 * GIB), mem_available_bytes=4 * GIB,
                     effective_mem_limit_bytes=128 * GIB)
    (f,) = rule(snap, "low-available-memory")
    assert "8.0 GiB pinned (kernel's count)" in f.message


# --- pinned-unattributed -----------------------------------------------------------------------------

@pytest.mark.parametrize("kernel, unattributed, fires", [
    (10 * GIB, 2 * GIB, True),       # 2 GiB, 20%: at both thresholds
    (10 * GIB, 2 * GIB - 1, False),  # under 20%
    (4 * GIB, GIB - 1, False),       # under 1 GiB
    (4 * GIB, GIB, True),
    (0, 0, False),
])
def test_unattributed_thresholds(kernel, unattributed, fires):
    snap = make_snap(**kernel_host(kernel, unattributed))
    assert bool(rule(snap, "pinned-unattributed")) == fires


def test_unattributed_message_and_advice():
    snap = make_snap(**kernel_host(10 * GIB, 6 * GIB))
    (f,) = rule(snap, "pinned-unattributed")
    assert f.severity == "warning" and f.subject == "host"
    assert f.message.startswith("6.0 GiB (60%) of the 10.0 GiB the kernel counts as pinned")
    assert "explain 4.0 GiB" in f.message
    for source in ("cudaHostRegister", "RDMA", "VFIO", "io_uring", "pinmon trace", "cudaHostUnregister"):
        assert source in f.advice
    assert f.values == {"kernel_pinned_bytes": 10 * GIB, "unattributed_pinned_bytes": 6 * GIB,
                        "explained_pinned_bytes": 4 * GIB, "fraction": 0.6}


def test_unattributed_says_host_wide_in_a_limited_cgroup():
    snap = make_snap(**kernel_host(10 * GIB, 6 * GIB), mem_total_bytes=512 * GIB,
                     effective_mem_limit_bytes=64 * GIB, cgroup_limit_bytes=64 * GIB)
    (f,) = rule(snap, "pinned-unattributed")
    assert "host-wide" in f.message


def test_unattributed_silent_without_the_kernel_count():
    assert not rule(make_snap(pinned_bytes_est=50 * GIB), "pinned-unattributed")


def test_unattributed_thresholds_from_a_config_file():
    cfg = parse_config('[thresholds]\nunattributed_min_bytes = "64M"\nunattributed_min_fraction = 0.05\n')
    snap = make_snap(**kernel_host(10 * GIB, 700 * MIB))
    assert not rule(snap, "pinned-unattributed")
    assert rule(snap, "pinned-unattributed", cfg.thresholds)


# --- mlock-not-pinned ------------------------------------------------------------------------------

def test_mlock_not_pinned():
    procs = [make_proc(pid=1, vm_locked_bytes=GIB), make_proc(pid=2, vm_locked_bytes=GIB - 1),
             make_proc(pid=3, vm_locked_bytes=None)]
    (f,) = rule(make_snap(processes=procs), "mlock-not-pinned")
    assert f.subject == "pid 1 (python)" and f.severity == "warning"
    assert "mlock()" in f.message and "pageable speed" in f.message
    assert "cudaHostRegister" in f.advice and "pin_memory()" in f.advice
    assert f.values["vm_locked_bytes"] == GIB


def test_mlock_not_pinned_quotes_the_probe():
    snap = make_snap(processes=[make_proc(vm_locked_bytes=4 * GIB)], probe=make_probe())
    (f,) = rule(snap, "mlock-not-pinned")
    assert "pinned H2D ran 55.0 GB/s vs 6.3 GB/s pageable" in f.advice


# --- pinned-numa-remote ----------------------------------------------------------------------------

def numa_snap(by_node, gpu_node=0, nodes=(0, 1), gpus=(0,)):
    return make_snap(numa_nodes=nodes, gpus=[make_gpu(i, numa_node=gpu_node) for i in gpus],
                     processes=[make_proc(pinned_bytes=sum(by_node.values()), pinned_bytes_by_node=by_node,
                                          gpu_indices=tuple(gpus))])


def test_numa_remote_fires_with_per_node_numbers():
    (f,) = rule(numa_snap({"0": GIB, "1": 3 * GIB}), "pinned-numa-remote")
    assert f.message == "3.0 GiB (75%) of its pinned pages sit on node1, away from gpu0 (node0): node0 1.0 GiB, node1 3.0 GiB"
    assert "numactl --cpunodebind=0 --membind=0" in f.advice
    assert f.values["remote_pinned_bytes"] == 3 * GIB and f.values["remote_fraction"] == 0.75


@pytest.mark.parametrize("by_node", [
    {"0": 4 * GIB},                       # all local
    {"0": 4 * GIB, "1": 255 * MIB},       # under 256 MiB remote
    {"0": 40 * GIB, "1": 3 * GIB},        # under 10% remote
])
def test_numa_remote_silent_below_thresholds(by_node):
    assert not rule(numa_snap(by_node), "pinned-numa-remote")


def test_numa_remote_silent_on_a_single_node_host_and_unknown_gpu_node():
    assert not rule(numa_snap({"0": GIB, "1": 3 * GIB}, nodes=(0,)), "pinned-numa-remote")
    assert not rule(numa_snap({"0": GIB, "1": 3 * GIB}, gpu_node=None), "pinned-numa-remote")


def test_numa_remote_gpus_on_both_nodes_are_both_local():
    snap = make_snap(numa_nodes=(0, 1), gpus=[make_gpu(0, numa_node=0), make_gpu(1, numa_node=1)],
                     processes=[make_proc(pinned_bytes=4 * GIB, pinned_bytes_by_node={"0": 2 * GIB, "1": 2 * GIB},
                                          gpu_indices=(0, 1))])
    assert not rule(snap, "pinned-numa-remote")


def test_numa_remote_threshold_from_config():
    cfg = parse_config("[thresholds]\nnuma_remote_min_bytes = \"64M\"\nnuma_remote_min_fraction = 0.01\n")
    snap = numa_snap({"0": 4 * GIB, "1": 100 * MIB})
    assert not rule(snap, "pinned-numa-remote")
    assert rule(snap, "pinned-numa-remote", cfg.thresholds)


def test_node_names_from_a_recording_are_printed_safely():
    from pinmon.model import Snapshot
    from pinmon.outputs.text import format_check

    evil = "1\x1b[2J"
    snap = numa_snap({"0": GIB, evil: 3 * GIB})
    (f,) = rule(snap, "pinned-numa-remote")
    assert "\x1b" not in f.message and "node1\\x1b[2J" in f.message
    assert all("\x1b" not in k for k in f.values)
    snap = Snapshot.from_dict({**snap.to_dict(), "host": {**snap.to_dict()["host"], "kernel_pinned_bytes": 4 * GIB,
                                                           "kernel_pinned_bytes_by_node": {"0": GIB, evil: 3 * GIB}}})
    assert "\x1b" not in format_check(snap, [f])
