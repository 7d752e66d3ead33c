"""Where the CUPTI engine's cost per copy goes: CUPTI itself, cupti-python's record objects, or the
tracer's reading of them. For the GPU box (cupti-python and CuPy needed).

Each variant runs in a fresh child process: CUPTI's MEMCPY, MEMORY2 and CONTEXT activities on, then
``--copies`` synchronous 1 MiB pinned host-to-device copies (``cudaMemcpy``) with nothing flushing
meanwhile (buffers of 8 MiB hold every record), then one flush in the main thread whose completion
callback does the variant's work on every record, timed with ``time.thread_time``:

- ``off``: CUPTI not loaded (the copies' baseline);
- ``drop``: the callback returns at once (CUPTI's cost, and cupti-python's building of the list);
- ``iterate``: the callback only walks the list;
- ``attrs``: it reads the nine fields the tracer needs as attributes of the record objects;
- ``raw``: it reads the same fields from the record's memory (its address, one struct unpack);
- ``tracer``: ``pinmon.trace.cupti_figures.CuptiFigures.consume``, the tracer's own callback.

Printed and written per variant: wall and CPU per copy during the loop, the flush's CPU per record.
Usage: python3 bench/cupti_record_cost.py OUT.json [--copies 4000]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("off", "drop", "iterate", "attrs", "raw", "tracer")
SIZE = 1 << 20
FIELDS = ("kind", "copy_kind", "src_kind", "dst_kind", "bytes", "start", "end", "device_id", "stream_id")


def child(variant: str, copies: int) -> dict:
    import cupy

    out: dict = {"variant": variant, "copies": copies}
    spent = {"cpu_s": 0.0, "records": 0, "checksum": 0}
    if variant != "off":
        from cupti import cupti

        sys.path.insert(0, ROOT)
        from pinmon.trace.cupti_raw import RawRecords

        raw = RawRecords(cupti)
        figures = None
        if variant == "tracer":
            from pinmon.trace.cupti_figures import CuptiFigures
            figures = CuptiFigures(started_ns=int(cupti.get_timestamp()))

        def requested():
            return 8 << 20, 0

        def completed(activities):
            t0 = time.thread_time()
            s = 0
            if variant == "iterate":
                for a in activities:
                    pass
            elif variant == "attrs":
                for a in activities:
                    for f in FIELDS[1:] if a.kind == 1 else ("kind",):
                        s += int(getattr(a, f))
            elif variant == "raw":
                for t in raw.memcpys(activities):
                    s += t[3]
            elif variant == "tracer":
                figures.consume(activities)
            spent["cpu_s"] += time.thread_time() - t0
            spent["records"] += len(activities)
            spent["checksum"] += s

        cupti.activity_register_callbacks(requested, completed)
        for k in ("MEMCPY", "MEMORY2", "CONTEXT"):
            cupti.activity_enable(getattr(cupti.ActivityKind, k))
    rt = cupy.cuda.runtime
    host = rt.hostAlloc(SIZE, 0)
    dev = cupy.cuda.alloc(SIZE)
    for _ in range(50):
        rt.memcpy(dev.ptr, host, SIZE, 1)
    if variant != "off":
        cupti.activity_flush_all(1)
        spent.update(cpu_s=0.0, records=0, checksum=0)
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(copies):
        rt.memcpy(dev.ptr, host, SIZE, 1)
    w1, c1 = time.perf_counter(), time.process_time()
    out["loop_wall_us_per_copy"] = (w1 - w0) / copies * 1e6
    out["loop_cpu_us_per_copy"] = (c1 - c0) / copies * 1e6
    if variant != "off":
        f0 = time.perf_counter()
        cupti.activity_flush_all(1)
        out["flush_wall_s"] = time.perf_counter() - f0
        out["callback_cpu_us_per_record"] = spent["cpu_s"] / spent["records"] * 1e6 if spent["records"] else None
        out["records"] = spent["records"]
        out["checksum"] = spent["checksum"]
        if figures is not None:
            h2d = figures.report()["copies"]["h2d"]["pinned"]
            out["tracer_h2d_pinned"] = {k: h2d.get(k) for k in ("copies", "bytes")}
        out["raw_layout"] = raw.describe()
    rt.freeHost(host)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--copies", type=int, default=4000)
    ap.add_argument("--child", choices=VARIANTS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.copies)))
        return 0
    results = []
    for rnd in range(2):
        for v in (VARIANTS if rnd == 0 else tuple(reversed(VARIANTS))):
            p = subprocess.run([sys.executable, __file__, args.out, "--copies", str(args.copies), "--child", v],
                               capture_output=True, text=True, timeout=120)
            try:
                r = json.loads(p.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                r = {"variant": v, "error": (p.stderr or p.stdout)[-2000:]}
            r["round"] = rnd
            results.append(r)
            print(json.dumps({k: r.get(k) for k in ("variant", "round", "loop_wall_us_per_copy",
                                                   "loop_cpu_us_per_copy", "callback_cpu_us_per_record",
                                                   "records", "error")}), flush=True)
    with open(args.out, "w") as f:
        json.dump({"schema": "pinmon.bench.cupti_record_cost/1", "size_bytes": SIZE, "copies": args.copies,
                   "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
