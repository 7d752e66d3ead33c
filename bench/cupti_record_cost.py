"""Where the CUPTI engine's cost per copy goes: CUPTI itself, cupti-python's record objects, or the
tracer's reading of them. For the GPU box (cupti-python and CuPy needed).

Each variant runs in a fresh child process: the tracer's CUPTI engine armed (MEMCPY, MEMORY2 and
CONTEXT on), then ``--copies`` synchronous 1 MiB pinned host-to-device copies (``cudaMemcpy``) with
nothing flushing meanwhile, then one forced flush whose completion callbacks do the variant's work:

- ``off``: CUPTI not loaded (the copies' baseline);
- ``cupti_only``: the fast path's callbacks, buffers returned unread (what CUPTI itself costs);
- ``raw_parse``: the fast path reads every record into tuples, and nothing more;
- ``raw_tracer``: the fast path, read and summed (the engine as it runs);
- ``objects_drop``: ``cupti-python``'s own callbacks, its list of record objects built and dropped;
- ``objects_tracer``: ``cupti-python``'s record objects read and summed.

Per variant: wall time per copy in the loop (CUPTI's recording), the flush's wall and CPU time per
copy (reading the records), the callbacks' CPU per record, and the figures' count of the copies.

``--knobs`` runs, instead, CUPTI's own settings that could change what it adds to a copy, each as
``cupti_only`` with one setting changed before the kinds are enabled: ``memcpy_only`` (MEMCPY the
only kind), ``per_thread`` (per-thread activity buffers), ``hw_trace`` (hardware-event tracing,
where the GPU has it), ``unzeroed`` (buffers not zeroed by CUPTI), ``pinned_flip`` (CUPTI's device
buffers in the other kind of host memory), ``semaphores`` (a larger preallocated profiling
semaphore pool); with ``off`` and ``cupti_only`` as the baselines, in three rounds, order alternating.
Usage: python3 bench/cupti_record_cost.py OUT.json [--copies 4000] [--knobs]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance

VARIANTS = ("off", "cupti_only", "raw_parse", "raw_tracer", "objects_drop", "objects_tracer")
KNOBS = ("memcpy_only", "per_thread", "hw_trace", "unzeroed", "pinned_flip", "semaphores")


def _set_knob(engine_module, engine, knob: str) -> dict:
    """Changes one CUPTI setting where the engine sets its device buffers (before any kind is
    enabled); returns what was asked and CUPTI's answer."""
    import ctypes

    said: dict = {"knob": knob}
    if knob == "memcpy_only":
        engine_module.KINDS = ("MEMCPY",)
        return said
    real = engine._set_device_buffers

    def set_then_real(c):
        attr = c.ActivityAttribute

        def set_attr(name, value, nbytes):
            ctype = ctypes.c_uint8 if nbytes == 1 else ctypes.c_size_t
            engine_module._set_attr(c, getattr(attr, name), value, ctype)
        try:
            if knob == "per_thread":
                set_attr("ATTR_PER_THREAD_BUFFER", 1, 1)
            elif knob == "hw_trace":
                c.activity_enable_hw_trace(1)
            elif knob == "unzeroed":
                set_attr("ATTR_ZEROED_OUT_BUFFER", 0, 1)
            elif knob == "pinned_flip":
                before = engine_module._get_attr(c, attr.ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED)
                said["before"] = before
                set_attr("ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED", 0 if before else 1, 1)
            elif knob == "semaphores":
                said["before"] = engine_module._get_attr(c, attr.ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE)
                set_attr("ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE", 1024, 8)
            said["set"] = True
        except Exception as e:
            said["set"] = False
            said["error"] = f"{type(e).__name__}: {e}"[:200]
        real(c)
    engine._set_device_buffers = set_then_real
    return said
SIZE = 1 << 20


def child(variant: str, copies: int) -> dict:
    """One variant; CUPTI (where on) is armed before CuPy's first CUDA call."""
    sys.path.insert(0, ROOT)
    out: dict = {"variant": variant, "copies": copies}
    spent = {"cpu_s": 0.0, "records": 0}
    engine = cupti = None
    if variant != "off":
        from pinmon.trace import engine_cupti
        from pinmon.trace.cupti_raw import Parsed
        from pinmon.trace.engine_cupti import CuptiEngine

        engine = CuptiEngine()
        if variant in KNOBS:
            out["knob"] = _set_knob(engine_cupti, engine, variant)
        if variant.startswith("objects"):
            engine.record_path = "objects"
        assert engine.arm(), engine.notice
        cupti = engine.cupti
        out["record_path"] = engine.record_path
        if variant == "objects_drop":
            def completed(activities):
                t0 = time.thread_time()
                spent["records"] += len(activities)
                spent["cpu_s"] += time.thread_time() - t0
            cupti.activity_register_callbacks(engine._requested, completed)
        elif variant in ("cupti_only", "raw_parse") or variant in KNOBS:
            raw = engine._raw
            real_parse = raw.parser.parse

            def parse(address, valid):
                t0 = time.thread_time()
                p = real_parse(address, valid) if variant == "raw_parse" else Parsed()
                spent["records"] += len(p.memcpy) + len(p.memory) + len(p.context)
                spent["cpu_s"] += time.thread_time() - t0
                return p
            raw.parser.parse = parse
            raw.on_buffer = lambda parsed: None
        else:  # the engine's whole path: read and summed
            figures = engine.figures
            real = figures.consume_parsed if variant == "raw_tracer" else figures.consume

            def timed(arg):
                t0 = time.thread_time()
                real(arg)
                spent["cpu_s"] += time.thread_time() - t0
            if variant == "raw_tracer":
                figures.consume_parsed = timed
            else:
                figures.consume = timed
    import cupy

    rt = cupy.cuda.runtime
    host = rt.hostAlloc(SIZE, 0)
    dev = cupy.cuda.alloc(SIZE)
    for _ in range(50):
        rt.memcpy(dev.ptr, host, SIZE, 1)
    if engine is not None:
        engine.flush(forced=True)
        spent.update(cpu_s=0.0, records=0)
        base_records = engine.figures.records
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(copies):
        rt.memcpy(dev.ptr, host, SIZE, 1)
    w1, c1 = time.perf_counter(), time.process_time()
    out["loop_wall_us_per_copy"] = (w1 - w0) / copies * 1e6
    out["loop_cpu_us_per_copy"] = (c1 - c0) / copies * 1e6
    if engine is not None:
        f0, fc0 = time.perf_counter(), time.process_time()
        engine.flush(forced=True)
        out["flush_wall_us_per_copy"] = (time.perf_counter() - f0) / copies * 1e6
        out["flush_cpu_us_per_copy"] = (time.process_time() - fc0) / copies * 1e6
        n = spent["records"] or (engine.figures.records - base_records)
        out["records"] = n
        out["callback_cpu_us_per_record"] = spent["cpu_s"] / n * 1e6 if n else None
        h2d = engine.figures.report()["copies"]["h2d"]["pinned"]
        out["figures_h2d_pinned"] = {k: h2d.get(k) for k in ("copies", "bytes")}
        out["raw"] = None if engine._raw is None else {
            "walk_mismatches": engine._raw.parser.walk_mismatches, "callback_errors": engine._raw.callback_errors}
    rt.freeHost(host)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--copies", type=int, default=4000)
    ap.add_argument("--knobs", action="store_true", help="CUPTI's settings instead of the record paths")
    ap.add_argument("--child", choices=VARIANTS + KNOBS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.copies)))
        return 0
    results = []
    variants = ("off", "cupti_only") + KNOBS if args.knobs else VARIANTS
    for rnd in range(3 if args.knobs else 2):
        for v in (variants if rnd % 2 == 0 else tuple(reversed(variants))):
            p = subprocess.run([sys.executable, __file__, args.out, "--copies", str(args.copies), "--child", v],
                               capture_output=True, text=True, timeout=120)
            try:
                r = json.loads(p.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                r = {"variant": v, "error": (p.stderr or p.stdout)[-2000:]}
            r["round"] = rnd
            results.append(r)
            print(json.dumps({k: r.get(k) for k in ("variant", "round", "loop_wall_us_per_copy",
                                                   "flush_cpu_us_per_copy", "callback_cpu_us_per_record",
                                                   "records", "figures_h2d_pinned", "knob", "error")}),
                  flush=True)
    with open(args.out, "w") as f:
        json.dump({"schema": "pinmon.bench.cupti_record_cost/1", "provenance": provenance(),
                   "size_bytes": SIZE, "copies": args.copies, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
