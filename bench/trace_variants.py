"""Which part of the tracer slows the copy loop of trace_overhead.py: no hooks, the wrappers alone (the
bookkeeping replaced by no-ops), the full tracer, and the full tracer with the garbage collector off.

    python bench/trace_variants.py [ROUNDS] [--fake]

The four run interleaved, in alternating order, ROUNDS times; prints each one's median pass time and
the median of its per-round ratios to the plain pass.
"""
import gc
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_overhead as T  # noqa: E402  (its loop, hooks and CuPy loader)

VARIANTS = ("plain", "wrappers", "full", "full_nogc")


def _noop(*args, **kwargs) -> None:
    return None


def run(cupy, variant: str) -> float:
    if variant == "plain":
        return T.copy_loop(cupy, 0)
    st = T.hook(cupy)
    if variant == "wrappers":
        st.record_copy = st.record_alloc = _noop
    no_gc = variant == "full_nogc"
    if no_gc:
        gc.disable()
    try:
        return T.copy_loop(cupy, 0)
    finally:
        if no_gc:
            gc.enable()
        T.unhook(cupy)


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 8
    cupy = T.load_cupy("--fake" in sys.argv)
    T.copy_loop(cupy, 0)  # warm-up
    times = {v: [] for v in VARIANTS}
    for i in range(rounds):
        for v in (VARIANTS if i % 2 == 0 else VARIANTS[::-1]):
            times[v].append(run(cupy, v))
    print(json.dumps({
        "median_s": {v: statistics.median(times[v]) for v in VARIANTS},
        "slowdown": {v: statistics.median(t / p for t, p in zip(times[v], times["plain"])) - 1 for v in VARIANTS},
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
