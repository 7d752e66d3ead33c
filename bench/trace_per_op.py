"""Where the tracer's cost lands: each kind of copy of the trace_overhead loop on its own, traced vs
plain, at 1 MiB and 64 MiB.

    python bench/trace_per_op.py OUT.json [--blocks 30]

For each copy kind and size, blocks of the same copy repeated (64 MiB worth) run without and with
the hooks back to back, the order alternating (ABBA), ``--blocks`` times; the figure is the median
over blocks of traced/plain time, with the quartiles, and the median microseconds per copy of each.
The bookkeeping after a copy is a few microseconds of Python that runs with cold CPU caches (the copy
just went through them), so it weighs on a 1 MiB copy (20-130 us) and disappears in a 64 MiB one.
Needs CuPy and a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_overhead as T  # the hooks, the loop's copies

from provenance import provenance

MIB = 1 << 20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--blocks", type=int, default=30)
    args = ap.parse_args()
    import numpy as np

    cupy = T.load_cupy(False)
    import cupyx

    out = {"schema": "pinmon.bench.trace_per_op/1", "time": time.time(), "provenance": provenance(),
           "cupy": cupy.__version__,
           "blocks": args.blocks, "ops": {}}
    for size in (1 * MIB, 64 * MIB):
        pageable = np.ones(size, np.uint8)
        pinned = cupyx.empty_pinned((size,), dtype=np.uint8)
        pinned[:] = 1
        dev = cupy.empty(size, dtype=np.uint8)
        reps = max(2, int(64 * MIB / size))
        ops = {"set_pinned": lambda: dev.set(pinned), "get_out_pinned": lambda: dev.get(out=pinned),
               "set_pageable": lambda: dev.set(pageable), "get_pageable": lambda: dev.get(),
               "asarray_pageable": lambda: cupy.asarray(pageable)}
        for name, fn in ops.items():
            fn()
            T.sync(cupy)
            ratios, plain, traced = [], [], []
            for i in range(args.blocks):
                spent = {}
                for hooked in ((False, True) if i % 2 == 0 else (True, False)):
                    if hooked:
                        T.hook(cupy)
                    T.sync(cupy)
                    t0 = time.perf_counter()
                    for _ in range(reps):
                        fn()
                    T.sync(cupy)
                    spent[hooked] = time.perf_counter() - t0
                    if hooked:
                        T.unhook(cupy)
                ratios.append(spent[True] / spent[False])
                plain.append(spent[False] / reps)
                traced.append(spent[True] / reps)
            q = statistics.quantiles(ratios, n=4)
            key = f"{name}_{size // MIB}m"
            out["ops"][key] = {"ratio_median": statistics.median(ratios), "ratio_quartiles": [q[0], q[2]],
                               "plain_us": statistics.median(plain) * 1e6,
                               "traced_us": statistics.median(traced) * 1e6}
            r = out["ops"][key]
            print(f"{key:24} traced/plain {r['ratio_median']:.3f} ({q[0]:.3f}..{q[2]:.3f})"
                  f"  {r['plain_us']:.1f} -> {r['traced_us']:.1f} us per copy", flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
