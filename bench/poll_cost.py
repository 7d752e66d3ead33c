"""CPU time per snapshot of the live collector, and the PCIe sampler's CPU share.

Usage: python bench/poll_cost.py [OUT.json] [--real-nvml SECONDS]
- real /proc and host readers here, with 0 (no NVML), 1 and 8 fake GPUs (tests/fakes/fake_pynvml.py);
- with --real-nvml on a GPU box: the real NVML collector for SECONDS, its sampler's CPU share.
Prints ratios; writes JSON.
"""
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pinmon.collect.live import LiveCollector  # noqa: E402
from provenance import provenance  # noqa: E402


def per_snapshot(col, n=30):
    col.snapshot()
    t0 = time.process_time()
    w0 = time.perf_counter()
    for _ in range(n):
        col.snapshot()
    return (time.process_time() - t0) / n, (time.perf_counter() - w0) / n


def main():
    out = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "bench/results/poll_cost.json"
    res = {}
    from tests.fakes.fake_pynvml import FakeNvml

    with LiveCollector(use_nvml=False) as col:
        res["no_gpu"] = per_snapshot(col)
    for n in (1, 8):
        with LiveCollector(nvml=FakeNvml(gpus=n)) as col:
            res[f"fake_gpus_{n}"] = per_snapshot(col)
    if "--real-nvml" in sys.argv:
        secs = float(sys.argv[sys.argv.index("--real-nvml") + 1])
        with LiveCollector() as col:
            res["real_nvml"] = per_snapshot(col)
            sampler = col._nvml
            c0, w0 = sampler.cpu_seconds(), time.perf_counter()
            time.sleep(secs)
            res["real_sampler_cpu_share"] = (sampler.cpu_seconds() - c0) / (time.perf_counter() - w0)
    for k, v in res.items():
        if isinstance(v, tuple):
            print(f"{k:14} cpu {v[0]*1e3:7.2f} ms/snapshot  wall {v[1]*1e3:7.2f} ms")
        else:
            print(f"{k}: {v*100:.2f}% of one core")
    print(f"8 GPUs / 1 GPU CPU ratio: {res['fake_gpus_8'][0] / res['fake_gpus_1'][0]:.2f}")
    with open(out, "w") as f:
        json.dump({"provenance": provenance(),
                   **{k: (dict(cpu_s=v[0], wall_s=v[1]) if isinstance(v, tuple) else v) for k, v in res.items()}},
                  f, indent=1)


if __name__ == "__main__":
    main()
