"""How closely chained GPM samples follow the exact link bytes, interval by interval, on a GPU box.

A background thread keeps a pinned 64 MiB host-to-device copy loop running; the sampling thread
takes GPM samples every ``dt`` (1.0, 0.5 and 0.2 s) and, right beside each, reads the 32-bit PCIe
byte counters (also read at 100 Hz by a third thread, so no wrap is missed). Per interval it
records GPM bytes (rate x interval) over counter bytes. A final part stops the load at a known
instant and samples every 0.11 s across it, to see how late GPM reports the end of a burst.
Usage: python3 bench/gpm_intervals.py OUT.json
"""
import json
import os
import statistics
import sys
import threading
import time

import cupy as cp
import numpy as np
import pynvml as p

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance

MIB = 1 << 20
PCIE_TX_PER_SEC, PCIE_RX_PER_SEC = 20, 21


class Counters(threading.Thread):
    def __init__(self, h):
        super().__init__(daemon=True)
        self.h, self.lock, self.stop = h, threading.Lock(), threading.Event()
        self.rx = self.tx = 0
        self.last = self._read()

    def _read(self):
        v = p.nvmlDeviceGetFieldValues(self.h, [p.NVML_FI_DEV_PCIE_COUNT_RX_BYTES, p.NVML_FI_DEV_PCIE_COUNT_TX_BYTES])
        return v[0].value.uiVal, v[1].value.uiVal

    def now(self):
        with self.lock:
            rx, tx = self._read()
            self.rx += (rx - self.last[0]) & 0xFFFFFFFF
            self.tx += (tx - self.last[1]) & 0xFFFFFFFF
            self.last = (rx, tx)
            return self.rx, self.tx

    def run(self):
        while not self.stop.wait(0.01):
            self.now()


def rates(s1, s2):
    mg = p.c_nvmlGpmMetricsGet_t()
    mg.version = p.NVML_GPM_METRICS_GET_VERSION
    mg.numMetrics = 2
    mg.sample1, mg.sample2 = s1, s2
    mg.metrics[0].metricId, mg.metrics[1].metricId = PCIE_RX_PER_SEC, PCIE_TX_PER_SEC
    p.nvmlGpmMetricsGet(mg)
    return mg.metrics[0].value * MIB, mg.metrics[1].value * MIB


class Load(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        n = 64 * MIB
        self.src = cp.cuda.alloc_pinned_memory(n)
        self.host = np.frombuffer(memoryview(self.src).cast("B")[:n], dtype=np.uint8)
        self.host[:] = 1
        self.dev = cp.empty(n, dtype=cp.uint8)
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.go, self.quit, self.stopped_at = threading.Event(), threading.Event(), None

    def run(self):
        with self.stream:
            while not self.quit.is_set():
                if not self.go.wait(0.01):
                    continue
                self.dev.set(self.host, stream=self.stream)
                self.stream.synchronize()
                if not self.go.is_set():
                    self.stopped_at = time.perf_counter()


def chain(h, counters, dt, seconds):
    s = [p.nvmlGpmSampleAlloc(), p.nvmlGpmSampleAlloc()]
    p.nvmlGpmSampleGet(h, s[0]); t0 = time.perf_counter(); c0 = counters.now()
    rows, k = [], 0
    end = t0 + seconds
    while t0 < end:
        time.sleep(max(0.0, t0 + dt - time.perf_counter()))
        cur, prev = s[(k + 1) % 2], s[k % 2]
        p.nvmlGpmSampleGet(h, cur); t1 = time.perf_counter(); c1 = counters.now()
        rx_rate, _tx_rate = rates(prev, cur)
        cb = c1[0] - c0[0]
        rows.append({"t": t1, "interval_s": t1 - t0, "gpm_rx_bytes": rx_rate * (t1 - t0),
                     "counter_rx_bytes": cb, "ratio": rx_rate * (t1 - t0) / cb if cb else None})
        t0, c0, k = t1, c1, k + 1
    for x in s:
        p.nvmlGpmSampleFree(x)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    tot_g = sum(r["gpm_rx_bytes"] for r in rows); tot_c = sum(r["counter_rx_bytes"] for r in rows)
    return {"dt_s": dt, "rows": rows, "ratio_min": min(ratios), "ratio_max": max(ratios),
            "ratio_median": statistics.median(ratios), "total_ratio": tot_g / tot_c}


def main(path):
    p.nvmlInit()
    h = p.nvmlDeviceGetHandleByIndex(0)
    counters = Counters(h); counters.start()
    load = Load(); load.start()
    load.go.set(); time.sleep(1.0)
    out = {"provenance": provenance(), "steady": [chain(h, counters, dt, 6.0) for dt in (1.0, 0.5, 0.2)]}
    for c in out["steady"]:
        print(f"dt {c['dt_s']}: per-interval GPM/counters {c['ratio_min']:.4f}..{c['ratio_max']:.4f}"
              f" median {c['ratio_median']:.4f}, total {c['total_ratio']:.4f}")
    # The end of a burst: sample every 0.11 s across the instant the load stops.
    s = [p.nvmlGpmSampleAlloc(), p.nvmlGpmSampleAlloc()]
    p.nvmlGpmSampleGet(h, s[0]); t0 = time.perf_counter(); c0 = counters.now()
    rows, k, stop_at, start = [], 0, t0 + 0.6, t0
    while time.perf_counter() < start + 1.8 or k < 12:
        time.sleep(0.11)
        if load.go.is_set() and time.perf_counter() >= stop_at:
            load.go.clear()
        cur, prev = s[(k + 1) % 2], s[k % 2]
        p.nvmlGpmSampleGet(h, cur); t1 = time.perf_counter(); c1 = counters.now()
        rx_rate, _ = rates(prev, cur)
        rows.append({"t_rel_s": t1 - start, "gpm_rx_bytes_per_s": rx_rate,
                     "counter_rx_bytes_per_s": (c1[0] - c0[0]) / (t1 - t0)})
        t0, c0, k = t1, c1, k + 1
    time.sleep(0.2)
    out["step"] = {"load_stopped_at_rel_s": (load.stopped_at or start) - start, "rows": rows}
    print("load stopped at", round(out["step"]["load_stopped_at_rel_s"], 3))
    for r in rows:
        print(f"  t {r['t_rel_s']:.3f}  gpm {r['gpm_rx_bytes_per_s'] / 1e9:7.2f} GB/s"
              f"  counters {r['counter_rx_bytes_per_s'] / 1e9:7.2f} GB/s")
    load.quit.set(); counters.stop.set()
    json.dump(out, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
