"""The sampled throughput fallback on its own: kB to bytes, unsupported, one sample in flight per GPU,
off the caller's thread."""
import threading

from pinmon.collect.nvml.call import NvmlFailure
from pinmon.collect.nvml.sampled import ThroughputSampler

NOT_SUPPORTED = NvmlFailure("nvmlDeviceGetPcieThroughput", 3, "Not Supported")


def make(answers, lost=lambda gpu: False, gate=None):
    """A sampler whose throughput calls answer from ``answers[gpu]``: [(value, failure) for RX, for TX];
    each call waits for ``gate`` first when one is given."""
    landed, calls = [], []

    def call(gpu, name, counter):
        if gate is not None:
            gate.wait(5)
        calls.append((gpu, counter, threading.current_thread().name))
        return answers[gpu][len([c for c in calls if c[0] == gpu]) - 1]

    s = ThroughputSampler(None, call, lost, lambda *a: landed.append(a), workers=2)
    return s, landed, calls


def test_kb_are_thousands_of_bytes_and_rx_is_asked_first():
    s, landed, calls = make({0: [(59_400_000, None), (1_000, None)]})
    s.sample_now(0)
    assert landed == [(0, (59.4e9, 1e6), False)]
    assert [c[1] for c in calls] == [1, 0]  # NVML_PCIE_UTIL_RX_BYTES, then TX


def test_both_directions_unsupported_says_so_one_failed_does_not():
    s, landed, _ = make({0: [(None, NOT_SUPPORTED), (None, NOT_SUPPORTED)],
                         1: [(None, NvmlFailure("x", 999, "Unknown")), (None, NOT_SUPPORTED)],
                         2: [(None, NOT_SUPPORTED), (5, None)]})
    for gpu in (0, 1, 2):
        s.sample_now(gpu)
    assert landed == [(0, None, True), (1, None, False), (2, (None, 5000.0), False)]


def test_a_lost_gpu_is_not_asked_for_its_tx():
    s, landed, calls = make({0: [(None, NvmlFailure("x", 15, "GPU is lost"))]}, lost=lambda gpu: True)
    s.sample_now(0)
    assert len(calls) == 1 and landed == [(0, None, False)]


def test_an_answer_that_is_not_a_count_is_no_reading():
    # Before, float() of it raised in the worker and nothing landed for that GPU.
    s, landed, _ = make({0: [("lots", None), (1_000, None)], 1: [(-5, None), (2.5, None)]})
    s.sample_now(0)
    s.sample_now(1)
    assert landed == [(0, (None, 1e6), False), (1, None, False)]


def test_requests_run_on_workers_once_per_gpu_in_flight():
    release = threading.Event()
    s, landed, calls = make({0: [(1, None), (1, None)], 1: [(2, None), (2, None)]}, gate=release)
    s.request([0])  # not started: nothing runs
    s.start(2)
    try:
        s.request([0, 1])
        s.request([0, 1])  # both still in flight: not queued again
        release.set()
        assert s.wait_idle(5)
        assert sorted(g for g, _, _ in landed) == [0, 1] and len(calls) == 4
        assert all(name.startswith("pinmon-pcie-sampled") for _, _, name in calls)
    finally:
        s.stop(2)
    assert not s.running
