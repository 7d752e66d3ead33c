"""Each advisor rule at, just below and just above its thresholds, from hand-made snapshots."""
import collections
import dataclasses
import json

import pytest

from pinmon.advise import RULE_DOCS, RULES, Thresholds, advise
from pinmon.advise import memory, pcie, traced
from pinmon.advise import probe as probe_rules
from pinmon.model import Finding, Pcie, Snapshot

from .helpers import GIB, MIB, make_gpu, make_host, make_probe, make_proc, make_snap, null_snap

T = Thresholds()


def only(findings, rule):
    return [f for f in findings if f.rule == rule]


# --- every rule: silence on unknown inputs -------------------------------------------------------

@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_rule_is_silent_when_inputs_are_unknown(rule_id):
    assert RULES[rule_id]([null_snap()], T) == []


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_rule_is_silent_on_empty_history(rule_id):
    assert RULES[rule_id]([], T) == []


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_rule_is_silent_on_a_healthy_box(rule_id):
    snap = make_snap(pinned_bytes_est=4 * GIB, gpus=[make_gpu(rx=50e9)],
                     processes=[make_proc(pinned_bytes=4 * GIB, pinned_allocs_per_s=1.0,
                                          median_alloc_bytes=64 * MIB, wc_readbacks=0,
                                          write_combined_bytes=0, pageable_copy_bytes_per_s=0.0)],
                     probe=make_probe())
    assert RULES[rule_id]([snap], T) == []


def test_rule_docs_cover_every_rule_and_only_them():
    assert set(RULE_DOCS) == set(RULES)
    assert all(doc and "\n" not in doc for doc in RULE_DOCS.values())


# --- pinned-ram-share ----------------------------------------------------------------------------

LIMIT = 1000 * MIB  # fractions of it are exact in binary floating point


@pytest.mark.parametrize("pinned_mib, severity", [
    (299, None), (300, "warning"), (301, "warning"),
    (500, "warning"), (501, "critical"), (1000, "critical"),
])
def test_pinned_ram_share_levels(pinned_mib, severity):
    snap = make_snap(pinned_bytes_est=pinned_mib * MIB, effective_mem_limit_bytes=LIMIT)
    out = memory.pinned_ram_share([snap], T)
    assert [f.severity for f in out] == ([severity] if severity else [])


def test_pinned_ram_share_message_advice_and_values():
    procs = [make_proc(pid=10, name="small", pinned_bytes=1 * GIB),
             make_proc(pid=4242, name="trainer", pinned_bytes=40 * GIB, source="traced")]
    snap = make_snap(pinned_bytes_est=int(61.2 * GIB), effective_mem_limit_bytes=96 * GIB, processes=procs)
    [f] = memory.pinned_ram_share([snap], T)
    assert f.severity == "critical" and f.subject == "host"
    assert f.message == "pinned 61.2 GiB (est.) = 64% of 96.0 GiB effective RAM"
    assert "cannot be swapped" in f.advice and "under half of RAM" in f.advice
    assert "pid 4242 (trainer) with 40.0 GiB (traced)" in f.advice
    assert f.values["top_pid"] == 4242
    assert f.values["fraction"] == pytest.approx(61.2 / 96, rel=1e-6)


def test_pinned_ram_share_names_a_cgroup_limit():
    snap = make_snap(pinned_bytes_est=40 * GIB, effective_mem_limit_bytes=64 * GIB, cgroup_limit_bytes=64 * GIB)
    [f] = memory.pinned_ram_share([snap], T)
    assert "64.0 GiB effective RAM (the cgroup limit)" in f.message


def test_pinned_ram_share_thresholds_are_configurable():
    snap = make_snap(pinned_bytes_est=200 * MIB, effective_mem_limit_bytes=LIMIT)
    assert memory.pinned_ram_share([snap], T) == []
    t = dataclasses.replace(T, pinned_ram_warning_fraction=0.2)
    assert [f.severity for f in memory.pinned_ram_share([snap], t)] == ["warning"]


@pytest.mark.parametrize("host", [make_host(pinned_bytes_est=None), make_host(effective_mem_limit_bytes=None),
                                  make_host(effective_mem_limit_bytes=0)])
def test_pinned_ram_share_silent_without_inputs(host):
    assert memory.pinned_ram_share([make_snap(host=host)], T) == []


# --- pinned-small-allocs -------------------------------------------------------------------------

@pytest.mark.parametrize("rate, median, fires", [
    (9.99, 4096, False), (10.0, 4096, True), (10.01, 4096, True),
    (50.0, MIB - 1, True), (50.0, MIB, False), (50.0, MIB + 1, False),
    (None, 4096, False), (50.0, None, False),
])
def test_pinned_small_allocs_levels(rate, median, fires):
    snap = make_snap(processes=[make_proc(pinned_allocs_per_s=rate, median_alloc_bytes=median)])
    out = traced.pinned_small_allocs([snap], T)
    assert [f.severity for f in out] == (["warning"] if fires else [])


def test_pinned_small_allocs_message_and_reference_costs():
    snap = make_snap(processes=[make_proc(pid=77, name="loader", pinned_allocs_per_s=25.0,
                                          median_alloc_bytes=4096, source="traced")])
    [f] = traced.pinned_small_allocs([snap], T)
    assert f.subject == "pid 77 (loader)"
    assert f.message == "25.0 pinned allocations/s, median 4.0 KiB (traced)"
    assert "~9 us" in f.advice and "~1 ms" in f.advice and "16 MiB" in f.advice
    assert "pinned memory pool" in f.advice and "caching host allocator" in f.advice
    assert "probe_alloc_seconds" not in f.values


def test_pinned_small_allocs_quotes_the_probe():
    probe = make_probe(allocs=[(16 * MIB, 6.1e-3), (4096, 9e-6)])
    snap = make_snap(processes=[make_proc(pinned_allocs_per_s=25.0, median_alloc_bytes=4096)], probe=probe)
    [f] = traced.pinned_small_allocs([snap], T)
    assert "on this box the probe measured 4.0 KiB in 9.0 us, 16.0 MiB in 6.1 ms" in f.advice
    assert f.values["probe_alloc_seconds"] == 9e-6 and f.values["probe_alloc_size_bytes"] == 4096


def test_pinned_small_allocs_ignores_an_unavailable_probe():
    probe = make_probe(allocs=[(4096, 9e-6)], status="unavailable")
    snap = make_snap(processes=[make_proc(pinned_allocs_per_s=25.0, median_alloc_bytes=4096)], probe=probe)
    [f] = traced.pinned_small_allocs([snap], T)
    assert "on this box" not in f.advice


def test_subject_without_a_name():
    snap = make_snap(processes=[make_proc(pid=5, name=None, pinned_allocs_per_s=25.0, median_alloc_bytes=4096)])
    [f] = traced.pinned_small_allocs([snap], T)
    assert f.subject == "pid 5"


# --- wc-cpu-readback -----------------------------------------------------------------------------

@pytest.mark.parametrize("readbacks, wc_bytes, severity", [
    (1, 64 * MIB, "warning"), (1, None, "warning"), (0, 64 * MIB, "info"), (None, 1, "info"),
    (0, 0, None), (None, None, None), (0, None, None),
])
def test_wc_cpu_readback_levels(readbacks, wc_bytes, severity):
    snap = make_snap(processes=[make_proc(wc_readbacks=readbacks, write_combined_bytes=wc_bytes)])
    out = traced.wc_cpu_readback([snap], T)
    assert [f.severity for f in out] == ([severity] if severity else [])


def test_wc_cpu_readback_messages():
    snap = make_snap(processes=[
        make_proc(pid=1, name="reader", wc_readbacks=12, write_combined_bytes=64 * MIB, source="traced"),
        make_proc(pid=2, name="writer", wc_readbacks=None, write_combined_bytes=32 * MIB)])
    warn, info = traced.wc_cpu_readback([snap], T)
    assert warn.subject == "pid 1 (reader)"
    assert warn.message.startswith("12 device-to-host copies (traced) into write-combined pinned memory"
                                   " (64.0 MiB held now):")
    assert "uncached" in warn.message and "CPU reads (traced)" not in warn.message
    assert warn.values["wc_d2h_copies"] == 12 and warn.values["write_combined_bytes"] == 64 * MIB
    assert info.message == ("holds 32.0 MiB (est.) of write-combined pinned memory: fine for buffers the CPU"
                            " only writes and the GPU reads; never read it from the CPU")
    for f in (warn, info):
        assert "cudaHostAllocWriteCombined" in f.advice and "device-to-host" in f.advice


def test_wc_cpu_readback_after_the_buffer_was_freed_shows_no_zero_bytes():
    """Copies were counted, the buffer is gone: no "0 B held" in the message or the numbers."""
    (f,) = traced.wc_cpu_readback([make_snap(processes=[make_proc(wc_readbacks=1, write_combined_bytes=0,
                                                             source="traced")])], T)
    assert f.message.startswith("1 device-to-host copy (traced) into write-combined pinned memory:")
    assert "held" not in f.message and "write_combined_bytes" not in f.values


def test_wc_cpu_readback_quotes_the_probe_cpu_reads():
    probe = make_probe(cpu_reads={"write_combined": 0.9e9, "pinned": 10.5e9})
    snap = make_snap(processes=[make_proc(wc_readbacks=3)], probe=probe)
    [f] = traced.wc_cpu_readback([snap], T)
    assert "probe read write-combined memory at 900.0 MB/s vs 10.5 GB/s" in f.message


# --- pcie-link-degraded --------------------------------------------------------------------------

@pytest.mark.parametrize("gen, width, rx, tx, severity", [
    (3, 16, 0.999e9, 0.0, None),         # lower generation while idle: power saving
    (3, 16, 1.0e9, 0.0, "warning"),
    (3, 16, 0.5e9, 0.5e9, "warning"),    # rx + tx counts
    (3, 16, 1.001e9, 0.0, "warning"),
    (5, 8, 1.0e9, 0.0, "warning"),
    (5, 8, 0.999e9, 0.0, "info"),        # narrow while idle
    (5, 8, None, None, "info"),
    (3, 16, None, None, None),
    (5, 16, 60e9, 0.0, None),            # full link, busy
])
def test_pcie_link_degraded_levels(gen, width, rx, tx, severity):
    snap = make_snap(gpus=[make_gpu(gen=gen, width=width, rx=rx, tx=tx)])
    out = pcie.pcie_link_degraded([snap], T)
    assert [f.severity for f in out] == ([severity] if severity else [])


def test_pcie_link_degraded_message():
    snap = make_snap(gpus=[make_gpu(index=2, gen=3, width=8, rx=12.3e9, tx=0.0, pci_bus_id="00000000:41:00.0")])
    [f] = pcie.pcie_link_degraded([snap], T)
    assert f.subject == "gpu2"
    assert f.message == "link Gen3 x8 under 12.3 GB/s of traffic, rated Gen5 x16 (63.0 GB/s vs 7.9 GB/s)"
    assert "reseat" in f.advice.lower() and "riser" in f.advice and "BIOS" in f.advice
    assert "`sudo lspci -vv -s 0000:41:00.0`" in f.advice and "LnkSta" in f.advice and "LnkCap" in f.advice
    assert f.values["traffic_bytes_per_s"] == 12.3e9


def test_pcie_link_degraded_silent_for_unknown_max_or_lost_gpu():
    snap = make_snap(gpus=[make_gpu(index=0, gen=3, width=8, gen_max=None, width_max=None, rx=20e9),
                           make_gpu(index=1, gen=3, width=8, rx=20e9, lost=True)])
    assert pcie.pcie_link_degraded([snap], T) == []


# --- pcie-errors ---------------------------------------------------------------------------------

def _pcie(replay=0, recovery=0, error=0, deltas=None):
    return Pcie(rx_bytes_per_s=0.0, tx_bytes_per_s=0.0, replay_delta=replay, recovery_delta=recovery,
                error_delta=error, counter_deltas=deltas or {})


@pytest.mark.parametrize("replay, recovery, error, severity", [
    (0, 0, 0, None), (1, 0, 0, "warning"), (0, 0, 1, "warning"), (0, 1, 0, "info"), (2, 5, 0, "warning"),
    (None, None, None, None), (None, None, 3, "warning"),
])
def test_pcie_errors_levels(replay, recovery, error, severity):
    snap = make_snap(gpus=[make_gpu(pcie=_pcie(replay, recovery, error))])
    out = pcie.pcie_errors([snap], T)
    assert [f.severity for f in out] == ([severity] if severity else [])


def test_pcie_errors_lists_nonzero_counters():
    deltas = {"replay": 3, "l0_to_recovery": 12, "bad_tlp": 2, "naks_sent": 0, "receiver_error": None}
    snap = make_snap(gpus=[make_gpu(index=1, pcie=_pcie(3, 12, 2, deltas), pci_bus_id="00000000:42:00.0")])
    [f] = pcie.pcie_errors([snap], T)
    assert f.subject == "gpu1" and f.severity == "warning"
    assert f.message == "PCIe counters rose since pinmon started: bad_tlp +2, l0_to_recovery +12, replay +3"
    assert "signal integrity" in f.advice and "dmesg" in f.advice and "AER" in f.advice
    assert f.values == {"replay_delta": 3, "recovery_delta": 12, "error_delta": 2}


def test_pcie_errors_without_counter_details():
    snap = make_snap(gpus=[make_gpu(pcie=_pcie(1, 0, 4))])
    [f] = pcie.pcie_errors([snap], T)
    assert f.message == "PCIe counters rose since pinmon started: replay +1, errors +4"


def test_pcie_errors_recoveries_alone_are_info_and_say_why():
    snap = make_snap(gpus=[make_gpu(pcie=_pcie(0, 7, 0, {"l0_to_recovery": 7}))])
    [f] = pcie.pcie_errors([snap], T)
    assert f.severity == "info" and "l0_to_recovery +7" in f.message and "power-saving" in f.message


# --- pageable-bulk-copies ------------------------------------------------------------------------

@pytest.mark.parametrize("rate, fires", [(99.99e6, False), (100e6, True), (100.01e6, True), (None, False)])
def test_pageable_bulk_copies_levels(rate, fires):
    snap = make_snap(processes=[make_proc(pageable_copy_bytes_per_s=rate)])
    out = traced.pageable_bulk_copies([snap], T)
    assert [f.severity for f in out] == (["warning"] if fires else [])


def test_pageable_bulk_copies_quotes_the_probe_speedup():
    snap = make_snap(processes=[make_proc(pid=9, name="etl", pageable_copy_bytes_per_s=2.1e9, source="traced")],
                     probe=make_probe(h2d_pinned=55.0e9, h2d_pageable=6.3e9))
    [f] = traced.pageable_bulk_copies([snap], T)
    assert f.subject == "pid 9 (etl)"
    assert f.message == "2.1 GB/s of host-device copies from pageable memory (traced)"
    assert "On this box pinned H2D ran 55.0 GB/s vs 6.3 GB/s pageable (8.7x)." in f.advice
    assert "pin_memory()" in f.advice and "cudaHostRegister" in f.advice
    assert f.values["probe_speedup"] == pytest.approx(55.0 / 6.3)


@pytest.mark.parametrize("probe", [None, make_probe(h2d_pageable=None), make_probe(status="unavailable")])
def test_pageable_bulk_copies_without_a_usable_probe(probe):
    snap = make_snap(processes=[make_proc(pageable_copy_bytes_per_s=1e9)], probe=probe)
    [f] = traced.pageable_bulk_copies([snap], T)
    assert "On this box" not in f.advice and "probe_speedup" not in f.values


# --- probe-below-link ----------------------------------------------------------------------------

@pytest.mark.parametrize("h2d, d2h, fires", [
    (69.99e9, 50e9, True), (70e9, 50e9, False), (70.01e9, 50e9, False),
    (50e9, 70e9, False),                 # the best direction counts
    (None, 69e9, True), (None, None, False),
])
def test_probe_below_link_levels(h2d, d2h, fires):
    snap = make_snap(gpus=[make_gpu()], probe=make_probe(h2d_pinned=h2d, d2h_pinned=d2h, link=100e9))
    out = probe_rules.probe_below_link([snap], T)
    assert [f.severity for f in out] == (["warning"] if fires else [])


def test_probe_below_link_message_and_numa_node():
    snap = make_snap(gpus=[make_gpu(numa_node=1)], probe=make_probe(h2d_pinned=30.1e9, d2h_pinned=29e9))
    [f] = probe_rules.probe_below_link([snap], T)
    assert f.subject == "gpu0"
    assert f.message == "best pinned copy 30.1 GB/s (H2D) = 48% of the link's 63.0 GB/s (Gen5 x16)"
    assert "numactl --cpunodebind=1 --membind=1" in f.advice and "LnkSta" in f.advice
    assert "other traffic" in f.advice
    assert f.values["numa_node"] == 1


def test_probe_below_link_quotes_cpu_affinity_when_numa_node_unknown():
    snap = make_snap(gpus=[make_gpu(cpu_affinity="0-15")], probe=make_probe(h2d_pinned=30e9, d2h_pinned=30e9))
    [f] = probe_rules.probe_below_link([snap], T)
    assert "numactl --physcpubind=0-15 --localalloc" in f.advice


def test_probe_below_link_falls_back_to_the_gpu_link_rate():
    snap = make_snap(gpus=[make_gpu()], probe=make_probe(h2d_pinned=40e9, d2h_pinned=40e9, link=None))
    [f] = probe_rules.probe_below_link([snap], T)
    assert f.values["link_theoretical_bytes_per_s"] == pytest.approx(63.0e9, rel=1e-3)
    # without either rate it cannot judge
    snap = make_snap(gpus=[], probe=make_probe(h2d_pinned=40e9, d2h_pinned=40e9, link=None))
    assert probe_rules.probe_below_link([snap], T) == []


def test_probe_below_link_silent_when_probe_unavailable():
    snap = make_snap(gpus=[make_gpu()], probe=make_probe(h2d_pinned=1e9, status="unavailable"))
    assert probe_rules.probe_below_link([snap], T) == []


# --- low-available-memory ------------------------------------------------------------------------

@pytest.mark.parametrize("avail_mib, pinned, fires", [
    (101, 1, False), (100, 1, False), (99, 1, True), (0, 1, True), (50, 0, False), (50, None, False),
])
def test_low_available_memory_levels(avail_mib, pinned, fires):
    snap = make_snap(mem_available_bytes=avail_mib * MIB, effective_mem_limit_bytes=LIMIT, pinned_bytes_est=pinned)
    out = memory.low_available_memory([snap], T)
    assert [f.severity for f in out] == (["warning"] if fires else [])


def test_low_available_memory_message():
    snap = make_snap(mem_available_bytes=int(4.6 * GIB), effective_mem_limit_bytes=96 * GIB,
                     pinned_bytes_est=40 * GIB, processes=[make_proc(pinned_bytes=40 * GIB)])
    [f] = memory.low_available_memory([snap], T)
    assert f.message == "available 4.6 GiB = 4.8% of 96.0 GiB effective RAM, with 40.0 GiB pinned (est.)"
    assert "cannot be swapped out or reclaimed" in f.advice and "OOM killer" in f.advice
    assert "pid 1234 (python)" in f.advice


# --- pinned-growth -------------------------------------------------------------------------------

def _series(values, start=0.0, step=60.0, pid=1234, name="python", **proc):
    """Snapshots of one process's pinned bytes, one per ``step`` seconds."""
    return [make_snap(time=start + i * step, processes=[make_proc(pid=pid, name=name, pinned_bytes=v, **proc)])
            for i, v in enumerate(values)]


def _growth(history, t=T):
    return [f.severity for f in memory.pinned_growth(history, t)]


def test_pinned_growth_steady_leak_warns():
    history = _series([GIB + i * (GIB // 10) for i in range(11)])  # 1.0 -> 2.0 GiB over 600 s
    [f] = memory.pinned_growth(history, T)
    assert f.severity == "warning" and f.subject == "pid 1234 (python)"
    assert f.message == ("pinned grew from 1.0 GiB to 2.0 GiB (+100%) over 10.0 min (est.),"
                         " never dropping more than 5% between samples")
    assert "free_all_blocks()" in f.advice and "torch.cuda.empty_cache()" in f.advice
    assert f.values["samples"] == 11 and f.values["span_s"] == 600.0


@pytest.mark.parametrize("last, fires", [(GIB, False), (GIB + 1, True)])
def test_pinned_growth_minimum_size(last, fires):
    assert _growth(_series([GIB // 4, GIB // 2, last], step=300.0)) == (["warning"] if fires else [])


@pytest.mark.parametrize("last, fires", [(3 * GIB, False), (3 * GIB + 1, True)])
def test_pinned_growth_minimum_fraction(last, fires):
    # 2 GiB -> 3 GiB is exactly +50%: growth must exceed it
    assert _growth(_series([2 * GIB, int(2.5 * GIB), last], step=300.0)) == (["warning"] if fires else [])


@pytest.mark.parametrize("dip, fires", [
    (2 * GIB - (2 * GIB) // 20, True),     # a 5% dip still counts as growth
    (int(2 * GIB * 0.94), False),          # a 6% dip: memory went back, not a leak
])
def test_pinned_growth_must_be_monotone(dip, fires):
    history = _series([GIB, 2 * GIB, dip, 3 * GIB], step=200.0)
    assert _growth(history) == (["warning"] if fires else [])


@pytest.mark.parametrize("span_s, fires", [(299.0, False), (300.0, True), (600.0, True)])
def test_pinned_growth_needs_half_a_window_of_samples(span_s, fires):
    history = _series([GIB, 3 * GIB], start=1000.0, step=span_s)
    assert _growth(history) == (["warning"] if fires else [])


def test_pinned_growth_only_looks_inside_the_window():
    # An old small sample outside the window does not count: inside it the process is flat at 3 GiB.
    history = _series([GIB // 2] + [3 * GIB] * 11, start=0.0, step=60.0)  # times 0 .. 660
    assert _growth(history) == []
    assert _growth(history, dataclasses.replace(T, growth_window_s=660.0)) == ["warning"]


def test_pinned_growth_single_sample_and_missing_process():
    assert _growth(_series([5 * GIB])) == []
    history = _series([GIB, 2 * GIB, 3 * GIB], step=300.0) + [make_snap(time=900.0)]
    assert _growth(history) == []  # gone from the latest snapshot


def test_pinned_growth_pid_reuse_resets_history():
    history = (_series([GIB // 4], name="old", step=300.0)
               + _series([2 * GIB, 2 * GIB], start=300.0, step=300.0, name="new"))
    assert _growth(history) == []  # "new" is flat from 300 s to 600 s


def test_pinned_growth_traced_label_and_zero_start():
    history = _series([0, GIB, 2 * GIB], step=300.0, source="traced")
    [f] = memory.pinned_growth(history, T)
    assert "from 0 B to 2.0 GiB over 10.0 min (traced)" in f.message
    assert "growth_fraction" not in f.values  # unknown figures are left out, not null


def test_pinned_growth_skips_unknown_samples():
    history = _series([GIB, None, 3 * GIB], step=300.0)
    [f] = memory.pinned_growth(history, T)
    assert f.values["samples"] == 2


# --- gpu-lost ------------------------------------------------------------------------------------

def test_gpu_lost():
    snap = make_snap(gpus=[make_gpu(index=0), make_gpu(index=3, lost=True, pci_bus_id="0000:41:00.0")])
    [f] = pcie.gpu_lost([snap], T)
    assert f.severity == "critical" and f.subject == "gpu3"
    assert f.message == "GPU 3 (bus 0000:41:00.0) fell off the bus"
    assert "Xid 79" in f.advice and "dmesg" in f.advice and "administrator" in f.advice


def test_gpu_lost_without_bus_id():
    [f] = pcie.gpu_lost([make_snap(gpus=[make_gpu(index=1, lost=True, pci_bus_id=None)])], T)
    assert f.message == "GPU 1 fell off the bus"


# --- memlock-limit-low ---------------------------------------------------------------------------

@pytest.mark.parametrize("limit, unlimited, pinned, fires", [
    (64 * MIB - 1, False, GIB, True), (64 * MIB, False, GIB, False), (64 * MIB + 1, False, GIB, False),
    (8 * MIB, False, 0, False), (8 * MIB, False, None, False), (None, True, GIB, False),
    (None, None, GIB, False), (8 * MIB, True, GIB, False), (8 * MIB, None, GIB, True),
])
def test_memlock_limit_low_levels(limit, unlimited, pinned, fires):
    snap = make_snap(memlock_limit_bytes=limit, memlock_unlimited=unlimited, pinned_bytes_est=pinned)
    out = memory.memlock_limit_low([snap], T)
    assert [f.severity for f in out] == (["info"] if fires else [])


def test_memlock_limit_low_is_accurate_about_cuda():
    snap = make_snap(memlock_limit_bytes=8 * MIB, memlock_unlimited=False, pinned_bytes_est=GIB)
    [f] = memory.memlock_limit_low([snap], T)
    assert f.message.startswith("RLIMIT_MEMLOCK is 8.0 MiB")
    assert "not mlock()ed" in f.advice and "not capped" in f.advice and "RDMA" in f.advice


# --- advise() ------------------------------------------------------------------------------------

def _busy_snapshot(time=1000.0):
    return make_snap(
        time=time, pinned_bytes_est=60 * GIB, effective_mem_limit_bytes=100 * GIB, mem_available_bytes=5 * GIB,
        gpus=[make_gpu(index=10, gen=3, rx=20e9), make_gpu(index=2, gen=3, rx=20e9),
              make_gpu(index=1, lost=True)],
        processes=[make_proc(pid=100, write_combined_bytes=MIB), make_proc(pid=99, wc_readbacks=1),
                   make_proc(pid=7, pageable_copy_bytes_per_s=1e9)])


def test_advise_sorts_worst_first_then_rule_then_subject():
    out = advise([_busy_snapshot()])
    keys = [(f.severity, f.rule, f.subject) for f in out]
    assert keys == [
        ("critical", "gpu-lost", "gpu1"),
        ("critical", "pinned-ram-share", "host"),
        ("warning", "low-available-memory", "host"),
        ("warning", "pageable-bulk-copies", "pid 7 (python)"),
        ("warning", "pcie-link-degraded", "gpu2"),
        ("warning", "pcie-link-degraded", "gpu10"),
        ("warning", "wc-cpu-readback", "pid 99 (python)"),
        ("info", "wc-cpu-readback", "pid 100 (python)"),
    ]


def test_advise_only_and_unknown_ids():
    snap = _busy_snapshot()
    assert {f.rule for f in advise([snap], only=["gpu-lost"])} == {"gpu-lost"}
    assert {f.rule for f in advise([snap], only="gpu-lost")} == {"gpu-lost"}
    assert advise([snap], only=[]) == []
    with pytest.raises(ValueError, match="no-such-rule"):
        advise([snap], only=["no-such-rule"])


def test_advise_empty_history_and_other_sequences():
    assert advise([]) == []
    snap = _busy_snapshot()
    expected = advise([snap])
    assert advise(collections.deque([snap])) == expected
    assert advise(iter([snap])) == expected
    assert advise(snap) == expected


def test_advise_uses_the_given_thresholds():
    snap = make_snap(pinned_bytes_est=200 * MIB, effective_mem_limit_bytes=LIMIT)
    assert advise([snap]) == []
    strict = Thresholds(pinned_ram_warning_fraction=0.1, pinned_ram_critical_fraction=0.15)
    assert [f.severity for f in advise([snap], strict)] == ["critical"]


def test_advise_null_snapshot_is_silent():
    assert advise([null_snap()]) == []


def test_findings_are_json_with_numeric_values():
    out = advise([_busy_snapshot()])
    assert out
    for f in out:
        assert f.severity in ("info", "warning", "critical")
        assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in f.values.values()), f
        assert Finding.from_dict(json.loads(json.dumps(f.to_dict()))) == f


def test_advise_reads_a_replayed_history():
    history = [Snapshot.from_dict(s.to_dict()) for s in _series([GIB + i * (GIB // 10) for i in range(11)])]
    assert [f.rule for f in advise(history)] == ["pinned-growth"]


def test_pinned_small_allocs_quotes_the_steady_call_not_the_first():
    import dataclasses

    from pinmon.model import ProbeMeasurement

    probe = make_probe()
    probe = dataclasses.replace(probe, measurements=probe.measurements + (
        ProbeMeasurement(kind="alloc", memory="pinned", size_bytes=4096, seconds=1.1e-3, note="first"),
        ProbeMeasurement(kind="alloc", memory="pinned", size_bytes=4096, seconds=9e-6,
                         note="steady; break_even_transfers=3")))
    snap = make_snap(processes=[make_proc(pinned_allocs_per_s=25.0, median_alloc_bytes=4096)], probe=probe)
    [f] = traced.pinned_small_allocs([snap], T)
    assert f.values["probe_alloc_seconds"] == 9e-6 and "4.0 KiB in 9.0 us" in f.advice
