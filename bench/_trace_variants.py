"""Diagnostic: which part of the tracer slows the copy loop (plain / wrappers only / full / full, GC off)."""
import gc, json, statistics, sys, time
sys.path.insert(0, "bench"); sys.path.insert(0, ".")
import trace_overhead as T
cupy = T.load_cupy("--fake" in sys.argv)
from pinmon.trace.state import TracerState
T.copy_loop(cupy, 0)
def noop(*a, **k): pass
def run(variant):
    if variant == "plain":
        return T.copy_loop(cupy, 0)
    st = T.hook(cupy)
    if variant == "wrappers":
        st.record_copy = noop; st.record_alloc = noop
    off = variant == "full_nogc"
    if off: gc.disable()
    try:
        return T.copy_loop(cupy, 0)
    finally:
        if off: gc.enable()
        T.unhook(cupy)
variants = ["plain", "wrappers", "full", "full_nogc"]
times = {v: [] for v in variants}
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 8):
    order = variants if i % 2 == 0 else variants[::-1]
    for v in order:
        times[v].append(run(v))
out = {v: statistics.median(times[v]) for v in variants}
ratios = {v: statistics.median(t / p for t, p in zip(times[v], times["plain"])) - 1 for v in variants}
print(json.dumps({"median_s": out, "slowdown": ratios}, indent=1))
print("gc counts", gc.get_count(), gc.get_stats()[-1])
