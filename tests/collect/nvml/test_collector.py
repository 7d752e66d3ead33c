"""NvmlCollector against the fake NVML: static facts, link, counters, fallback, and every error path."""
import sys
import threading
import time

import pytest

from pinmon.collect.nvml import NVML_FUNCTIONS, NvmlCollector
from tests.fakes import fake_pynvml
from tests.fakes.fake_pynvml import (
    ERRORS,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_FI_DEV_PCIE_COUNT_BAD_TLP,
    NVML_FI_DEV_PCIE_COUNT_NAKS_SENT,
    NVML_FI_DEV_PCIE_COUNT_RECEIVER_ERROR,
    NVML_FI_DEV_PCIE_L0_TO_RECOVERY_COUNTER,
    NVML_FI_DEV_PCIE_REPLAY_COUNTER,
    FakeGpu,
    FakeNvml,
)
from tests.waiting import wait_until

from .helpers import collector, ticks

# --- a healthy GPU -----------------------------------------------------------------------------

def test_static_facts_link_memory_processes(no_sysfs):
    fake = FakeNvml([FakeGpu(index=0, gen=4, width=8, processes=[(4242, 2 << 30), (77, None)])])
    c = collector(fake, no_sysfs)
    assert c.available and c.reason is None
    (g,), notices = c.read()
    assert notices == ()
    assert (g.index, g.name, g.uuid, g.pci_bus_id) == (
        0, "NVIDIA H200", "GPU-00000000-0000-0000-0000-000000000000", "00000000:17:00.0")
    assert g.cpu_affinity == "0-15,32-47"
    assert g.numa_node is None  # NotSupported in NVML and no sysfs here
    assert (g.link.gen, g.link.width, g.link.gen_max, g.link.width_max) == (4, 8, 5, 16)
    assert g.link.theoretical_bytes_per_s == pytest.approx(16e9 * 8 * 128 / 130 / 8)
    assert g.link.max_theoretical_bytes_per_s == pytest.approx(63.0e9, rel=1e-3)
    assert (g.memory_total_bytes, g.memory_used_bytes) == (150_754_820_096, 1 << 30)
    assert [(p.pid, p.gpu_memory_bytes) for p in g.processes] == [(4242, 2 << 30), (77, None)]
    assert not g.lost and g.notices == ()
    c.close()


def test_a_cpu_affinity_that_is_not_a_mask_is_no_affinity(no_sysfs):
    # Before, format_cpu_list raised on it and the collector could not start.
    fake = FakeNvml(1)
    fake.nvmlDeviceGetCpuAffinity = lambda handle, words: "0-15"
    c = collector(fake, no_sysfs)
    (g,), notices = c.read()
    assert c.available and g.cpu_affinity is None and g.name == "NVIDIA H200" and notices == ()
    c.close()


def test_a_pid_listed_twice_is_one_process():
    fake = FakeNvml([FakeGpu(processes=[(5, 100), (5, 50), (6, None), (6, 10)])])
    c = collector(fake, "/nonexistent")
    (g,), _ = c.read()
    assert [(p.pid, p.gpu_memory_bytes) for p in g.processes] == [(5, 150), (6, 10)]


def test_numa_node_from_sysfs_before_nvml(tmp_path):
    dev = tmp_path / "bus/pci/devices/0000:17:00.0"
    dev.mkdir(parents=True)
    (dev / "numa_node").write_text("1\n")
    fake = FakeNvml([FakeGpu(numa_node=3)])
    (g,), _ = collector(fake, str(tmp_path)).read()
    assert g.numa_node == 1
    assert fake.called("nvmlDeviceGetNumaNodeId") == 0


def test_numa_node_from_nvml_when_sysfs_does_not_know(tmp_path):
    dev = tmp_path / "bus/pci/devices/0000:17:00.0"
    dev.mkdir(parents=True)
    (dev / "numa_node").write_text("-1\n")
    (g,), _ = collector(FakeNvml([FakeGpu(numa_node=3)]), str(tmp_path)).read()
    assert g.numa_node == 3


def test_counters_give_exact_link_bytes_and_rates(no_sysfs):
    fake = FakeNvml(1, rx_bytes_per_s=55e9, tx_bytes_per_s=3e9)
    c = collector(fake, no_sysfs)
    ticks(fake, c, 64)  # 1 s, the RX counter wraps 12 times
    (g,), notices = c.read()
    p = g.pcie
    assert p.method == "counters" and notices == ()
    assert (p.rx_bytes, p.tx_bytes, p.interval_s) == (55_000_000_000, 3_000_000_000, 1.0)
    assert (p.rx_bytes_per_s, p.tx_bytes_per_s) == (55e9, 3e9)
    ticks(fake, c, 32)
    (g,), _ = c.read()
    assert (g.pcie.rx_bytes, g.pcie.interval_s) == (27_500_000_000, 0.5)


def test_counters_without_a_new_read_give_no_rate(no_sysfs):
    c = collector(FakeNvml(1, rx_bytes_per_s=1e9), no_sysfs)
    (g,), _ = c.read()
    assert g.pcie.method == "counters" and g.pcie.rx_bytes_per_s is None and g.pcie.rx_bytes is None


def test_slow_counter_reads_add_a_wrap_notice(no_sysfs):
    fake = FakeNvml(1, rx_bytes_per_s=55e9)
    c = collector(fake, no_sysfs)
    ticks(fake, c, 8, dt_s=0.125)
    (g,), notices = c.read()
    assert notices == (
        "GPU 0: the PCIe counter reads fell behind (a 125 ms gap; the 32-bit counters can wrap"
        " in 68 ms at this link's speed), so link bytes may be undercounted",)
    assert g.notices == notices


def test_sampled_fallback(no_sysfs):
    fake = FakeNvml(1, byte_counters_return=NVML_ERROR_NOT_SUPPORTED, rx_bytes_per_s=20e9,
                    tx_bytes_per_s=1e9)
    c = collector(fake, no_sysfs)
    (g,), _ = c.read()
    assert g.pcie.method == "sampled" and g.pcie.rx_bytes_per_s is None  # no sample yet
    c.sampler.refresh_sampled()
    (g,), notices = c.read()
    assert (g.pcie.method, g.pcie.rx_bytes_per_s, g.pcie.tx_bytes_per_s) == ("sampled", 20e9, 1e9)
    assert g.pcie.rx_bytes is None and notices == ()


def test_read_never_runs_the_slow_sampled_call_on_the_callers_thread(no_sysfs):
    fake = FakeNvml(2, byte_counters_return=NVML_ERROR_NOT_SUPPORTED, rx_bytes_per_s=5e9)
    c = NvmlCollector(fake, sysfs_root=no_sysfs)  # with its threads
    c.start()
    try:
        for _ in range(3):
            c.read()
            assert c.sampler.wait_idle(5)
        (g0, g1), _ = c.read()
        assert g0.pcie.rx_bytes_per_s == 5e9 == g1.pcie.rx_bytes_per_s
        main = threading.get_ident()
        sampled = [t for f, _, t in fake.calls if f == "nvmlDeviceGetPcieThroughput"]
        assert sampled and main not in sampled
    finally:
        c.close()


def test_no_traffic_reading_at_all(no_sysfs):
    fake = FakeNvml(1, byte_counters_return=NVML_ERROR_NOT_SUPPORTED, throughput_supported=False)
    c = collector(fake, no_sysfs)
    c.sampler.refresh_sampled()
    (g,), notices = c.read()
    assert g.pcie.method is None and g.pcie.rx_bytes_per_s is None and notices == ()


def test_pcie_error_deltas(no_sysfs):
    fake = FakeNvml(1)
    c = collector(fake, no_sysfs)
    counters = fake.gpus[0].error_counters
    counters[NVML_FI_DEV_PCIE_REPLAY_COUNTER] += 2
    counters[NVML_FI_DEV_PCIE_L0_TO_RECOVERY_COUNTER] += 5
    counters[NVML_FI_DEV_PCIE_COUNT_BAD_TLP] += 1
    counters[NVML_FI_DEV_PCIE_COUNT_NAKS_SENT] += 3
    counters[NVML_FI_DEV_PCIE_COUNT_RECEIVER_ERROR] += 4
    c.sampler.poll_errors()
    (g,), _ = c.read()
    p = g.pcie
    assert (p.replay_delta, p.recovery_delta, p.error_delta) == (2, 5, 8)
    assert p.counter_deltas["bad_tlp"] == 1 and p.counter_deltas["receiver_error"] == 4
    assert p.counter_deltas["bad_dllp"] is None  # unsupported, not zero


def test_no_error_counter_supported_gives_none(no_sysfs):
    fake = FakeNvml([FakeGpu(error_counters={})])
    (g,), _ = collector(fake, no_sysfs).read()
    assert (g.pcie.replay_delta, g.pcie.recovery_delta, g.pcie.error_delta) == (None, None, None)


# --- NVML that cannot start --------------------------------------------------------------------

@pytest.mark.parametrize("error, reason", [
    ("library_not_found", "NVML library not found (is the NVIDIA driver installed?)"),
    ("driver_not_loaded", "the NVIDIA kernel driver is not loaded"),
    ("no_permission", "no permission to use NVML (check access to /dev/nvidia*)"),
    ("uninitialized", "NVML did not initialize"),
    ("unknown", "NVML did not start (NVML: Unknown Error)"),
    ("timeout", "NVML did not start (NVML: Timeout)"),
])
def test_init_errors_make_it_unavailable(error, reason, no_sysfs):
    fake = FakeNvml(2)
    fake.fail("nvmlInit", error)
    c = collector(fake, no_sysfs)
    assert not c.available and c.reason == reason
    assert c.read() == ((), (f"no NVIDIA GPU monitoring: {reason}",))
    c.close()
    c.close()
    assert fake.called("nvmlShutdown") == 0  # never initialised, so nothing to shut down


def test_library_not_found_notice_wording(no_sysfs):
    fake = FakeNvml(1)
    fake.fail("nvmlInit", "library_not_found")
    assert collector(fake, no_sysfs).read()[1] == (
        "no NVIDIA GPU monitoring: NVML library not found (is the NVIDIA driver installed?)",)


@pytest.mark.parametrize("error", ["uninitialized", "no_permission", "unknown", "gpu_lost"])
def test_count_errors_make_it_unavailable_and_shut_down(error, no_sysfs):
    fake = FakeNvml(2)
    fake.fail("nvmlDeviceGetCount", error)
    c = collector(fake, no_sysfs)
    assert not c.available and c.reason
    assert c.read()[0] == ()
    assert fake.init_count == 0


def test_missing_bindings(monkeypatch, no_sysfs):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    c = NvmlCollector(sysfs_root=no_sysfs)
    assert c.start() is False
    assert c.read() == ((), ("no NVIDIA GPU monitoring: the NVML Python bindings are missing"
                             " (install nvidia-ml-py)",))
    c.close()


def test_zero_gpus(no_sysfs):
    fake = FakeNvml(0)
    c = collector(fake, no_sysfs)
    assert c.read() == ((), ("no NVIDIA GPU monitoring: NVML sees no GPU",))
    assert fake.init_count == 0
    c.close()


# --- per-call errors ---------------------------------------------------------------------------

READ_CALLS = {
    "nvmlDeviceGetCurrPcieLinkGeneration": lambda g: g.link.gen,
    "nvmlDeviceGetMaxPcieLinkGeneration": lambda g: g.link.gen_max,
    "nvmlDeviceGetCurrPcieLinkWidth": lambda g: g.link.width,
    "nvmlDeviceGetMaxPcieLinkWidth": lambda g: g.link.width_max,
    "nvmlDeviceGetMemoryInfo": lambda g: g.memory_total_bytes,
    "nvmlDeviceGetComputeRunningProcesses": lambda g: g.processes or None,
}
START_CALLS = {
    "nvmlDeviceGetName": lambda g: g.name,
    "nvmlDeviceGetUUID": lambda g: g.uuid,
    "nvmlDeviceGetPciInfo": lambda g: g.pci_bus_id,
    "nvmlDeviceGetCpuAffinity": lambda g: g.cpu_affinity,
}


@pytest.mark.parametrize("function", sorted(READ_CALLS))
@pytest.mark.parametrize("error", ["not_supported", "unknown", "timeout", "no_permission"])
def test_a_failing_read_call_leaves_that_value_none(function, error, no_sysfs):
    fake = FakeNvml([FakeGpu(index=0, processes=[(1, 10)]), FakeGpu(index=1, processes=[(1, 10)])])
    c = collector(fake, no_sysfs)
    fake.fail(function, error, gpu=0)
    (g0, g1), notices = c.read()
    assert READ_CALLS[function](g0) is None
    assert READ_CALLS[function](g1) is not None
    assert not g0.lost and g0.name == "NVIDIA H200"
    if error == "not_supported":
        assert notices == ()
    else:
        assert len(notices) == 1 and notices[0].startswith("GPU 0: NVML could not read ")
        assert f"({fake_pynvml._ERROR_TEXT[ERRORS[error]]})" in notices[0]
        assert g0.notices == notices and g1.notices == ()


def test_failures_of_one_gpu_make_one_notice(no_sysfs):
    fake = FakeNvml(1)
    c = collector(fake, no_sysfs)
    fake.fail("nvmlDeviceGetMemoryInfo", "unknown")
    fake.fail("nvmlDeviceGetCurrPcieLinkWidth", "timeout")
    _, notices = c.read()
    assert notices == ("GPU 0: NVML could not read the PCIe link width (Timeout),"
                       " memory use (Unknown Error)",)


def test_sampler_failures_are_reported_once_with_a_count(no_sysfs):
    fake = FakeNvml(1, rx_bytes_per_s=1e9)
    c = collector(fake, no_sysfs)
    fake.fail("nvmlDeviceGetFieldValues", "timeout", times=3)
    ticks(fake, c, 10)
    _, notices = c.read()
    assert notices == ("GPU 0: NVML could not read PCIe counters (Timeout, 3 times)",)
    ticks(fake, c, 10)
    assert c.read()[1] == ()


@pytest.mark.parametrize("function", sorted(START_CALLS))
@pytest.mark.parametrize("error", ["not_supported", "unknown", "no_permission"])
def test_a_failing_start_call_leaves_that_fact_none(function, error, no_sysfs):
    fake = FakeNvml(2)
    fake.fail(function, error, gpu=1)
    c = collector(fake, no_sysfs)
    (g0, g1), notices = c.read()
    assert START_CALLS[function](g1) is None and START_CALLS[function](g0) is not None
    assert len(notices) == (0 if error == "not_supported" else 1)
    # The reason a fact is missing stays visible in every snapshot.
    assert c.read()[1] == notices


@pytest.mark.parametrize("error", ["unknown", "no_permission", "timeout"])
def test_a_gpu_that_cannot_be_opened(error, no_sysfs):
    fake = FakeNvml(2)
    fake.fail("nvmlDeviceGetHandleByIndex", error, gpu=0)
    c = collector(fake, no_sysfs)
    (g0, g1), notices = c.read()
    assert g0.index == 0 and g0.name is None and not g0.lost
    assert notices == (f"GPU 0: NVML cannot open the device ({fake_pynvml._ERROR_TEXT[ERRORS[error]]})",)
    assert g1.name == "NVIDIA H200" and g1.pcie.method == "counters"


# --- lost GPUs ---------------------------------------------------------------------------------

def lost_notice(i, bus):
    return f"GPU {i} (bus {bus}) fell off the bus (NVML: GPU is lost)"


def test_gpu_lost_during_a_read_call(no_sysfs):
    fake = FakeNvml(4, rx_bytes_per_s=1e9)
    c = collector(fake, no_sysfs)
    ticks(fake, c, 4)
    fake.fail("nvmlDeviceGetMemoryInfo", "gpu_lost", gpu=3)
    gpus, notices = c.read()
    assert gpus[3].lost and gpus[3].name == "NVIDIA H200" and gpus[3].pci_bus_id == "00000000:47:00.0"
    assert notices == (lost_notice(3, "00000000:47:00.0"),) == gpus[3].notices
    assert [g.lost for g in gpus[:3]] == [False] * 3
    assert all(g.pcie.rx_bytes == 62_500_000 for g in gpus[:3])
    # It stays lost, NVML is not asked about it again, the others carry on.
    fake.clear_faults()
    n = sum(1 for _, g, _ in fake.calls if g == 3)
    ticks(fake, c, 4)
    gpus, notices = c.read()
    assert gpus[3].lost and notices == (lost_notice(3, "00000000:47:00.0"),)
    assert sum(1 for _, g, _ in fake.calls if g == 3) == n
    assert gpus[0].pcie.rx_bytes == 62_500_000


def test_gpu_lost_in_the_sampler(no_sysfs):
    fake = FakeNvml(2, rx_bytes_per_s=1e9)
    c = collector(fake, no_sysfs)
    ticks(fake, c, 4)
    fake.lose(1)
    ticks(fake, c, 4)
    (g0, g1), notices = c.read()
    assert g1.lost and notices == (lost_notice(1, "00000000:27:00.0"),)
    assert g0.pcie.rx_bytes == 125_000_000


def test_gpu_lost_at_start(no_sysfs):
    fake = FakeNvml(3)
    fake.lose(1)
    c = collector(fake, no_sysfs)
    gpus, notices = c.read()
    assert [g.lost for g in gpus] == [False, True, False]
    assert notices == ("GPU 1 fell off the bus (NVML: GPU is lost)",)  # bus id was never read


def test_gpu_lost_when_opening(no_sysfs):
    fake = FakeNvml(2)
    fake.fail("nvmlDeviceGetHandleByIndex", "gpu_lost", gpu=0)
    gpus, notices = collector(fake, no_sysfs).read()
    assert gpus[0].lost and not gpus[1].lost
    assert notices == ("GPU 0 fell off the bus (NVML: GPU is lost)",)


# --- many GPUs, life cycle ---------------------------------------------------------------------

def test_eight_gpus(no_sysfs):
    fake = FakeNvml([FakeGpu(index=i, rx_bytes_per_s=(i + 1) * 1e9) for i in range(8)])
    c = collector(fake, no_sysfs)
    ticks(fake, c, 64)
    gpus, notices = c.read()
    assert notices == ()
    assert [g.index for g in gpus] == list(range(8))
    assert [g.pcie.rx_bytes for g in gpus] == [(i + 1) * 10**9 for i in range(8)]
    assert len({g.pci_bus_id for g in gpus}) == 8


def test_close_twice_and_read_after_close(no_sysfs):
    fake = FakeNvml(1)
    c = collector(fake, no_sysfs)
    c.close()
    c.close()
    assert fake.init_count == 0 and fake.called("nvmlShutdown") == 1
    assert not c.available
    assert c.read() == ((), ("no NVIDIA GPU monitoring: the NVML collector is closed",))


def test_close_without_start_and_start_twice(no_sysfs):
    NvmlCollector(FakeNvml(1)).close()
    fake = FakeNvml(1)
    c = collector(fake, no_sysfs)
    assert c.start() is True
    assert fake.called("nvmlInit") == 1
    c.close()


def test_read_starts_on_first_use(no_sysfs):
    fake = FakeNvml(1)
    c = collector(fake, no_sysfs, start=False)
    (g,), _ = c.read()
    assert g.name == "NVIDIA H200"


def test_with_threads_close_stops_them(no_sysfs):
    fake = FakeNvml(2, rx_bytes_per_s=1e9)
    with NvmlCollector(fake, counter_hz=200.0, sysfs_root=no_sysfs) as c:
        wait_until(lambda: fake.called("nvmlDeviceGetFieldValues") >= 10, interval_s=0.005, what="ten polls")
        assert c.cpu_seconds() > 0
    n = len(fake.calls)
    time.sleep(0.03)  # not a wait: six polls' time passes, in which a thread left running would poll
    assert len(fake.calls) == n and fake.init_count == 0


def test_counter_rate_must_be_positive():
    with pytest.raises(ValueError, match="counter rate must be positive"):
        NvmlCollector(FakeNvml(1), counter_hz=0)


# --- fault matrix: every NVML call x every error, nothing raises --------------------------------

GLOBAL_CALLS = ("nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount")
# Called only when the collector closes: nothing a read could show.
AT_CLOSE = ("nvmlShutdown", "nvmlGpmSampleFree")


@pytest.mark.parametrize("function", NVML_FUNCTIONS)
@pytest.mark.parametrize("error", sorted(ERRORS))
def test_fault_matrix_never_raises(function, error, no_sysfs):
    # One GPU on each method: 0 byte counters, 1 sampled throughput, 2 GPM.
    fake = FakeNvml(3, rx_bytes_per_s=1e9)
    fake.gpus[1].byte_counters_return = NVML_ERROR_NOT_SUPPORTED
    fake.gpus[2].gpm_supported = True
    faulted = (1 if function == "nvmlDeviceGetPcieThroughput" else
               2 if function.startswith("nvmlGpm") else 0)
    # A sample buffer is allocated for no GPU in particular: that fault hits every caller.
    inject_all = function in GLOBAL_CALLS or function == "nvmlGpmSampleAlloc"
    fake.fail(function, error, gpu=None if inject_all else faulted)
    c = collector(fake, no_sysfs)
    if c.available:
        ticks(fake, c, 70)
        c.sampler.refresh_sampled()
    gpus, notices = c.read()
    assert all(isinstance(n, str) and n for n in notices)
    if function in GLOBAL_CALLS:
        assert c.available == (function == "nvmlShutdown")
    else:
        assert len(gpus) == 3
        assert not any(g.lost for g in gpus if g.index != faulted)
        lost = error == "gpu_lost" and function not in AT_CLOSE
        assert gpus[faulted].lost == lost
        # NotSupported is silent, except for a GPU that cannot even be opened.
        silent = (error == "not_supported" and function != "nvmlDeviceGetHandleByIndex") \
            or function in AT_CLOSE
        assert bool(gpus[faulted].notices) == (not silent)
        if function.startswith("nvmlGpm") and not lost:
            # GPM failing from the start: the GPU's bytes come from its byte counters instead.
            early = function in ("nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleGet")
            assert gpus[faulted].pcie.method == ("counters" if early else "gpm")
    c.close()
    c.close()
    assert fake.gpm_samples_alive == 0 or function == "nvmlGpmSampleFree"


def test_counter_rate_follows_the_fastest_link(no_sysfs):
    from pinmon.collect.nvml.counters import counter_hz_for_link

    # Gen5 x16 wraps the 32-bit byte counter every 68 ms at full rate: two reads per wrap.
    assert counter_hz_for_link(63.015e9) == pytest.approx(29.3, abs=0.1)
    assert counter_hz_for_link(31.5e9) == pytest.approx(14.7, abs=0.1)
    assert counter_hz_for_link(None) == 50.0 and counter_hz_for_link(1e6) == 5.0
    slow = collector(FakeNvml([FakeGpu(gen_max=4, width_max=16), FakeGpu(gen_max=3, width_max=16)]), no_sysfs)
    assert slow.counter_hz == pytest.approx(14.7, abs=0.1)
    assert slow.sampler.period_s == pytest.approx(1 / slow.counter_hz)
    mixed = collector(FakeNvml([FakeGpu(gen_max=3, width_max=16), FakeGpu(gen_max=5, width_max=16)]), no_sysfs)
    assert mixed.counter_hz == pytest.approx(29.3, abs=0.1)
    assert collector(FakeNvml(1), no_sysfs, counter_hz=200.0).counter_hz == 200.0
    for c in (slow, mixed):
        c.close()


def test_the_link_maximum_is_asked_once_and_again_only_after_a_failure(no_sysfs):
    fake = FakeNvml([FakeGpu(), FakeGpu()])
    c = collector(fake, no_sysfs)
    fake.fail("nvmlDeviceGetMaxPcieLinkWidth", "unknown", gpu=1, times=1)
    before = {g: fake.called("nvmlDeviceGetMaxPcieLinkWidth", gpu=g) for g in (0, 1)}
    gen_before = fake.called("nvmlDeviceGetMaxPcieLinkGeneration")
    cur_before = fake.called("nvmlDeviceGetCurrPcieLinkGeneration")
    first, _ = c.read()
    assert first[1].link.width_max is None  # the failed read: n/a, and asked again
    for _ in range(3):
        gpus, _ = c.read()
    assert [g.link.gen_max for g in gpus] == [5, 5] and [g.link.width_max for g in gpus] == [16, 16]
    assert fake.called("nvmlDeviceGetMaxPcieLinkGeneration") - gen_before == 2  # once per GPU
    assert fake.called("nvmlDeviceGetMaxPcieLinkWidth", gpu=0) - before[0] == 1
    assert fake.called("nvmlDeviceGetMaxPcieLinkWidth", gpu=1) - before[1] == 2
    assert fake.called("nvmlDeviceGetCurrPcieLinkGeneration") - cur_before == 8  # what moves: every read


def test_the_link_width_is_read_again_after_its_time_or_when_the_generation_moves(no_sysfs):
    from pinmon.collect.nvml.gpus import LINK_WIDTH_TTL_S

    fake = FakeNvml(1)
    c = collector(fake, no_sysfs)
    width = "nvmlDeviceGetCurrPcieLinkWidth"
    assert c.read()[0][0].link.width == 16 and fake.called(width) == 1
    fake.gpus[0].width = 8  # retrained narrower, the generation as it was
    fake.advance(1.0)
    assert c.read()[0][0].link.width == 16 and fake.called(width) == 1  # kept: no call
    fake.advance(LINK_WIDTH_TTL_S)
    assert c.read()[0][0].link.width == 8 and fake.called(width) == 2  # its time is up
    fake.gpus[0].width, fake.gpus[0].gen = 4, fake.gpus[0].gen - 1
    fake.advance(1.0)
    link = c.read()[0][0].link
    assert (link.width, fake.called(width)) == (4, 3)  # the generation moved: read at once
    c.close()


def test_a_failed_width_read_is_tried_again_at_the_next_snapshot(no_sysfs):
    fake = FakeNvml(1)
    c = collector(fake, no_sysfs)
    fake.fail("nvmlDeviceGetCurrPcieLinkWidth", "timeout", times=1)
    assert c.read()[0][0].link.width is None
    fake.advance(1.0)
    assert c.read()[0][0].link.width == 16
    c.close()
