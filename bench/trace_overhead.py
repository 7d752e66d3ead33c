"""What the in-process tracer costs: nanoseconds per hooked call, and the slowdown of a realistic
copy loop (H2D and D2H copies of 1-64 MiB, pinned and pageable) with the tracer vs without.

    python bench/trace_overhead.py OUT.json [--rounds 5] [--fake]

The loop runs in this process in rounds. Each round is one pass over the sizes, and each size's
copies run twice back to back, once without and once with the hooks, the order alternating from
size to size and round to round (ABBA; ``wrap.unpatch`` takes the hooks out again), so both halves
of a pair see the same GPU clocks and neighbours within a fraction of a second. A round's ratio is
its traced seconds over its plain seconds; the slowdown is the median over rounds of that ratio - 1
(times drift by several percent over a minute on a shared box, far more than the tracer costs; a
ratio of halves run next to each other cancels the drift), with the quartiles of the ratios. As a cross-check, the
per-call overheads times the copies one pass makes, over the plain pass time, give the slowdown
the bookkeeping alone explains. Per-call figures use a 4 KiB buffer, where the bookkeeping is the
largest share.
``--fake`` uses the CuPy stand-in of tests/trace (no GPU: the Python-side cost only).
``--engine cupti`` measures the CUPTI engine instead of the hooks: it is armed once, and the traced
half of each pair runs with its activities on (its records read and summed, a forced flush at the
end of the half so that their processing is inside it), the plain half with them off. Turning the
activities on before a traced half and off after it is outside the half's time: a traced program
does each once.
Goal: under 2% slowdown of the realistic loop.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance

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


def hook(cupy, st=None):
    from pinmon.trace import hooks_cupy
    from pinmon.trace.state import TracerState

    st = st or TracerState()
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
    import cupyx
    import numpy as np

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


# Which per-call figure stands for each copy of a pass (copy_loop): direction and host memory.
PER_CALL_OF = {("h2d", "pinned"): "set_4k_pinned", ("d2h", "pinned"): "get_out_4k_pinned",
               ("h2d", "pageable"): "asarray_4k", ("d2h", "pageable"): "get_4k"}


def per_call_explained_s(per_call: dict, copies: dict) -> float:
    """Seconds of bookkeeping in one pass: copies seen x the per-call overhead of their kind.
    Pageable H2D copies are ``set`` and ``asarray`` alike; both are charged at asarray's cost."""
    total = 0.0
    for (direction, mem), name in PER_CALL_OF.items():
        count = copies.get(direction, {}).get(mem, {}).get("count", 0)
        total += count * max(0.0, per_call[name]["overhead_ns"]) * 1e-9
    return total


class CuptiSwitch:
    """The CUPTI engine as the traced half: armed once, its activities on for a half, off between."""

    def __init__(self):
        from pinmon.trace.engine_cupti import ARMED, CuptiEngine

        self.engine = CuptiEngine()
        if not self.engine.arm() or self.engine.state != ARMED:
            raise SystemExit(f"CUPTI engine did not arm: {self.engine.notice}")
        self.off_s: list = []  # seconds each turning off took (left out of the halves' time)
        self.engine.pause("bench")

    def on(self):
        self.engine.resume()

    def flush(self):
        self.engine.flush(forced=True)  # the half's records read and summed, inside its time

    def off(self):
        # Outside the half's time: turning the activities off is what a traced program does once,
        # at exit (its forced flush finds the buffers already read).
        t = time.perf_counter()
        self.engine.pause("bench")
        self.off_s.append(time.perf_counter() - t)

    def report(self) -> dict:
        r = self.engine.report() or {}
        out = {k: r.get(k) for k in ("record_path", "record_path_error", "dropped_records", "records",
                                     "record_errors", "raw_walk_mismatches", "raw_callback_errors")}
        out["off_median_s"] = statistics.median(self.off_s) if self.off_s else None
        return out


def copy_round(cupy, round_index: int, switch=None, per_size: dict | None = None) -> tuple[float, float, object]:
    """One pass over the sizes: (plain seconds, traced seconds, the traced halves' state). Each size
    runs its copies without and with the hooks (or ``switch``'s engine) back to back, which goes
    first alternating. Each half starts with one 1-byte copy outside its time, in both halves alike:
    the first copy after CUPTI's activities are turned on pays its start, which a traced program pays
    once. ``per_size`` collects {size: [traced / plain of each round]}."""
    import cupyx
    import numpy as np

    from pinmon.trace.state import TracerState

    plain = traced = 0.0
    state = TracerState()  # one for the round: its report counts the round's traced copies
    for k, size in enumerate(SIZES):
        pageable = np.ones(size, np.uint8)
        pinned = cupyx.empty_pinned((size,), dtype=np.uint8)
        pinned[:] = 1
        dev = cupy.empty(size, dtype=np.uint8)
        reps = max(2, int(256 * MIB / size))
        tiny, tiny_dev = np.ones(1, np.uint8), cupy.empty(1, dtype=np.uint8)
        halves = {}
        for with_hooks in ((False, True) if (round_index + k) % 2 == 0 else (True, False)):
            if with_hooks:
                if switch is None:
                    hook(cupy, state)
                else:
                    switch.on()
            tiny_dev.set(tiny)
            sync(cupy)
            t0 = time.perf_counter()
            for _ in range(reps):
                dev.set(pinned)
                dev.get(out=pinned)
                dev.set(pageable)
                dev.get()
                cupy.asarray(pageable)
            sync(cupy)
            if with_hooks and switch is not None:
                switch.flush()
            spent = time.perf_counter() - t0
            if with_hooks and switch is not None:
                switch.off()
            halves[with_hooks] = spent
            if with_hooks:
                if switch is None:
                    unhook(cupy)
                traced += spent
            else:
                plain += spent
        if per_size is not None:
            per_size.setdefault(size, []).append(halves[True] / halves[False])
    return plain, traced, state


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--rounds", type=int, default=20, help="rounds: a pass over the sizes, each plain and traced")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--fake", action="store_true", help="the CuPy stand-in (no GPU)")
    ap.add_argument("--engine", choices=("hooks", "cupti"), default="hooks")
    args = ap.parse_args()
    switch = CuptiSwitch() if args.engine == "cupti" else None  # armed before CuPy's first CUDA call
    cupy = load_cupy(args.fake)
    per_call = per_call_ns(cupy, args.calls) if switch is None else {}
    copy_round(cupy, 0, switch)  # warm-up: CUDA context, pool, page faults
    plain, traced = [], []
    copies = {}
    per_size: dict = {}
    for i in range(args.rounds):
        p, t, st = copy_round(cupy, i, switch, per_size)
        plain.append(p)
        traced.append(t)
        if switch is None:
            copies = st.report()["copies"]  # one round's traced copies, each size once
    ratios = sorted(t / p for t, p in zip(traced, plain))
    slowdown = statistics.median(ratios) - 1.0
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    explained_s = per_call_explained_s(per_call, copies) if per_call else 0.0
    result = {
        "schema": "pinmon.bench.trace_overhead/2", "time": time.time(), "fake_cupy": args.fake,
        "engine": args.engine, "cupti": switch.report() if switch is not None else None,
        "provenance": provenance(),
        "cupy": getattr(cupy, "__version__", None),
        "per_call": per_call,
        "loop": {"sizes_bytes": list(SIZES), "rounds": args.rounds,
                 "plain_s": plain, "traced_s": traced,
                 "plain_median_s": statistics.median(plain), "traced_median_s": statistics.median(traced),
                 "round_ratios": ratios, "slowdown_fraction": slowdown,
                 "slowdown_by_size": {str(k): statistics.median(v) - 1.0 for k, v in per_size.items()},
                 "slowdown_quartiles": [q - 1.0 for q in quartiles],
                 "bookkeeping_explained_fraction": explained_s / statistics.median(plain),
                 "goal_fraction": 0.02, "traced_copies_seen": copies},
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print("per call overhead (ns): " + ", ".join(f"{k} {v['overhead_ns']:.0f}" for k, v in per_call.items()))
    print(f"{args.engine}: copy loop: plain {result['loop']['plain_median_s']:.4f} s, traced {result['loop']['traced_median_s']:.4f} s,"
          f" slowdown {slowdown * 100:+.2f}% (median of {len(ratios)} rounds; quartiles"
          f" {quartiles[0] * 100 - 100:+.2f}%..{quartiles[2] * 100 - 100:+.2f}%; per-call costs explain"
          f" {explained_s / statistics.median(plain) * 100:.2f}%) (goal < 2%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
