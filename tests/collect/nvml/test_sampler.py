"""The PCIe sampler against the fake NVML: exact bytes over wraps, error counters, fallback, threads, faults."""
import threading
import time

import pytest

from pinmon.collect.nvml import call_nvml
from pinmon.collect.nvml.sampler import PcieSampler
from tests.fakes.fake_pynvml import (
    NVML_FI_DEV_PCIE_COUNT_BAD_TLP,
    NVML_FI_DEV_PCIE_COUNT_NAKS_SENT,
    NVML_FI_DEV_PCIE_L0_TO_RECOVERY_COUNTER,
    NVML_FI_DEV_PCIE_REPLAY_COUNTER,
    FakeHandle,
    FakeNvml,
)
from tests.waiting import wait_until

# 1/64 s is exact in binary, so intervals compare exactly; at 50 Hz the real period is 20 ms.
TICK_S = 1 / 64
WRAP = 1 << 32


def make(n_gpus=1, start=True, **gpu):
    fake = FakeNvml(n_gpus, **gpu)
    fake.nvmlInit()
    # Error counters every second (the collector's period is 5 s) keep these runs short.
    sampler = PcieSampler(fake, [(i, FakeHandle(i)) for i in range(n_gpus)], 64.0, call=call_nvml,
                          clock=fake.clock, error_period_s=1.0)
    if start:
        sampler.start(background=False)
    return fake, sampler


def run_ticks(fake, sampler, n, dt_s=TICK_S):
    for _ in range(n):
        fake.advance(dt_s)
        sampler.poll_once()


# --- byte counters through the sampler ----------------------------------------------------------

def test_many_wraps_at_55_gb_per_s_sampled_fast_enough_are_exact():
    fake, s = make(rx_bytes_per_s=55e9, tx_bytes_per_s=12e9)
    assert s.method(0) == "counters"
    run_ticks(fake, s, 128)  # 2 s: the RX counter wraps 25 times
    rx, tx, interval_s = s.take(0)
    assert (rx, tx, interval_s) == (110_000_000_000, 24_000_000_000, 2.0)
    assert rx == fake.gpus[0].rx_total


def test_take_is_since_the_previous_take():
    fake, s = make(rx_bytes_per_s=1e9)
    run_ticks(fake, s, 64)
    assert s.take(0)[0] == 1_000_000_000
    fake.gpus[0].rx_bytes_per_s = 4e9
    run_ticks(fake, s, 32)
    assert s.take(0) == (2_000_000_000, 0, 0.5)


def test_take_without_a_new_read_is_none():
    fake, s = make(rx_bytes_per_s=1e9)
    assert s.take(0) is None  # only the baseline read so far
    run_ticks(fake, s, 1)
    assert s.take(0) is not None
    assert s.take(0) is None


def test_interval_is_between_counter_reads_not_between_takes():
    fake, s = make(rx_bytes_per_s=1e9)
    run_ticks(fake, s, 64)
    fake.advance(0.5)  # time passes with no read: those bytes belong to the next interval
    assert s.take(0) == (1_000_000_000, 0, 1.0)
    s.poll_once()
    assert s.take(0) == (500_000_000, 0, 0.5)


def test_start_near_the_top_of_32_bits():
    fake, s = make(start=False, rx_total=WRAP - 1000, rx_bytes_per_s=64_000)
    s.start(background=False)
    run_ticks(fake, s, 1)
    assert s.take(0)[0] == 1000  # crossed 2**32 -> 0 between the two reads


def test_reads_too_slow_miss_wraps_and_the_gap_says_so():
    fake, s = make(rx_bytes_per_s=55e9)
    run_ticks(fake, s, 10, dt_s=0.125)  # 6.9e9 bytes per gap: more than one wrap each time
    rx, _, _interval_s = s.take(0)
    assert rx < fake.gpus[0].rx_total  # lost: this is why the sampler runs at 50 Hz
    assert s.wrap_gap_s(0) == 0.125 > WRAP / 63e9


def test_fast_reads_report_a_short_gap():
    fake, s = make(rx_bytes_per_s=55e9)
    run_ticks(fake, s, 10)
    s.take(0)
    assert s.wrap_gap_s(0) == TICK_S


def test_64_bit_counters_need_no_unwrap_and_have_no_wrap_gap():
    fake, s = make(counter_bits=64, rx_total=10 * WRAP, rx_bytes_per_s=55e9)
    run_ticks(fake, s, 3, dt_s=0.5)
    assert s.take(0)[0] == 82_500_000_000
    assert s.wrap_gap_s(0) is None


def test_a_failed_read_is_caught_up_by_the_next():
    fake, s = make(rx_bytes_per_s=1e9)
    fake.fail("nvmlDeviceGetFieldValues", "timeout", gpu=0, times=2)
    run_ticks(fake, s, 64)
    assert s.take(0) == (1_000_000_000, 0, 1.0)
    (failure, count), = s.drain_failures(0)
    assert failure.function == "nvmlDeviceGetFieldValues" and failure.message == "Timeout"
    assert count == 2
    assert s.drain_failures(0) == []


def test_not_supported_is_not_a_failure():
    fake, s = make(rx_bytes_per_s=1e9)
    fake.fail("nvmlDeviceGetFieldValues", "not_supported", gpu=0, times=1)
    run_ticks(fake, s, 2)
    assert s.drain_failures(0) == []


# --- support detection and the sampled fallback ------------------------------------------------

def test_unsupported_byte_fields_fall_back_to_sampled():
    from tests.fakes.fake_pynvml import NVML_ERROR_NOT_SUPPORTED
    _fake, s = make(byte_counters_return=NVML_ERROR_NOT_SUPPORTED, rx_bytes_per_s=55e9,
                   tx_bytes_per_s=2e9)
    assert s.method(0) == "sampled"
    assert s.take(0) is None
    assert s.sampled(0) is None  # nothing sampled yet
    s.refresh_sampled()
    assert s.sampled(0) == (55e9, 2e9)  # KB/s x 1000


@pytest.mark.parametrize("error", ["not_supported", "no_permission", "unknown", "timeout"])
def test_byte_field_call_failing_at_start_falls_back_to_sampled(error):
    fake, s = make(start=False)
    fake.fail("nvmlDeviceGetFieldValues", error, gpu=0, times=1)
    s.start(background=False)
    assert s.method(0) == "sampled"
    assert bool(s.drain_failures(0)) == (error != "not_supported")


def test_no_byte_fields_and_no_throughput_means_no_method():
    from tests.fakes.fake_pynvml import NVML_ERROR_NOT_SUPPORTED
    _fake, s = make(byte_counters_return=NVML_ERROR_NOT_SUPPORTED, throughput_supported=False)
    s.refresh_sampled()
    assert s.method(0) is None
    assert s.sampled(0) is None
    assert s.drain_failures(0) == []


def test_a_transient_throughput_error_keeps_the_method():
    from tests.fakes.fake_pynvml import NVML_ERROR_NOT_SUPPORTED
    fake, s = make(byte_counters_return=NVML_ERROR_NOT_SUPPORTED, rx_bytes_per_s=1e9)
    fake.fail("nvmlDeviceGetPcieThroughput", "unknown", gpu=0, times=2)
    s.refresh_sampled()
    assert s.method(0) == "sampled" and s.sampled(0) is None
    s.refresh_sampled()
    assert s.sampled(0) == (1e9, 0.0)


def test_eight_gpus_are_sampled_in_parallel():
    from tests.fakes.fake_pynvml import NVML_ERROR_NOT_SUPPORTED
    fake, s = make(8, start=False, byte_counters_return=NVML_ERROR_NOT_SUPPORTED, rx_bytes_per_s=3e9)
    # Each RX sample waits until all eight are inside the call at once: only parallel calls pass.
    barrier = threading.Barrier(8, timeout=5)
    fake.throughput_hook = lambda gpu, counter: barrier.wait() if counter == 1 else None
    s.start(background=True)  # start() queues the first sample of each GPU
    try:
        assert s.wait_idle(10)
        assert [s.sampled(i) for i in range(8)] == [(3e9, 0.0)] * 8
        assert all(s.drain_failures(i) == [] for i in range(8))
        main = threading.get_ident()
        assert all(t != main for f, _, t in fake.calls if f == "nvmlDeviceGetPcieThroughput")
    finally:
        s.stop()


def test_request_sampled_does_not_queue_a_gpu_twice():
    from tests.fakes.fake_pynvml import NVML_ERROR_NOT_SUPPORTED
    fake, s = make(start=False, byte_counters_return=NVML_ERROR_NOT_SUPPORTED)
    release = threading.Event()
    fake.throughput_hook = lambda gpu, counter: release.wait(5)
    s.start(background=True)
    try:
        for _ in range(5):
            s.request_sampled()
        release.set()
        assert s.wait_idle(5)
        assert fake.called("nvmlDeviceGetPcieThroughput") == 2  # one RX + one TX
    finally:
        s.stop()


# --- error counters ----------------------------------------------------------------------------

def test_error_counters_are_deltas_since_start_and_unsupported_is_none():
    fake, s = make()
    assert s.error_deltas(0)["l0_to_recovery"] == 0  # 791 at start on the H200 box: not new
    counters = fake.gpus[0].error_counters
    counters[NVML_FI_DEV_PCIE_L0_TO_RECOVERY_COUNTER] += 3
    counters[NVML_FI_DEV_PCIE_COUNT_BAD_TLP] += 2
    s.poll_errors()
    d = s.error_deltas(0)
    assert d["l0_to_recovery"] == 3 and d["bad_tlp"] == 2 and d["replay"] == 0
    assert d["bad_dllp"] is None and d["naks_received"] is None  # NotSupported, not 0


def test_a_counter_going_back_is_a_reset():
    fake, s = make()
    counters = fake.gpus[0].error_counters
    counters[NVML_FI_DEV_PCIE_COUNT_NAKS_SENT] = 20  # 16 at start
    s.poll_errors()
    counters[NVML_FI_DEV_PCIE_COUNT_NAKS_SENT] = 2
    s.poll_errors()
    assert s.error_deltas(0)["naks_sent"] == 6


def _error_reads(fake, gpu=None):
    """Field value calls that asked for the error counters (all of them in the one call)."""
    return sum(1 for g, ids in fake.field_requests
               if NVML_FI_DEV_PCIE_REPLAY_COUNTER in ids and (gpu is None or g == gpu))


def test_error_counters_read_in_one_call_about_once_a_second_one_gpu_per_tick():
    fake, s = make(4)
    error_requests = [ids for _, ids in fake.field_requests if NVML_FI_DEV_PCIE_REPLAY_COUNTER in ids]
    assert all(NVML_FI_DEV_PCIE_COUNT_BAD_TLP in ids for ids in error_requests)
    before = [_error_reads(fake, g) for g in range(4)]
    for _ in range(64 * 3):  # 3 s
        n = _error_reads(fake)
        fake.advance(TICK_S)
        s.poll_once()
        assert _error_reads(fake) - n <= 1  # never all GPUs' ~4 ms reads in one tick
    reads = [_error_reads(fake, g) - before[g] for g in range(4)]
    assert all(2 <= r <= 3 for r in reads) and sum(reads) >= 9  # ~1 Hz each, staggered
    fake.gpus[2].error_counters[NVML_FI_DEV_PCIE_REPLAY_COUNTER] = 4
    run_ticks(fake, s, 64)
    assert s.error_deltas(2)["replay"] == 4


def test_whole_error_call_unsupported_gives_none_fields():
    _fake, s = make(start=False, error_counters={})
    s.start(background=False)
    assert s.error_deltas(0) and all(v is None for v in s.error_deltas(0).values())


# --- lost GPUs ---------------------------------------------------------------------------------

def test_gpu_lost_mid_run_is_marked_and_the_others_keep_going():
    fake, s = make(3, rx_bytes_per_s=1e9)
    run_ticks(fake, s, 10)
    fake.lose(1)
    run_ticks(fake, s, 54)
    assert s.lost(1) is not None and s.lost(1).gpu_lost
    assert s.method(1) is None and s.take(1) is None
    assert s.take(0) == (1_000_000_000, 0, 1.0)
    assert s.take(2) == (1_000_000_000, 0, 1.0)
    calls_for_lost = fake.called("nvmlDeviceGetFieldValues", gpu=1)
    run_ticks(fake, s, 64)
    assert fake.called("nvmlDeviceGetFieldValues", gpu=1) == calls_for_lost  # not asked again


def test_gpu_lost_at_start():
    fake, s = make(2, start=False)
    fake.lose(0)
    s.start(background=False)
    assert s.lost(0) is not None and s.method(0) is None
    assert s.method(1) == "counters"


def test_mark_lost_stops_polling():
    fake, s = make(2)
    s.mark_lost(0, object())
    before = fake.called("nvmlDeviceGetFieldValues", gpu=0)
    run_ticks(fake, s, 64)
    assert fake.called("nvmlDeviceGetFieldValues", gpu=0) == before


# --- the thread --------------------------------------------------------------------------------

def test_background_thread_polls_and_stops():
    fake = FakeNvml(1, rx_bytes_per_s=1e9)
    fake.nvmlInit()
    s = PcieSampler(fake, [(0, FakeHandle(0))], 200.0, call=call_nvml)
    s.start()
    try:
        wait_until(lambda: fake.called("nvmlDeviceGetFieldValues") >= 6, interval_s=0.005, what="six polls")
        assert s.cpu_seconds() > 0
    finally:
        s.stop()
    s.stop()  # idempotent
    n = fake.called("nvmlDeviceGetFieldValues")
    time.sleep(0.02)  # not a wait: four polls' time passes, in which a thread left running would poll
    assert fake.called("nvmlDeviceGetFieldValues") == n


def test_thread_survives_an_internal_error():
    fake = FakeNvml(1)
    fake.nvmlInit()
    s = PcieSampler(fake, [(0, FakeHandle(0))], 200.0, call=call_nvml)
    ticks = []

    def broken_poll():
        ticks.append(1)
        raise RuntimeError("boom")

    s.poll_once = broken_poll
    s.start()
    try:
        wait_until(lambda: len(ticks) >= 3, interval_s=0.005, what="ticks after the first error")
        assert s.drain_notices() == ["PCIe counter sampler: internal error RuntimeError: boom"]
    finally:
        s.stop()


def test_a_non_nvml_exception_from_nvml_is_a_failure_not_a_crash():
    fake, s = make(rx_bytes_per_s=1e9)

    def broken(handle, ids):
        raise OSError("ctypes went wrong")

    fake.nvmlDeviceGetFieldValues = broken
    run_ticks(fake, s, 3)
    (failure, count), = s.drain_failures(0)
    assert failure.code is None and "OSError" in failure.message and count >= 3


def test_rate_must_be_positive():
    with pytest.raises(ValueError, match="counter rate must be positive"):
        PcieSampler(FakeNvml(1), [], 0)
