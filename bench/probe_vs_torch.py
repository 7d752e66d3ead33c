"""pinmon's probe timing against PyTorch on one GPU: pinned 64 MiB and 256 MiB H2D and D2H copies.

pinmon side: ``pinmon.probe.engine.measure_copies`` (the timing code ``run_probe`` uses: CUDA events
on a non-blocking stream, one warm-up, median). PyTorch side: a ``pin_memory=True`` tensor and
``Tensor.copy_(non_blocking=True)`` on its own stream, CUDA events, median of the same number of
repeats. Rounds alternate between the two so clock or link drift hits both alike.

Goal: pinmon / PyTorch >= 0.98 for every size and direction. Also prints each figure as a share of
the link's theoretical payload rate (NVML current generation and width, read right after the
copies, when the link is trained up; GT/s x lanes x 128/130 / 8 for Gen3-5).

Usage (GPU machine): python bench/probe_vs_torch.py [OUT.json]   (default bench/results/probe_vs_torch.json)
"""
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from pinmon.model.link import theoretical_bytes_per_s
from pinmon.outputs.probe_text import format_probe
from pinmon.probe import run_probe
from pinmon.probe.engine import measure_copies
from pinmon.units import MIB, fmt_bytes, fmt_rate
from provenance import provenance

SIZES_BYTES = (64 * MIB, 256 * MIB)
DIRECTIONS = ("h2d", "d2h")
REPEATS = 20
ROUNDS = 3
GOAL_RATIO = 0.98
GPU = 0


def torch_samples(torch, size_bytes: int, direction: str, repeats: int) -> list:
    host = torch.empty(size_bytes, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(size_bytes, dtype=torch.uint8, device=f"cuda:{GPU}")
    stream = torch.cuda.Stream(device=GPU)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    dst, src = (dev, host) if direction == "h2d" else (host, dev)
    out = []
    with torch.cuda.stream(stream):
        dst.copy_(src, non_blocking=True)  # warm-up
        stream.synchronize()
        for _ in range(repeats):
            start.record(stream)
            dst.copy_(src, non_blocking=True)
            end.record(stream)
            end.synchronize()
            out.append(start.elapsed_time(end) / 1e3)
    del host, dev
    return out


def link_info() -> dict:
    try:
        import pynvml as nv

        nv.nvmlInit()
        h = nv.nvmlDeviceGetHandleByIndex(GPU)
        info = {"gen": nv.nvmlDeviceGetCurrPcieLinkGeneration(h),
                "width": nv.nvmlDeviceGetCurrPcieLinkWidth(h),
                "gen_max": nv.nvmlDeviceGetMaxPcieLinkGeneration(h),
                "width_max": nv.nvmlDeviceGetMaxPcieLinkWidth(h),
                "name": nv.nvmlDeviceGetName(h)}
        nv.nvmlShutdown()
    except Exception as e:  # the comparison still stands without the link figure
        return {"error": f"{type(e).__name__}: {e}", "theoretical_bytes_per_s": None}
    info["theoretical_bytes_per_s"] = theoretical_bytes_per_s(info["gen"], info["width"])
    info["max_theoretical_bytes_per_s"] = theoretical_bytes_per_s(info["gen_max"], info["width_max"])
    return info


def main() -> int:
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results", "probe_vs_torch.json")
    import cupy
    import torch

    pin = {(s, d): [] for s in SIZES_BYTES for d in DIRECTIONS}
    tor = {(s, d): [] for s in SIZES_BYTES for d in DIRECTIONS}
    t0 = time.time()
    for _ in range(ROUNDS):
        # pinmon: one pinned buffer of the largest size, every size and direction, as the probe does.
        for m in measure_copies(SIZES_BYTES, memory="pinned", directions=DIRECTIONS, repeats=REPEATS,
                                gpu_index=GPU, max_pinned_bytes=max(SIZES_BYTES)):
            pin[(m.size_bytes, m.direction)].append(m.seconds)
        for s in SIZES_BYTES:
            for d in DIRECTIONS:
                tor[(s, d)] += torch_samples(torch, s, d, REPEATS)
    link = link_info()
    theo = link.get("theoretical_bytes_per_s")

    results = []
    print(f"{'SIZE':<10} {'DIR':<4} {'pinmon':>10} {'torch':>10} {'ratio':>6} {'pinmon%':>8} {'torch%':>7}")
    for s in SIZES_BYTES:
        for d in DIRECTIONS:
            # pinmon rows are per-round medians; the torch list holds every sample: take the median
            # of per-round medians on both sides so each gets the same statistic.
            torch_rounds = [statistics.median(tor[(s, d)][i * REPEATS:(i + 1) * REPEATS]) for i in range(ROUNDS)]
            p_s, t_s = statistics.median(pin[(s, d)]), statistics.median(torch_rounds)
            p_bps, t_bps = s / p_s, s / t_s
            row = {"size_bytes": s, "direction": d, "repeats": REPEATS, "rounds": ROUNDS,
                   "pinmon_bytes_per_s": p_bps, "torch_bytes_per_s": t_bps, "ratio": p_bps / t_bps,
                   "pinmon_round_seconds": pin[(s, d)], "torch_round_seconds": torch_rounds,
                   "pinmon_fraction_of_link": p_bps / theo if theo else None,
                   "torch_fraction_of_link": t_bps / theo if theo else None}
            results.append(row)
            pct = (lambda x: f"{x * 100:.1f}%" if x is not None else "n/a")
            print(f"{fmt_bytes(s):<10} {d:<4} {fmt_rate(p_bps):>10} {fmt_rate(t_bps):>10}"
                  f" {row['ratio']:>6.3f} {pct(row['pinmon_fraction_of_link']):>8}"
                  f" {pct(row['torch_fraction_of_link']):>7}")
    meets = all(r["ratio"] >= GOAL_RATIO for r in results)
    print(f"link: {link}")
    print(f"goal pinmon/torch >= {GOAL_RATIO}: {'met' if meets else 'NOT met'}")

    quick = run_probe("quick", gpu_index=GPU, link_theoretical_bytes_per_s=theo)
    print(format_probe(quick))

    doc = {"schema": "pinmon.bench.probe_vs_torch/1", "time": t0, "provenance": provenance(),
           "cupy": cupy.__version__, "torch": torch.__version__,
           "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
           "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
           "gpu_index": GPU, "link": link, "goal_ratio": GOAL_RATIO, "meets_goal": meets,
           "results": results, "quick_probe": quick.to_dict()}
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {out_path}")
    return 0 if meets else 1


if __name__ == "__main__":
    sys.exit(main())
