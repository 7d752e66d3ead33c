"""The "sampled" fallback for GPUs without GPM or byte counters: ``nvmlDeviceGetPcieThroughput``.

Each call blocks ~21 ms (NVML samples the link for that long), so the calls run on a small pool of
daemon workers, one job per GPU at a time: eight GPUs cost the wall time of one and the caller
never waits.
"""
from __future__ import annotations

import functools
import queue
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from .call import NvmlFailure, NvmlFunction

# nvmlDeviceGetPcieThroughput's "KB" is 1000 bytes: during a 55 GB/s copy it read 59.4e6 KB/s,
# which matches the counters' link bytes (1.08x payload) only with 1000.
_THROUGHPUT_UNIT_BYTES = 1000

Rates = tuple[float | None, float | None] | None


def _bytes_per_s(kb_per_s: object) -> float | None:
    """NVML's throughput answer (an unsigned count of kB/s) in bytes/s; None for any other answer."""
    if isinstance(kb_per_s, bool) or not isinstance(kb_per_s, int) or kb_per_s < 0:
        return None
    return float(kb_per_s) * _THROUGHPUT_UNIT_BYTES


class GpuCall(Protocol):
    """One NVML call for GPU ``gpu`` (its handle added by the caller): ``(value, failure)``."""

    def __call__(self, gpu: int, name: NvmlFunction, *args: object) -> tuple[object, NvmlFailure | None]: ...


class DaemonPool:
    """A fixed set of daemon threads running jobs from a queue.

    Daemon threads so that an NVML call that never returns cannot hold up interpreter exit
    (concurrent.futures joins its workers at exit).
    """

    def __init__(self, size: int, name: str):
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(size)]
        for t in self._threads:
            t.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:  # pragma: no cover - jobs catch their own errors
                pass

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)

    def stop(self, timeout_s: float) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))


class ThroughputSampler:
    """Throughput samples of GPUs, at most one in flight per GPU.

    ``call(gpu, name, *args)`` makes one NVML call for a GPU and returns ``(value, failure)`` (the
    caller records failures and marks lost GPUs); ``lost(gpu)`` says whether a GPU is lost. ``landed(gpu, rates, unsupported)`` receives each
    sample: ``(rx_bytes_per_s, tx_bytes_per_s)``, or None when neither direction could be read, and
    whether both directions said NotSupported.
    """

    def __init__(self, nvml: object, call: GpuCall, lost: Callable[[int], bool],
                 landed: Callable[[int, Rates, bool], None], workers: int = 8):
        self.nvml = nvml
        self._call = call
        self._lost = lost
        self._landed = landed
        self._workers = max(1, workers)
        self._pool: DaemonPool | None = None
        self._in_flight: set[int] = set()
        self._idle = threading.Condition()
        self._cpu_s = 0.0

    @property
    def running(self) -> bool:
        """Whether workers exist to take ``request``s."""
        return self._pool is not None

    def start(self, n_gpus: int) -> None:
        """Start workers for ``n_gpus`` GPUs (at most ``workers``), unless they are running."""
        if self._pool is None and n_gpus > 0:
            self._pool = DaemonPool(min(self._workers, n_gpus), "pinmon-pcie-sampled")

    def stop(self, timeout_s: float) -> None:
        """Stop the workers; one inside an NVML call is waited for up to ``timeout_s``."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop(timeout_s)

    def request(self, gpus: Iterable[int]) -> None:
        """Queue one sample of each of ``gpus`` not already being sampled; returns at once."""
        pool = self._pool
        if pool is None:
            return
        jobs = []
        with self._idle:
            for gpu in gpus:
                if gpu not in self._in_flight:
                    self._in_flight.add(gpu)
                    jobs.append(gpu)
        for gpu in jobs:
            pool.submit(functools.partial(self._sample, gpu))

    def sample_now(self, gpu: int) -> None:
        """Sample ``gpu`` on the calling thread."""
        with self._idle:
            self._in_flight.add(gpu)
        self._sample(gpu)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no sample is in flight; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._in_flight, timeout_s)

    def cpu_seconds(self) -> float:
        """CPU time of the samples so far, in seconds (time.thread_time per sample)."""
        with self._idle:
            return self._cpu_s

    def _sample(self, gpu: int) -> None:
        t0 = time.thread_time()
        try:
            nvml = self.nvml
            rx_kb, rx_failure = self._call(gpu, "nvmlDeviceGetPcieThroughput",
                                           getattr(nvml, "NVML_PCIE_UTIL_RX_BYTES", 1))
            tx_kb, tx_failure = None, None
            if not self._lost(gpu):
                tx_kb, tx_failure = self._call(gpu, "nvmlDeviceGetPcieThroughput",
                                               getattr(nvml, "NVML_PCIE_UTIL_TX_BYTES", 0))
            rx, tx = _bytes_per_s(rx_kb), _bytes_per_s(tx_kb)
            if rx is None and tx is None:
                unsupported = all(getattr(f, "not_supported", False) for f in (rx_failure, tx_failure))
                self._landed(gpu, None, unsupported)
            else:
                self._landed(gpu, (rx, tx), False)
        finally:
            with self._idle:
                self._in_flight.discard(gpu)
                self._cpu_s += time.thread_time() - t0
                self._idle.notify_all()
