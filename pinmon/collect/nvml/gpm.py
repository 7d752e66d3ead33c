"""PCIe link bytes of one GPU from NVML's GPM (GPU Performance Monitoring) samples, Hopper and newer.

A GPM sample is a snapshot of the GPU's own wide performance counters; ``nvmlGpmMetricsGet`` turns
two samples into the average PCIe RX and TX rates between them (in MiB/s). Each interval starts
at the sample that ended the one before, so the intervals add up to every byte moved: no 32-bit
wrap to chase and no fast thread. One sample costs ~40 us of CPU on the H200; one read of the
32-bit field counters costs ~330 us, and those need 29 reads a second at Gen5 x16
(bench/results/gpm_facts_h200.json).

The reader keeps two sample buffers and alternates between them. A failed sample or metrics call
keeps the older sample as the start of the next interval, so the bytes of the failed interval are
counted in the next good one rather than lost; ``failing_s()`` says for how long takes have failed.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .call import NvmlFailure, NvmlFunction

# nvmlGpmMetricId_t values (pynvml's NVML_GPM_METRIC_PCIE_TX_PER_SEC / _RX_PER_SEC).
PCIE_TX_PER_SEC, PCIE_RX_PER_SEC = 20, 21
# GPM reports these rates in MiB/s: during a 55 GB/s pinned copy they matched the byte counters
# within 1% only with 2**20 (bench/results/gpm_facts_h200.json).
_RATE_UNIT_BYTES = 1 << 20
# NVML asks for at least this between two samples ("internal sample refresh rate").
MIN_INTERVAL_S = 0.1
_VERSION = 1  # NVML_GPM_METRICS_GET_VERSION / NVML_GPM_SUPPORT_VERSION

class Call(Protocol):
    """One NVML call for this GPU: ``(value, None)`` or ``(None, failure)``."""

    def __call__(self, name: NvmlFunction, *args: object) -> tuple[object, NvmlFailure | None]: ...


class GpmReader:
    """Chained GPM samples of one GPU handle, turned into link bytes per interval.

    ``nvml(name, *args)`` makes one NVML call and returns ``(value, failure)``; the caller records
    failures. ``clock`` stamps each sample. Use ``start()`` once; it says whether GPM works here.
    """

    def __init__(self, nvml_module: object, handle: object, nvml: Call, clock: Callable[[], float]):
        self._module = nvml_module
        self._handle = handle
        self._nvml = nvml
        self._clock = clock
        self._samples: list[object] = []
        self._base: int | None = None  # index in _samples of the sample that starts the interval
        self._base_time: float | None = None
        self._failing_since: float | None = None  # clock() of the first failed take in a row

    def start(self) -> bool:
        """Check support, allocate two buffers and take the first sample; False if any step fails."""
        support, _ = self._nvml("nvmlGpmQueryDeviceSupport", self._handle)
        if support is None or not getattr(support, "isSupportedDevice", 0):
            return False
        for _ in range(2):
            sample, _ = self._nvml("nvmlGpmSampleAlloc")
            if sample is None:
                self.close()
                return False
            self._samples.append(sample)
        _, failure = self._nvml("nvmlGpmSampleGet", self._handle, self._samples[0])
        if failure is not None:
            self.close()
            return False
        self._base, self._base_time = 0, self._clock()
        return True

    def take(self) -> tuple[int | None, int | None, float] | None:
        """``(rx_bytes, tx_bytes, interval_s)`` since the previous take; None without a new reading
        (too soon after the last sample, or a failed call: those bytes then join the next take).
        A direction GPM could not compute is None."""
        base_time = self._base_time  # set together with _base (start, take, close)
        if self._base is None or base_time is None or not self.due(self._clock()):
            return None
        nxt = 1 - self._base
        _, failure = self._nvml("nvmlGpmSampleGet", self._handle, self._samples[nxt])
        if failure is not None:
            self._failed()
            return None
        now = self._clock()
        rates = self._rates(self._samples[self._base], self._samples[nxt])
        if rates is None:
            self._failed()
            return None
        interval_s = now - base_time
        self._base, self._base_time = nxt, now
        self._failing_since = None
        rx_rate, tx_rate = rates
        return (None if rx_rate is None else round(rx_rate * interval_s),
                None if tx_rate is None else round(tx_rate * interval_s), interval_s)

    def _failed(self) -> None:
        if self._failing_since is None:
            self._failing_since = self._clock()

    def failing_s(self) -> float:
        """Seconds since the first of the takes that have failed in a row; 0 while they succeed."""
        return 0.0 if self._failing_since is None else self._clock() - self._failing_since

    def due(self, now: float) -> bool:
        """Whether a sample may be taken at ``now`` (started, and ``MIN_INTERVAL_S`` since the last)."""
        return self._base_time is not None and now - self._base_time >= MIN_INTERVAL_S

    def _rates(self, first: object, second: object) -> tuple[float | None, float | None] | None:
        make = getattr(self._module, "c_nvmlGpmMetricsGet_t", None)
        if make is None:
            return None
        request = make()
        request.version = getattr(self._module, "NVML_GPM_METRICS_GET_VERSION", _VERSION)
        request.numMetrics = 2
        request.sample1, request.sample2 = first, second
        request.metrics[0].metricId = PCIE_RX_PER_SEC
        request.metrics[1].metricId = PCIE_TX_PER_SEC
        result, failure = self._nvml("nvmlGpmMetricsGet", request)
        if failure is not None or result is None:
            return None
        # NVML fills in the request it is given, and pynvml hands that same request back.
        return _rate(request.metrics[0]), _rate(request.metrics[1])

    def close(self) -> None:
        """Free the sample buffers (idempotent)."""
        samples, self._samples = self._samples, []
        self._base = self._base_time = None
        for sample in samples:
            self._nvml("nvmlGpmSampleFree", sample)


def _rate(metric: Any) -> float | None:
    """One metric's rate in bytes/s, or None when GPM could not compute it or it is not sane."""
    try:
        if int(getattr(metric, "nvmlReturn", 0)) != 0:
            return None
        value = float(metric.value)
    except (AttributeError, TypeError, ValueError):
        return None
    if not value >= 0 or value == float("inf"):  # NaN, negative, infinite: no reading
        return None
    return value * _RATE_UNIT_BYTES
