"""The NVML call wrapper: it never raises, its failures say what they mean, the functions pinmon
calls are the ones the fake implements and pynvml has, failures are counted and handed out once."""
import pytest

from pinmon.collect.nvml import NVML_FUNCTIONS, call_nvml
from pinmon.collect.nvml.call import FailureLog, NvmlFailure, failure_notice
from tests.fakes import fake_pynvml
from tests.fakes.fake_pynvml import NVML_ERROR_NOT_SUPPORTED, FakeNvml

from .helpers import collector, ticks


def test_call_nvml_never_raises():
    fake = FakeNvml(1)
    assert call_nvml(fake, "nvmlInit") == (None, None)
    value, failure = call_nvml(fake, "nvmlDeviceGetNoSuchThing")
    assert value is None and failure.not_supported
    fake.fail("nvmlDeviceGetCount", "gpu_lost")
    _, failure = call_nvml(fake, "nvmlDeviceGetCount")
    assert failure.gpu_lost and failure.message == "GPU is lost" and failure.code == 15


def test_the_fake_implements_exactly_the_functions_the_collector_calls():
    assert set(FakeNvml.CALLED_FUNCTIONS) == set(NVML_FUNCTIONS)


def test_names_and_constants_exist_in_the_real_pynvml():
    pynvml = pytest.importorskip("pynvml")
    for name in NVML_FUNCTIONS:
        assert callable(getattr(pynvml, name)), name
    for name in fake_pynvml.CONSTANT_NAMES:
        assert getattr(pynvml, name) == getattr(fake_pynvml, name), name
    for name in fake_pynvml.ERROR_CLASSES:
        assert hasattr(pynvml, name), name


def test_every_recorded_call_is_a_listed_function(no_sysfs):
    fake = FakeNvml(2, byte_counters_return=NVML_ERROR_NOT_SUPPORTED)
    c = collector(fake, no_sysfs)
    ticks(fake, c, 70)
    c.sampler.refresh_sampled()
    c.read()
    c.close()
    assert {f for f, _, _ in fake.calls} <= set(NVML_FUNCTIONS)


def test_failure_notice_words_each_function_once_with_its_count():
    unknown = NvmlFailure("nvmlDeviceGetMemoryInfo", 999, "Unknown Error")
    timeout = NvmlFailure("nvmlDeviceGetPcieThroughput", 10, "Timeout")
    text = failure_notice(3, [unknown, timeout, unknown], {"nvmlDeviceGetPcieThroughput": 4})
    assert text == "GPU 3: NVML could not read memory use (Unknown Error), PCIe throughput (Timeout, 4 times)"
    assert failure_notice(0, [NvmlFailure("nvmlNew", None, "x")]) == "GPU 0: NVML could not read nvmlNew (x)"


def test_failure_log_counts_hands_out_once_and_discounts():
    log = FailureLog()
    assert not log and log.drain() == []
    first, later = NvmlFailure("nvmlDeviceGetFieldValues", 999, "a"), NvmlFailure("nvmlDeviceGetFieldValues", 999, "b")
    other = NvmlFailure("nvmlGpmSampleGet", 999, "c")
    for f in (first, later, other, other):
        log.record(f)
    assert log.items() == [(later, 2), (other, 2)]  # the latest failure of each function
    log.discount([(other, 2), (later, 1)])
    assert log.drain() == [(later, 1)]
    assert not log
