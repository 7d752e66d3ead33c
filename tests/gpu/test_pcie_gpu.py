"""On a real GPU: the live collector's PCIe RX bytes match a known pinned host-to-device load.

GPM (the default where the GPU has it) and the byte counters are read side by side; over a few
seconds of copies both must count the payload plus the link's protocol overhead (1.0-1.2x) and
agree with each other within 5%.
"""
import threading
import time

import pytest

pytestmark = pytest.mark.gpu
MIB = 1 << 20


def test_gpm_and_counters_count_a_known_load():
    import cupy as cp

    from pinmon.collect.live import LiveCollector

    size = 64 * MIB
    host = cp.cuda.alloc_pinned_memory(size)
    dev = cp.cuda.alloc(size)
    stream = cp.cuda.Stream(non_blocking=True)
    moved, stop = [0], threading.Event()

    def load():
        with stream:
            while not stop.is_set():
                cp.cuda.runtime.memcpyAsync(dev.ptr, host.ptr, size, cp.cuda.runtime.memcpyHostToDevice,
                                            stream.ptr)
                stream.synchronize()
                moved[0] += size

    with LiveCollector(prefer_gpm=True) as gpm, LiveCollector(prefer_gpm=False) as ctr:
        gpm.snapshot(), ctr.snapshot()
        time.sleep(0.5)  # not a wait: an idle interval between two readings, for the rates' baseline
        gpm.snapshot(), ctr.snapshot()
        m0 = moved[0]
        t = threading.Thread(target=load)
        t.start()
        totals = {"gpm": 0, "counters": 0}
        methods = set()
        for _ in range(4):
            time.sleep(1.0)  # not a wait: a second of the load, for the rate read over it
            for name, col in (("gpm", gpm), ("counters", ctr)):
                p = col.snapshot().gpus[0].pcie
                methods.add((name, p.method))
                totals[name] += p.rx_bytes or 0
        stop.set()
        t.join()
        time.sleep(0.3)  # not a wait: the counters' next update passes, so the last copy's bytes reach both
        for name, col in (("gpm", gpm), ("counters", ctr)):
            totals[name] += col.snapshot().gpus[0].pcie.rx_bytes or 0
    payload = moved[0] - m0
    assert ("counters", "counters") in methods
    assert 1.0 <= totals["counters"] / payload <= 1.2, (totals, payload)
    if ("gpm", "gpm") not in methods:
        pytest.skip(f"this GPU has no GPM: {methods}")
    assert 1.0 <= totals["gpm"] / payload <= 1.2, (totals, payload)
    assert totals["gpm"] / totals["counters"] == pytest.approx(1.0, abs=0.05)
