"""What the in-process tracer costs: nanoseconds per hooked call, and the slowdown of a realistic
copy loop (H2D and D2H copies of 1-64 MiB, pinned and pageable) with the tracer vs without.

    python bench/trace_overhead.py OUT.json [--rounds 5] [--fake]

The loop runs in this process, alternating rounds without and with the hooks in ABBA order
(``wrap.unpatch`` takes them out again), so both see the same GPU, clocks and neighbours; medians
are reported. Per-call figures use a 4 KiB buffer, where the bookkeeping is the largest share.
``--fake`` uses the CuPy stand-in of tests/trace (no GPU: the Python-side cost only).
Goal: under 2% slowdown of the realistic loop.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
MIB = 1 << 20
SIZES = (1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB)


def load_cupy(fake: bool):
    if fake:
        sys.path.insert(0, os.path.join(ROOT, "tests", "trace", "fakecupy"))
    import cupy
    import cupyx  # noqa: F401

    return cupy


HOOKED = [("cupy.cuda.runtime", "hostAlloc"), ("cupy.cuda.runtime", "freeHost"),
          ("cupy.cuda.runtime", "hostRegister"), ("cupy.cuda.runtime", "hostUnregister"),
          ("cupy.cuda.runtime", "memcpy"), ("cupy.cuda.runtime", "memcpyAsync"),
          ("cupy.cuda", "alloc_pinned_memory"), ("cupy", "asarray"), ("cupy", "array"),
          ("cupy", "asnumpy"), ("cupy.ndarray", "get"), ("cupy.ndarray", "set")]


def owner(cupy, path):
    obj = cupy
    for part in path.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def unhook(cupy):
    from pinmon.trace.wrap import unpatch

    for path, name in HOOKED:
        unpatch(owner(cupy, path), name)


def hook(cupy):
    from pinmon.trace import hooks_cupy
    from pinmon.trace.state import TracerState

    st = TracerState()
    hooks_cupy.hook(cupy, st)
    return st


def sync(cupy):
    try:
        cupy.cuda.runtime.deviceSynchronize()
    except AttributeError:
        pass


def per_call_ns(cupy, n: int) -> dict:
    """Median time of one call of each kind, hooked minus plain, in ns.

    The pinned buffers are allocated again once the hooks are in, so that the traced calls find
    them in the tracer's range table (pinned copies) as a traced program would."""
    import numpy as np

    import cupyx

    rt = cupy.cuda.runtime
    small = np.ones(4096, np.uint8)
    dev = cupy.asarray(small)
    dptr = dev.data.ptr
    host = {}

    def allocate():
        host["pinned"] = rt.hostAlloc(4096, 0)
        host["pool"] = cupyx.empty_pinned((4096,), dtype=np.uint8)

    calls = {
        "memcpy_4k_h2d_pinned": lambda: rt.memcpy(dptr, host["pinned"], 4096, rt.memcpyHostToDevice),
        "memcpy_4k_h2d_pageable": lambda: rt.memcpy(dptr, small.ctypes.data, 4096, rt.memcpyHostToDevice),
        "hostAlloc_freeHost_4k": lambda: rt.freeHost(rt.hostAlloc(4096, 0)),
        "asarray_4k": lambda: cupy.asarray(small),
        "get_4k": lambda: dev.get(),
        "set_4k_pinned": lambda: dev.set(host["pool"]),
        "get_out_4k_pinned": lambda: dev.get(out=host["pool"]),
    }

    def time_all():
        out = {}
        for name, fn in calls.items():
            runs = []
            for _ in range(5):
                t0 = time.perf_counter_ns()
                for _ in range(n):
                    fn()
                runs.append((time.perf_counter_ns() - t0) / n)
            out[name] = statistics.median(runs)
        return out

    allocate()
    plain = time_all()
    hook(cupy)
    rt.freeHost(host["pinned"])
    allocate()  # hooked now: the tracer knows these buffers are pinned
    # The lambdas look the hooked functions up at call time, so they are hooked now.
    traced = time_all()
    unhook(cupy)
    rt.freeHost(host["pinned"])
    return {name: {"plain_ns": plain[name], "traced_ns": traced[name],
                   "overhead_ns": traced[name] - plain[name]} for name in calls}


def copy_loop(cupy, seconds_budget: float) -> float:
    """Seconds for one pass: each size, H2D and D2H, pinned and pageable, a few times."""
    import numpy as np

    import cupyx

    total = 0.0
    for size in SIZES:
        pageable = np.ones(size, np.uint8)
        pinned = cupyx.empty_pinned((size,), dtype=np.uint8)
        pinned[:] = 1
        dev = cupy.empty(size, dtype=np.uint8)
        reps = max(2, int(256 * MIB / size))
        sync(cupy)
        t0 = time.perf_counter()
        for _ in range(reps):
            dev.set(pinned)
            dev.get(out=pinned)
            dev.set(pageable)
            dev.get()
            cupy.asarray(pageable)
        sync(cupy)
        total += time.perf_counter() - t0
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--fake", action="store_true", help="the CuPy stand-in (no GPU)")
    args = ap.parse_args()
    cupy = load_cupy(args.fake)
    per_call = per_call_ns(cupy, args.calls)
    copy_loop(cupy, 0)  # warm-up: CUDA context, pool, page faults
    plain, traced = [], []
    for i in range(args.rounds):
        # ABBA order: neither variant always runs first (page reuse, caches, clock ramps).
        for with_hooks in ((False, True) if i % 2 == 0 else (True, False)):
            if with_hooks:
                st = hook(cupy)
                traced.append(copy_loop(cupy, 0))
                unhook(cupy)
            else:
                plain.append(copy_loop(cupy, 0))
    slowdown = statistics.median(traced) / statistics.median(plain) - 1.0
    result = {
        "schema": "pinmon.bench.trace_overhead/1", "time": time.time(), "fake_cupy": args.fake,
        "python": platform.python_version(), "host": platform.node(),
        "cupy": getattr(cupy, "__version__", None),
        "per_call": per_call,
        "loop": {"sizes_bytes": list(SIZES), "rounds": args.rounds,
                 "plain_s": plain, "traced_s": traced,
                 "plain_median_s": statistics.median(plain), "traced_median_s": statistics.median(traced),
                 "slowdown_fraction": slowdown, "goal_fraction": 0.02,
                 "traced_copies_seen": st.report()["copies"]},
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"per call overhead (ns): " + ", ".join(f"{k} {v['overhead_ns']:.0f}" for k, v in per_call.items()))
    print(f"copy loop: plain {result['loop']['plain_median_s']:.4f} s, traced {result['loop']['traced_median_s']:.4f} s,"
          f" slowdown {slowdown * 100:+.2f}% (goal < 2%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
