"""Rules on host memory (``advise.memory``) at, just below and just above their thresholds: pinned
share of RAM, low available memory, pinned growth, the memlock limit, the kernel's count of pinned
pages, mlock and NUMA placement."""
import dataclasses

import pytest

from pinmon.advise import RULE_DOCS, Thresholds, advise, memory
from pinmon.cli.config import parse_config
from pinmon.units import GIB, MIB
from tests import factories as make

T = Thresholds()


# --- pinned-ram-share ----------------------------------------------------------------------------

LIMIT = 1000 * MIB  # fractions of it are exact in binary floating point


@pytest.mark.parametrize("pinned_mib, severity", [
    (299, None), (300, "warning"), (301, "warning"),
    (500, "warning"), (501, "critical"), (1000, "critical"),
])
def test_pinned_ram_share_levels(pinned_mib, severity):
    snap = make.snapshot(pinned_bytes_est=pinned_mib * MIB, effective_mem_limit_bytes=LIMIT)
    out = memory.pinned_ram_share([snap], T)
    assert [f.severity for f in out] == ([severity] if severity else [])


def test_pinned_ram_share_message_advice_and_values():
    procs = [make.process(pid=10, name="small", pinned_bytes=1 * GIB),
             make.process(pid=4242, name="trainer", pinned_bytes=40 * GIB, source="traced")]
    snap = make.snapshot(pinned_bytes_est=int(61.2 * GIB), effective_mem_limit_bytes=96 * GIB, processes=procs)
    [f] = memory.pinned_ram_share([snap], T)
    assert f.severity == "critical" and f.subject == "host"
    assert f.message == "pinned 61.2 GiB (est.) = 64% of 96.0 GiB effective RAM"
    assert "cannot be swapped" in f.advice and "under half of RAM" in f.advice
    assert "pid 4242 (trainer) with 40.0 GiB (traced)" in f.advice
    assert f.values["top_pid"] == 4242
    assert f.values["fraction"] == pytest.approx(61.2 / 96, rel=1e-6)


def test_pinned_ram_share_names_a_cgroup_limit():
    snap = make.snapshot(pinned_bytes_est=40 * GIB, effective_mem_limit_bytes=64 * GIB, cgroup_limit_bytes=64 * GIB)
    [f] = memory.pinned_ram_share([snap], T)
    assert "64.0 GiB effective RAM (the cgroup limit)" in f.message


def test_pinned_ram_share_thresholds_are_configurable():
    snap = make.snapshot(pinned_bytes_est=200 * MIB, effective_mem_limit_bytes=LIMIT)
    assert memory.pinned_ram_share([snap], T) == []
    t = dataclasses.replace(T, pinned_ram_warning_fraction=0.2)
    assert [f.severity for f in memory.pinned_ram_share([snap], t)] == ["warning"]


@pytest.mark.parametrize("host", [make.host(pinned_bytes_est=None), make.host(effective_mem_limit_bytes=None),
                                  make.host(effective_mem_limit_bytes=0)])
def test_pinned_ram_share_silent_without_inputs(host):
    assert memory.pinned_ram_share([make.snapshot(host=host)], T) == []


# --- low-available-memory ------------------------------------------------------------------------

@pytest.mark.parametrize("avail_mib, pinned, fires", [
    (101, 1, False), (100, 1, False), (99, 1, True), (0, 1, True), (50, 0, False), (50, None, False),
])
def test_low_available_memory_levels(avail_mib, pinned, fires):
    snap = make.snapshot(mem_available_bytes=avail_mib * MIB, effective_mem_limit_bytes=LIMIT, pinned_bytes_est=pinned)
    out = memory.low_available_memory([snap], T)
    assert [f.severity for f in out] == (["warning"] if fires else [])


def test_low_available_memory_message():
    snap = make.snapshot(mem_available_bytes=int(4.6 * GIB), effective_mem_limit_bytes=96 * GIB,
                     pinned_bytes_est=40 * GIB, processes=[make.process(pinned_bytes=40 * GIB)])
    [f] = memory.low_available_memory([snap], T)
    assert f.message == "available 4.6 GiB = 4.8% of 96.0 GiB effective RAM, with 40.0 GiB pinned (est.)"
    assert "cannot be swapped out or reclaimed" in f.advice and "OOM killer" in f.advice
    assert "pid 1234 (python)" in f.advice


# --- pinned-growth -------------------------------------------------------------------------------

def _growth(history, t=T):
    return [f.severity for f in memory.pinned_growth(history, t)]


def test_pinned_growth_steady_leak_warns():
    history = make.pinned_series([GIB + i * (GIB // 10) for i in range(11)])  # 1.0 -> 2.0 GiB over 600 s
    [f] = memory.pinned_growth(history, T)
    assert f.severity == "warning" and f.subject == "pid 1234 (python)"
    assert f.message == ("pinned grew from 1.0 GiB to 2.0 GiB (+100%) over 10.0 min (est.),"
                         " never dropping more than 5% between samples")
    assert "free_all_blocks()" in f.advice and "torch.cuda.empty_cache()" in f.advice
    assert f.values["samples"] == 11 and f.values["span_s"] == 600.0


@pytest.mark.parametrize("last, fires", [(GIB, False), (GIB + 1, True)])
def test_pinned_growth_minimum_size(last, fires):
    assert _growth(make.pinned_series([GIB // 4, GIB // 2, last], step=300.0)) == (["warning"] if fires else [])


@pytest.mark.parametrize("last, fires", [(3 * GIB, False), (3 * GIB + 1, True)])
def test_pinned_growth_minimum_fraction(last, fires):
    # 2 GiB -> 3 GiB is exactly +50%: growth must exceed it
    assert _growth(make.pinned_series([2 * GIB, int(2.5 * GIB), last], step=300.0)) == (["warning"] if fires else [])


@pytest.mark.parametrize("dip, fires", [
    (2 * GIB - (2 * GIB) // 20, True),     # a 5% dip still counts as growth
    (int(2 * GIB * 0.94), False),          # a 6% dip: memory went back, not a leak
])
def test_pinned_growth_must_be_monotone(dip, fires):
    history = make.pinned_series([GIB, 2 * GIB, dip, 3 * GIB], step=200.0)
    assert _growth(history) == (["warning"] if fires else [])


@pytest.mark.parametrize("span_s, fires", [(299.0, False), (300.0, True), (600.0, True)])
def test_pinned_growth_needs_half_a_window_of_samples(span_s, fires):
    history = make.pinned_series([GIB, 3 * GIB], start=1000.0, step=span_s)
    assert _growth(history) == (["warning"] if fires else [])


def test_pinned_growth_only_looks_inside_the_window():
    # An old small sample outside the window does not count: inside it the process is flat at 3 GiB.
    history = make.pinned_series([GIB // 2] + [3 * GIB] * 11, start=0.0, step=60.0)  # times 0 .. 660
    assert _growth(history) == []
    assert _growth(history, dataclasses.replace(T, growth_window_s=660.0)) == ["warning"]


def test_pinned_growth_single_sample_and_missing_process():
    assert _growth(make.pinned_series([5 * GIB])) == []
    history = make.pinned_series([GIB, 2 * GIB, 3 * GIB], step=300.0) + [make.snapshot(time=900.0)]
    assert _growth(history) == []  # gone from the latest snapshot


def test_pinned_growth_pid_reuse_resets_history():
    history = (make.pinned_series([GIB // 4], name="old", step=300.0)
               + make.pinned_series([2 * GIB, 2 * GIB], start=300.0, step=300.0, name="new"))
    assert _growth(history) == []  # "new" is flat from 300 s to 600 s


def test_pinned_growth_traced_label_and_zero_start():
    history = make.pinned_series([0, GIB, 2 * GIB], step=300.0, source="traced")
    [f] = memory.pinned_growth(history, T)
    assert "from 0 B to 2.0 GiB over 10.0 min (traced)" in f.message
    assert "growth_fraction" not in f.values  # unknown figures are left out, not null


def test_pinned_growth_skips_unknown_samples():
    history = make.pinned_series([GIB, None, 3 * GIB], step=300.0)
    [f] = memory.pinned_growth(history, T)
    assert f.values["samples"] == 2


# --- memlock-limit-low ---------------------------------------------------------------------------

@pytest.mark.parametrize("limit, unlimited, pinned, fires", [
    (64 * MIB - 1, False, GIB, True), (64 * MIB, False, GIB, False), (64 * MIB + 1, False, GIB, False),
    (8 * MIB, False, 0, False), (8 * MIB, False, None, False), (None, True, GIB, False),
    (None, None, GIB, False), (8 * MIB, True, GIB, False), (8 * MIB, None, GIB, True),
])
def test_memlock_limit_low_levels(limit, unlimited, pinned, fires):
    snap = make.snapshot(memlock_limit_bytes=limit, memlock_unlimited=unlimited, pinned_bytes_est=pinned)
    out = memory.memlock_limit_low([snap], T)
    assert [f.severity for f in out] == (["info"] if fires else [])


def test_memlock_limit_low_is_accurate_about_cuda():
    snap = make.snapshot(memlock_limit_bytes=8 * MIB, memlock_unlimited=False, pinned_bytes_est=GIB)
    [f] = memory.memlock_limit_low([snap], T)
    assert f.message.startswith("RLIMIT_MEMLOCK is 8.0 MiB")
    assert "not mlock()ed" in f.advice and "not capped" in f.advice and "RDMA" in f.advice


@pytest.mark.hardening
def test_memlock_limit_low_quotes_the_kernels_count_not_an_estimate_it_contradicts():
    # 408 MiB of shared memory made to look like CUDA's pinned buffers; the kernel counts no pinned page.
    host = dict(memlock_limit_bytes=8 * MIB, memlock_unlimited=False, pinned_bytes_est=408 * MIB,
                kernel_pinned_bytes=0, pinned_bytes_total=0, pinned_bytes_source="kernel",
                unattributed_pinned_bytes=0)
    assert memory.memlock_limit_low([make.snapshot(**host)], T) == []
    io_uring = make.process(pid=77, name="fio", vm_pinned_bytes=300 * MIB)
    snap = make.snapshot(processes=[io_uring], **{**host, "kernel_pinned_bytes": 300 * MIB,
                                                  "pinned_bytes_total": 300 * MIB})
    [f] = memory.memlock_limit_low([snap], T)
    assert f.message == ("RLIMIT_MEMLOCK is 8.0 MiB (pinmon's own soft limit; processes started the same way"
                         " usually inherit it) while 300.0 MiB (kernel's count) is pinned, 300.0 MiB of it VmPin"
                         " (io_uring registered buffers, RDMA memory regions: charged to this limit)")
    assert f.values["pinned_bytes"] == 300 * MIB and f.values["kernel_count"] == 1
    assert "io_uring registered buffers" in f.advice and "RDMA" in f.advice
    assert "io_uring" in RULE_DOCS["memlock-limit-low"]


# --- the kernel's count of pinned pages, mlock, NUMA placement ----------------------------------

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
    snap = make.snapshot(**kernel_host(70 * GIB, 70 * GIB), effective_mem_limit_bytes=128 * GIB)
    (f,) = rule(snap, "pinned-ram-share")
    assert f.severity == "critical"
    assert f.message == "pinned 70.0 GiB (kernel's count) = 55% of 128.0 GiB effective RAM"
    assert f.values["kernel_count"] == 1 and f.values["pinned_bytes"] == 70 * GIB


def test_ram_share_counts_write_combined_with_the_kernel_count():
    snap = make.snapshot(**kernel_host(30 * GIB, 0, wc=10 * GIB), effective_mem_limit_bytes=100 * GIB)
    (f,) = rule(snap, "pinned-ram-share")
    assert f.severity == "warning" and f.values["pinned_bytes"] == 40 * GIB
    assert "(kernel's count + write-combined est.)" in f.message


def test_ram_share_says_estimate_without_the_kernel_count():
    snap = make.snapshot(pinned_bytes_est=60 * GIB, pinned_bytes_total=61 * GIB, pinned_bytes_source="est.",
                     effective_mem_limit_bytes=100 * GIB)
    (f,) = rule(snap, "pinned-ram-share")
    assert f.message.startswith("pinned 61.0 GiB (est.) = 61%") and f.values["kernel_count"] == 0


def test_ram_share_in_a_limited_cgroup_reports_the_larger_share():
    # Host-wide 40 GiB of 512 GiB is 8%; this cgroup's own 12 GiB of its 16 GiB limit is 75%.
    snap = make.snapshot(**kernel_host(40 * GIB, 28 * GIB, pinned_bytes_est=12 * GIB), mem_total_bytes=512 * GIB,
                     effective_mem_limit_bytes=16 * GIB, cgroup_limit_bytes=16 * GIB)
    (f,) = rule(snap, "pinned-ram-share")
    assert f.severity == "critical" and f.values["kernel_count"] == 0
    assert "in this cgroup's processes (est.)" in f.message and "cgroup limit" in f.message
    # The other way round: the host is full of pins, the cgroup holds none.
    snap = make.snapshot(**kernel_host(300 * GIB, 300 * GIB), mem_total_bytes=512 * GIB,
                     effective_mem_limit_bytes=16 * GIB, cgroup_limit_bytes=16 * GIB)
    (f,) = rule(snap, "pinned-ram-share")
    assert f.severity == "critical" and f.values["kernel_count"] == 1
    assert f.message == "pinned 300.0 GiB host-wide (kernel's count) = 59% of 512.0 GiB RAM"


def test_low_available_memory_uses_the_best_figure():
    snap = make.snapshot(**kernel_host(8 * GIB, 8 * GIB), mem_available_bytes=4 * GIB,
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
    snap = make.snapshot(**kernel_host(kernel, unattributed))
    assert bool(rule(snap, "pinned-unattributed")) == fires


def test_unattributed_message_and_advice():
    snap = make.snapshot(**kernel_host(10 * GIB, 6 * GIB))
    (f,) = rule(snap, "pinned-unattributed")
    assert f.severity == "warning" and f.subject == "host"
    assert f.message.startswith("6.0 GiB (60%) of the 10.0 GiB the kernel counts as pinned")
    assert "explain 4.0 GiB" in f.message
    for source in ("cudaHostRegister", "RDMA", "VFIO", "io_uring", "pinmon trace", "cudaHostUnregister"):
        assert source in f.advice
    assert f.values == {"kernel_pinned_bytes": 10 * GIB, "unattributed_pinned_bytes": 6 * GIB,
                        "explained_pinned_bytes": 4 * GIB, "fraction": 0.6}


def test_unattributed_says_host_wide_in_a_limited_cgroup():
    snap = make.snapshot(**kernel_host(10 * GIB, 6 * GIB), mem_total_bytes=512 * GIB,
                     effective_mem_limit_bytes=64 * GIB, cgroup_limit_bytes=64 * GIB)
    (f,) = rule(snap, "pinned-unattributed")
    assert "host-wide" in f.message


def test_unattributed_silent_without_the_kernel_count():
    assert not rule(make.snapshot(pinned_bytes_est=50 * GIB), "pinned-unattributed")


def test_unattributed_thresholds_from_a_config_file():
    cfg = parse_config('[thresholds]\nunattributed_min_bytes = "64M"\nunattributed_min_fraction = 0.05\n')
    snap = make.snapshot(**kernel_host(10 * GIB, 700 * MIB))
    assert not rule(snap, "pinned-unattributed")
    assert rule(snap, "pinned-unattributed", cfg.thresholds)


# --- mlock-not-pinned ------------------------------------------------------------------------------

def test_mlock_not_pinned():
    procs = [make.process(pid=1, vm_locked_bytes=GIB), make.process(pid=2, vm_locked_bytes=GIB - 1),
             make.process(pid=3, vm_locked_bytes=None)]
    (f,) = rule(make.snapshot(processes=procs), "mlock-not-pinned")
    assert f.subject == "pid 1 (python)" and f.severity == "warning"
    assert "mlock()" in f.message and "pageable speed" in f.message
    assert "cudaHostRegister" in f.advice and "pin_memory()" in f.advice
    assert f.values["vm_locked_bytes"] == GIB


def test_mlock_not_pinned_quotes_the_probe():
    snap = make.snapshot(processes=[make.process(vm_locked_bytes=4 * GIB)], probe=make.probe())
    (f,) = rule(snap, "mlock-not-pinned")
    assert "pinned H2D ran 55.0 GB/s vs 6.3 GB/s pageable" in f.advice


# --- pinned-numa-remote ----------------------------------------------------------------------------

def numa_snap(by_node, gpu_node=0, nodes=(0, 1), gpus=(0,)):
    return make.snapshot(numa_nodes=nodes, gpus=[make.gpu(i, numa_node=gpu_node) for i in gpus],
                     processes=[make.process(pinned_bytes=sum(by_node.values()), pinned_bytes_by_node=by_node,
                                          gpu_indices=tuple(gpus))])


def test_numa_remote_fires_with_per_node_numbers():
    (f,) = rule(numa_snap({"0": GIB, "1": 3 * GIB}), "pinned-numa-remote")
    assert f.message == "3.0 GiB (75%) of its pinned pages sit on node1, away from gpu0 (node0): node0 1.0 GiB, node1 3.0 GiB"
    assert "numactl --cpunodebind=0 --membind=0" in f.advice
    assert f.values["remote_pinned_bytes"] == 3 * GIB and f.values["remote_fraction"] == 0.75


def test_numa_remote_names_a_node_key_that_is_no_number():
    """A recording's node key of digits that are not ASCII is a name (sorted last), not a crash."""
    (f,) = rule(numa_snap({"0": GIB, "\u00b2": 3 * GIB}), "pinned-numa-remote")
    assert f.message.endswith("sit on node\u00b2, away from gpu0 (node0): node0 1.0 GiB, node\u00b2 3.0 GiB")


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
    snap = make.snapshot(numa_nodes=(0, 1), gpus=[make.gpu(0, numa_node=0), make.gpu(1, numa_node=1)],
                     processes=[make.process(pinned_bytes=4 * GIB, pinned_bytes_by_node={"0": 2 * GIB, "1": 2 * GIB},
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


# --- pinned-growth, fast: a leak that fills RAM in a minute -------------------------------------------

def _leak(step_bytes, seconds, start=GIB, available_start=80 * GIB, jump_at=None):
    """One sample a second of a process whose pinned memory grows by ``step_bytes`` a second (or, with
    ``jump_at``, once at that second by ``step_bytes``), the host's available memory shrinking by as much."""
    out = []
    for i in range(seconds + 1):
        grown = step_bytes * i if jump_at is None else (step_bytes if i >= jump_at else 0)
        out.append(make.snapshot(time=1000.0 + i, mem_available_bytes=available_start - grown,
                                 processes=[make.process(pid=1234, name="python", pinned_bytes=start + grown)]))
    return out


def test_pinned_growth_flags_a_leak_that_fills_ram_within_the_horizon():
    history = _leak(3 * GIB // 2, 43)  # 1 GiB -> 65.5 GiB in 43 s, as the demo's hog
    first = next(i for i in range(len(history)) if _growth(history[: i + 1]))
    assert first == 10  # after growth_fast_min_span_s of samples, not after five minutes
    [f] = memory.pinned_growth(history[:11], T)
    assert f.values["growth_bytes_per_s"] == 3 * GIB // 2 and f.values["seconds_to_full"] < 60
    assert "available memory is gone in" in f.message


@pytest.mark.parametrize("history", [
    pytest.param(_leak(100 * MIB, 60, available_start=100 * GIB), id="slow-with-room"),  # ~17 min to full
    pytest.param(_leak(4 * GIB, 30, jump_at=1), id="one-allocation-then-flat"),
    pytest.param(_leak(3 * GIB // 2, 8), id="under-the-minimum-span"),
])
def test_pinned_growth_fast_path_stays_silent(history):
    assert _growth(history) == []


def test_pinned_growth_fast_path_needs_the_available_figure():
    history = [dataclasses.replace(s, host=dataclasses.replace(s.host, mem_available_bytes=None))
               for s in _leak(3 * GIB // 2, 20)]
    assert _growth(history) == []
