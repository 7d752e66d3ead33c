"""What NVML's GPM (GPU Performance Monitoring) offers for PCIe bytes on this machine, and what it costs.

GPM samples are taken at any rate >= 100 ms apart and turned into averages over the interval between
two samples, so 1 Hz reads could replace the fast 32-bit counter thread, if the figures agree with the
bytes really moved. This script finds out on a GPU box: support, accuracy against a known pinned
host-to-device load (and against the 32-bit counters read at 50 Hz in a thread), and the CPU cost of
each NVML call pinmon makes per snapshot. Usage: python3 bench/gpm_facts.py OUT.json
"""
import json
import os
import sys
import threading
import time

import pynvml as p

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance

MIB = 1 << 20
PCIE_TX_PER_SEC, PCIE_RX_PER_SEC = 20, 21  # MiB/s averaged over the two samples
PCIE_TX_CUM, PCIE_RX_CUM = 255, 256  # "since reboot" (newer drivers only)


def cpu_per_call(fn, n):
    t0, w0 = time.thread_time(), time.perf_counter()
    for _ in range(n):
        fn()
    return {"cpu_us": (time.thread_time() - t0) / n * 1e6, "wall_us": (time.perf_counter() - w0) / n * 1e6}


def metrics(s1, s2, ids):
    mg = p.c_nvmlGpmMetricsGet_t()
    mg.version = p.NVML_GPM_METRICS_GET_VERSION
    mg.numMetrics = len(ids)
    mg.sample1, mg.sample2 = s1, s2
    for i, m in enumerate(ids):
        mg.metrics[i].metricId = m
    p.nvmlGpmMetricsGet(mg)
    return {m: (int(mg.metrics[i].nvmlReturn), float(mg.metrics[i].value)) for i, m in enumerate(ids)}


class Counters(threading.Thread):
    """The 32-bit field counters read at 50 Hz and unwrapped: ground truth for link bytes."""

    def __init__(self, h):
        super().__init__(daemon=True)
        self.h, self.rx, self.tx, self.stop, self.lock = h, 0, 0, threading.Event(), threading.Lock()
        self.last = self.read()

    def read(self):
        v = p.nvmlDeviceGetFieldValues(self.h, [p.NVML_FI_DEV_PCIE_COUNT_RX_BYTES, p.NVML_FI_DEV_PCIE_COUNT_TX_BYTES])
        return v[0].value.uiVal, v[1].value.uiVal

    def run(self):
        while not self.stop.wait(0.02):
            rx, tx = self.read()
            with self.lock:
                self.rx += (rx - self.last[0]) & 0xFFFFFFFF
                self.tx += (tx - self.last[1]) & 0xFFFFFFFF
                self.last = (rx, tx)

    def totals(self):
        with self.lock:
            return self.rx, self.tx


def window(h, s1, s2, counters, load_s, idle_before_s, idle_after_s, copy):
    """GPM over one window with ``load_s`` of pinned H2D copies inside; returns the comparison."""
    c0 = counters.totals()
    p.nvmlGpmSampleGet(h, s1)
    w0 = time.perf_counter()
    time.sleep(idle_before_s)
    payload = copy(load_s)
    time.sleep(idle_after_s)
    p.nvmlGpmSampleGet(h, s2)
    w = time.perf_counter() - w0
    time.sleep(0.05)  # let the counter thread see the end of the window
    c1 = counters.totals()
    m = metrics(s1, s2, [PCIE_TX_PER_SEC, PCIE_RX_PER_SEC, PCIE_TX_CUM, PCIE_RX_CUM])
    rx_rate = m[PCIE_RX_PER_SEC][1] * MIB if m[PCIE_RX_PER_SEC][0] == 0 else None
    tx_rate = m[PCIE_TX_PER_SEC][1] * MIB if m[PCIE_TX_PER_SEC][0] == 0 else None
    out = {"window_s": w, "load_s": load_s, "payload_bytes": payload,
           "gpm": {str(k): v for k, v in m.items()},
           "counter_rx_bytes": c1[0] - c0[0], "counter_tx_bytes": c1[1] - c0[1]}
    if rx_rate is not None:
        out["gpm_rx_bytes"] = rx_rate * w
        out["gpm_rx_over_payload"] = rx_rate * w / payload if payload else None
        out["gpm_rx_over_counters"] = rx_rate * w / max(1, c1[0] - c0[0])
    if tx_rate is not None:
        out["gpm_tx_bytes"] = tx_rate * w
    return out


def main(path):
    p.nvmlInit()
    h = p.nvmlDeviceGetHandleByIndex(0)
    out = {"provenance": provenance(), "driver": p.nvmlSystemGetDriverVersion(),
           "pynvml": getattr(p, "__version__", None)}
    try:
        out["gpm_supported"] = bool(p.nvmlGpmQueryDeviceSupport(h).isSupportedDevice)
    except p.NVMLError as e:
        out["gpm_supported"] = f"error: {e}"
    fields2 = [p.NVML_FI_DEV_PCIE_COUNT_RX_BYTES, p.NVML_FI_DEV_PCIE_COUNT_TX_BYTES]
    costs = {
        "fieldvalues_rx_tx": cpu_per_call(lambda: p.nvmlDeviceGetFieldValues(h, fields2), 300),
        "fieldvalues_rx": cpu_per_call(lambda: p.nvmlDeviceGetFieldValues(h, fields2[:1]), 300),
        "memory_info": cpu_per_call(lambda: p.nvmlDeviceGetMemoryInfo(h), 300),
        "compute_processes": cpu_per_call(lambda: p.nvmlDeviceGetComputeRunningProcesses(h), 300),
        "curr_link_gen": cpu_per_call(lambda: p.nvmlDeviceGetCurrPcieLinkGeneration(h), 300),
        "curr_link_width": cpu_per_call(lambda: p.nvmlDeviceGetCurrPcieLinkWidth(h), 300),
        "pcie_throughput_rx": cpu_per_call(lambda: p.nvmlDeviceGetPcieThroughput(h, p.NVML_PCIE_UTIL_RX_BYTES), 10),
    }
    out["costs"] = costs
    if out["gpm_supported"] is True:
        s1, s2 = p.nvmlGpmSampleAlloc(), p.nvmlGpmSampleAlloc()
        costs["gpm_sample_get"] = cpu_per_call(lambda: p.nvmlGpmSampleGet(h, s1), 200)
        p.nvmlGpmSampleGet(h, s1); time.sleep(0.2); p.nvmlGpmSampleGet(h, s2)
        costs["gpm_metrics_get_2"] = cpu_per_call(lambda: metrics(s1, s2, [PCIE_TX_PER_SEC, PCIE_RX_PER_SEC]), 200)
        import cupy as cp
        n = 64 * MIB
        host = cp.cuda.alloc_pinned_memory(n)
        hview = memoryview(host).cast("B")[:n]
        import numpy as np
        src = np.frombuffer(hview, dtype=np.uint8)
        src[:] = 1
        dev = cp.empty(n, dtype=cp.uint8)

        def copy(seconds):
            moved, t_end = 0, time.perf_counter() + seconds
            while time.perf_counter() < t_end:
                dev.set(src)
                moved += n
            cp.cuda.runtime.deviceSynchronize()
            return moved

        copy(0.3)  # warm up
        counters = Counters(h)
        counters.start()
        wins = []
        for load_s, before, after in ((2.0, 0.0, 0.0), (0.0, 1.0, 0.0), (1.0, 1.0, 1.0), (0.5, 0.1, 0.4)):
            wins.append(window(h, s1, s2, counters, load_s, before, after, copy))
            print(json.dumps(wins[-1]))
        # Does a window survive a sample pair 10 s apart (no wrap inside GPM)?
        wins.append(window(h, s1, s2, counters, 8.0, 1.0, 1.0, copy))
        print(json.dumps(wins[-1]))
        counters.stop.set()
        out["windows"] = wins
    json.dump(out, open(path, "w"), indent=1)
    print(json.dumps(costs, indent=1))
    print("gpm_supported", out["gpm_supported"])


if __name__ == "__main__":
    main(sys.argv[1])
