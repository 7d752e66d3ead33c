"""Driving an NvmlCollector on the fake NVML: no background thread, the fake's clock."""
from pinmon.collect.nvml import NvmlCollector

TICK_S = 1 / 64  # exact in binary, so intervals compare exactly


def collector(fake, sysfs_root, start=True, **kw):
    c = NvmlCollector(fake, background=False, clock=fake.clock, sysfs_root=sysfs_root, **kw)
    if start:
        c.start()
    return c


def ticks(fake, c, n, dt_s=TICK_S):
    for _ in range(n):
        fake.advance(dt_s)
        c.sampler.poll_once()
