"""PCIe bytes from GPM samples: exact chained intervals, failures carried over, fallback, cost."""
from types import SimpleNamespace

import pytest

from pinmon.collect.nvml import NvmlCollector, call_nvml
from pinmon.collect.nvml.gpm import MIN_INTERVAL_S, GpmReader
from pinmon.collect.nvml.sampler import GPM_GIVE_UP_S
from tests.fakes.fake_pynvml import NVML_FI_DEV_PCIE_COUNT_RX_BYTES, NVML_SUCCESS, FakeGpu, FakeNvml
from tests.waiting import wait_until

from .helpers import collector


def gpm_box(**kw):
    return FakeNvml([FakeGpu(index=0, gpm_supported=True, rx_bytes_per_s=5e9, tx_bytes_per_s=1.25e9, **kw)])


def byte_field_reads(fake):
    return sum(1 for _, ids in fake.field_requests if NVML_FI_DEV_PCIE_COUNT_RX_BYTES in ids)


def test_gpm_gives_the_exact_bytes_of_each_interval_without_reading_the_byte_counters(no_sysfs):
    fake = gpm_box()
    c = collector(fake, no_sysfs)
    reads = []
    for dt in (1.0, 0.5, 2.0):
        fake.advance(dt)
        c.sampler.poll_once()  # the thread's tick: error counters only on a GPM GPU
        (g,), _ = c.read()
        reads.append(g.pcie)
    c.close()
    for p, dt in zip(reads, (1.0, 0.5, 2.0)):
        assert p.method == "gpm"
        assert p.interval_s == pytest.approx(dt)
        assert p.rx_bytes == round(5e9 * dt) and p.tx_bytes == round(1.25e9 * dt)
        assert p.rx_bytes_per_s == pytest.approx(5e9) and p.tx_bytes_per_s == pytest.approx(1.25e9)
    assert byte_field_reads(fake) == 0
    assert fake.gpm_samples_alive == 0  # both sample buffers freed on close


def test_a_failed_sample_loses_no_bytes_they_join_the_next_reading(no_sysfs):
    fake = gpm_box()
    c = collector(fake, no_sysfs)
    fake.advance(1.0)
    c.read()
    fake.fail("nvmlGpmSampleGet", "timeout", times=1)
    fake.advance(1.0)
    (failed,), notices = c.read()
    assert failed.pcie.method == "gpm" and failed.pcie.rx_bytes is None
    assert any("GPU 0" in n and "Timeout" in n for n in notices)
    fake.advance(1.0)
    (after,), notices = c.read()
    assert after.pcie.rx_bytes == round(5e9 * 2.0) and after.pcie.interval_s == pytest.approx(2.0)
    assert after.pcie.rx_bytes_per_s == pytest.approx(5e9) and notices == ()
    c.close()


def test_a_failed_metrics_call_also_carries_its_bytes_over(no_sysfs):
    fake = gpm_box()
    c = collector(fake, no_sysfs)
    fake.fail("nvmlGpmMetricsGet", "unknown", times=1)
    fake.advance(1.0)
    (failed,), _ = c.read()
    fake.advance(0.25)
    (after,), _ = c.read()
    assert failed.pcie.rx_bytes is None and after.pcie.rx_bytes == round(5e9 * 1.25)
    c.close()


def test_readings_closer_than_gpms_refresh_wait_for_the_next_one(no_sysfs):
    fake = gpm_box()
    c = collector(fake, no_sysfs)
    fake.advance(MIN_INTERVAL_S / 2)
    (early,), notices = c.read()
    assert early.pcie.method == "gpm" and early.pcie.rx_bytes is None and notices == ()
    fake.advance(MIN_INTERVAL_S)
    (later,), _ = c.read()
    assert later.pcie.rx_bytes == round(5e9 * MIN_INTERVAL_S * 1.5)
    c.close()


def test_gpm_that_keeps_failing_moves_the_gpu_to_the_byte_counters(no_sysfs):
    fake = gpm_box()
    c = collector(fake, no_sysfs)
    fake.fail("nvmlGpmMetricsGet", "unknown")
    seen = []
    for _ in range(int(GPM_GIVE_UP_S) + 3):
        for _ in range(64):
            fake.advance(1 / 64)
            c.sampler.poll_once()
        (g,), notices = c.read()
        seen.append((g.pcie, notices))
    assert seen[0][0].method == "gpm" and seen[0][0].rx_bytes is None
    assert any("now using the byte counters" in n for _, ns in seen for n in ns)
    # From then on the counters give exact bytes.
    assert seen[-1][0].method == "counters" and seen[-1][0].rx_bytes == round(5e9)
    c.close()
    assert fake.gpm_samples_alive == 0


def test_prefer_gpm_false_reads_the_byte_counters(no_sysfs):
    fake = gpm_box()
    c = collector(fake, no_sysfs, prefer_gpm=False)
    for _ in range(64):
        fake.advance(1 / 64)
        c.sampler.poll_once()
    (g,), _ = c.read()
    assert g.pcie.method == "counters" and g.pcie.rx_bytes == round(5e9)
    assert fake.called("nvmlGpmQueryDeviceSupport") == 0
    c.close()


def test_a_gpu_without_gpm_keeps_the_counters_and_the_fast_thread_tick(no_sysfs):
    fake = FakeNvml([FakeGpu(index=0, gpm_supported=True), FakeGpu(index=1)])
    c = collector(fake, no_sysfs)
    (g0, g1), _ = c.read()
    assert (g0.pcie.method, g1.pcie.method) == ("gpm", "counters")
    assert c.sampler._tick_s() == pytest.approx(c.sampler.period_s)
    c.close()
    only_gpm = collector(gpm_box(), no_sysfs)
    # Nothing to read fast: the thread wakes only for the error counters, one GPU's each time.
    n = len(only_gpm.read()[0])
    assert only_gpm.sampler._tick_s() == pytest.approx(only_gpm.sampler.error_period_s / n)
    only_gpm.close()


def test_lost_during_a_gpm_sample_marks_the_gpu_lost(no_sysfs):
    fake = gpm_box()
    c = collector(fake, no_sysfs)
    fake.lose(0)
    fake.advance(1.0)
    (g,), notices = c.read()
    assert g.lost and any("fell off the bus" in n for n in notices)
    c.close()


@pytest.mark.parametrize("value, ret, expected", [
    (100.0, NVML_SUCCESS, 100.0 * 2**20),
    (float("nan"), NVML_SUCCESS, None),
    (-1.0, NVML_SUCCESS, None),
    (float("inf"), NVML_SUCCESS, None),
    (5.0, 3, None),  # the metric's own nvmlReturn says NotSupported
])
def test_a_metric_that_is_not_a_sane_rate_reads_as_none(value, ret, expected):
    fake = gpm_box()
    fake.nvmlInit()
    real = fake.nvmlGpmMetricsGet

    def metrics(request):
        real(request)
        request.metrics[0].value, request.metrics[0].nvmlReturn = value, ret
        return request

    fake.nvmlGpmMetricsGet = metrics
    reader = GpmReader(fake, fake.nvmlDeviceGetHandleByIndex(0),
                       lambda name, *a: call_nvml(fake, name, *a), fake.clock)
    assert reader.start()
    fake.advance(1.0)
    rx, tx, interval_s = reader.take()
    assert interval_s == 1.0 and tx == round(1.25e9)
    assert rx == (None if expected is None else round(expected))
    reader.close()


def test_the_request_fits_the_real_pynvml_structure():
    # The metrics request is pynvml's own ctypes structure: field names and the array must match.
    pynvml = pytest.importorskip("pynvml")
    if not hasattr(pynvml, "c_nvmlGpmMetricsGet_t"):
        pytest.skip("this pynvml has no GPM")
    seen = {}

    def metrics_get(request):
        seen["ids"] = [request.metrics[i].metricId for i in range(request.numMetrics)]
        seen["version"] = request.version
        request.metrics[0].value, request.metrics[1].value = 1024.0, 512.0
        return request

    module = SimpleNamespace(c_nvmlGpmMetricsGet_t=pynvml.c_nvmlGpmMetricsGet_t,
                             NVML_GPM_METRICS_GET_VERSION=pynvml.NVML_GPM_METRICS_GET_VERSION)
    calls = {"nvmlGpmQueryDeviceSupport": lambda h: SimpleNamespace(isSupportedDevice=1),
             "nvmlGpmSampleAlloc": lambda: pynvml.c_nvmlGpmSample_t(),
             "nvmlGpmSampleGet": lambda h, s: s, "nvmlGpmMetricsGet": metrics_get,
             "nvmlGpmSampleFree": lambda s: None}
    now = [0.0]
    reader = GpmReader(module, object(), lambda name, *a: (calls[name](*a), None), lambda: now[0])
    assert reader.start()
    now[0] = 2.0
    assert reader.take() == (2 * 1024 * 2**20, 2 * 512 * 2**20, 2.0)
    assert seen == {"ids": [pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC, pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC],
                    "version": pynvml.NVML_GPM_METRICS_GET_VERSION}
    reader.close()


def test_the_background_thread_reads_no_byte_counters_for_a_gpm_gpu(no_sysfs):
    fake = gpm_box()
    c = NvmlCollector(fake, sysfs_root=no_sysfs, error_period_s=0.2)
    c.start()
    try:
        # The thread's first error read comes one error period after start(); wait for it.
        wait_until(lambda: fake.called("nvmlDeviceGetFieldValues") >= 2, what="the first error read")
        (g,), _ = c.read()
    finally:
        c.close()
    assert g.pcie.method == "gpm"
    assert byte_field_reads(fake) == 0
    assert fake.called("nvmlDeviceGetFieldValues") >= 2  # the error counters still are read
