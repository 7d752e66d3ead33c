"""The NVML fault matrix: which functions pinmon calls (recorded, not listed by hand) x which errors.

``recorded_functions()`` runs a healthy collector against the fake NVML on a box whose three GPUs
exercise every path (GPU 0 has the link byte counters, GPU 1 falls back to the sampled throughput
call, GPU 2 has GPM; no sysfs so the NUMA node is asked of NVML) and returns the NVML functions it
called. A new call added to the collector joins the matrix without anyone editing a list.
``MATRIX`` is every (function, error, mode) cell. ``install_fake`` puts a fresh fake in place of the
``pynvml`` module the live collector imports, for the tests that go through ``cli.main``.

Its users: tests/collect/nvml (the collector), tests/cli (``pinmon check``), tests/tui and
tests/export (a few cells each).
"""
from __future__ import annotations

import sys

from tests.fakes.fake_pynvml import NVML_ERROR_NOT_SUPPORTED, FakeGpu, FakeNvml

# The eight errors of the matrix, by the fake's plain names (tests/fakes/fake_pynvml.ERRORS).
MATRIX_ERRORS = ("not_supported", "gpu_lost", "no_permission", "unknown", "timeout",
                 "library_not_found", "driver_not_loaded", "uninitialized")
MODES = ("always", "mid-run")
# Functions not tied to one GPU: a fault is injected for every caller.
GLOBAL_FUNCTIONS = frozenset({"nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount"})
TARGET_GPU = 1  # faults hit GPU 1 (GPU 2 for GPM calls); GPU 0 must keep its exact readings
GPM_GPU = 2
# Called only when the collector closes: a fault there has nothing to show.
AT_CLOSE = frozenset({"nvmlShutdown", "nvmlGpmSampleFree"})
TICK_S = 1 / 64


def make_fake() -> FakeNvml:
    return FakeNvml([
        FakeGpu(index=0, rx_bytes_per_s=1e9, tx_bytes_per_s=2e8, processes=[(4242, 1 << 30)]),
        FakeGpu(index=1, rx_bytes_per_s=5e9, byte_counters_return=NVML_ERROR_NOT_SUPPORTED,
                processes=[(4343, 2 << 30)]),
        FakeGpu(index=2, rx_bytes_per_s=3e9, gpm_supported=True),
    ])


def target_of(function: str):
    """The GPU whose readings a fault in ``function`` should show on (None: every GPU)."""
    if function in GLOBAL_FUNCTIONS:
        return None
    return GPM_GPU if function.startswith("nvmlGpm") else TARGET_GPU


def inject_of(function: str):
    """The GPU a fault is injected for: a GPM sample buffer is allocated for no GPU in particular."""
    return None if function == "nvmlGpmSampleAlloc" else target_of(function)


def drive(fake, collector, seconds: float = 1.25):
    """Advance the fake clock by ``seconds`` of sampler ticks, sample the fallback GPUs, read."""
    for _ in range(int(seconds / TICK_S)):
        fake.advance(TICK_S)
        collector.sampler.poll_once() if collector.sampler is not None else None
    if collector.sampler is not None:
        collector.sampler.refresh_sampled()
    return collector.read()


def recorded_functions(sysfs_root: str = "/nonexistent-sysfs") -> tuple[str, ...]:
    from pinmon.collect.nvml import NvmlCollector

    fake = make_fake()
    c = NvmlCollector(fake, background=False, clock=fake.clock, sysfs_root=sysfs_root)
    c.start()
    for _ in range(3):
        drive(fake, c)
    c.close()
    seen: dict[str, None] = {}
    for function, _gpu, _thread in fake.calls:
        seen.setdefault(function, None)
    return tuple(seen)


FUNCTIONS = recorded_functions()
MATRIX = [(f, e, m) for f in FUNCTIONS for e in MATRIX_ERRORS for m in MODES]

# Read on every snapshot on the caller's thread, so a mid-run fault shows in the very next read.
EVERY_READ = frozenset({"nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkGeneration",
                        "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkWidth",
                        "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetComputeRunningProcesses",
                        "nvmlGpmSampleGet", "nvmlGpmMetricsGet"})


def install_fake(monkeypatch) -> FakeNvml:
    """A fresh fake installed as the ``pynvml`` module that the live collector imports, on a PCI
    bus that holds its three GPUs (whatever this box's own sysfs says)."""
    from pinmon.collect import live as collector

    fake = make_fake()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(collector, "count_nvidia_gpus", lambda root="/sys": 3)
    return fake
