"""Each trace engine's windowed copy rates against a known truth: a paced mixed-library program.

For the GPU box. The program (``--child``) sets up each library of ``--libs`` it can import, and each
copies 8 MiB host->device and 8 MiB device->host per round, at exactly 25 rounds a second (a deadline
schedule): 209.7 MB/s per library and direction. Where each library's copies land in a report:

| library    | host memory of its copies                                     | the hooks see them |
| ---------- | ------------------------------------------------------------- | ------------------ |
| `torch`    | pinned (a `pin_memory()` tensor, `copy_` both ways)           | yes                |
| `cupy`     | pageable (a NumPy array, `ndarray.set` / `get(out=)`)         | yes                |
| `numba`    | pageable (`copy_to_device` / `copy_to_host`)                  | no                 |
| `jax`      | pinned: `device_put` and `np.asarray` stage through JAX's own pinned buffers | no      |
| `cudart12` | the CUDA 12 runtime through ctypes: pinned (`cudaHostAlloc`) and pageable, both ways | no |

The program runs under ``pinmon trace --engine E`` for each engine of ``--engines``. This process
reads its report every 0.1 s during the paced part and keeps those written once a whole window (5.5 s
of it, and a second more) lies inside that part. Per report key (``h2d.pinned``...) and per direction:
the truth (streams x 8 MiB x rounds / paced seconds), the median, min and max of the kept reports'
window rates, and their ratios to the truth. Goal: every windowed rate within 2% of the truth (CUPTI
sees every library; the hooks torch's and CuPy's). Also each key's lifetime bytes in the final report
against the bytes the program moved (warm-up included), its pinned allocations, and the bytes it holds
registered (``cudart12`` registers 8 MiB, which no hook sees) against ``pinned.registered_bytes``.

``--wheels DIR`` (the CUPTI 12 proof, with ``--libs cudart12 --engines cupti``): installs the wheels in
DIR (cupti-python 12.8.0, cuda-bindings 12.8.0, nvidia-cuda-cupti-cu12 and nvidia-cuda-runtime-cu12
12.8.90) into a temporary ``--target`` directory, puts it first on the program's PYTHONPATH, and the
program loads that directory's libcudart.so.12 and libcupti.so.12 before anything else (then
``import cuda.bindings`` starts the tracer, which arms cupti-python 12.8).

Usage (from the repository root):
  python3 bench/trace_paced.py OUT.json [--libs torch,cupy,numba,jax] [--engines cupti,hooks] [--seconds 14]
  python3 bench/trace_paced.py OUT.json --libs cudart12 --engines cupti --wheels .whl12
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from provenance import portable_argv, portable_text, provenance

MIB = 1 << 20
COPY_BYTES = 8 * MIB
ROUND_S = 0.04                 # 25 rounds a second
STREAM_BYTES_PER_S = COPY_BYTES / ROUND_S
WARMUP_ROUNDS = 5
GOAL = 0.02
WINDOW_SETTLE_S = 6.5          # a report counts once its window (up to 5.5 s) lies inside the paced part
LIBS = ("torch", "cupy", "numba", "jax", "cudart12")
HOOKED = {"torch", "cupy"}
KEYS = ("h2d.pinned", "h2d.pageable", "d2h.pinned", "d2h.pageable")


# --- the program ---------------------------------------------------------------------------------------

class Lib:
    """One library's round: ``streams`` are the (direction, host memory) of its 8 MiB copies."""

    def __init__(self, name, streams, round_fn, allocs=(0, 0), registered=0):
        self.name, self.streams, self.round, self.allocs = name, list(streams), round_fn, allocs
        self.registered = registered  # bytes it holds cudaHostRegister'ed


def make_torch():
    import torch

    host = torch.ones(COPY_BYTES // 4).pin_memory()
    dev = torch.empty(COPY_BYTES // 4, device="cuda")

    def rnd():
        dev.copy_(host)
        host.copy_(dev)
        torch.cuda.synchronize()
    return Lib("torch", [("h2d", "pinned"), ("d2h", "pinned")], rnd)


def make_cupy():
    import cupy
    import numpy as np

    a = np.ones(COPY_BYTES // 4, np.float32)
    b = np.empty_like(a)
    d = cupy.empty(a.shape, a.dtype)

    def rnd():
        d.set(a)       # from pageable memory: returns when the copy is done
        d.get(out=b)   # blocking by default
    return Lib("cupy", [("h2d", "pageable"), ("d2h", "pageable")], rnd)


def make_numba():
    import numpy as np
    from numba import cuda

    a = np.ones(COPY_BYTES // 4, np.float32)
    b = np.empty_like(a)
    d = cuda.device_array_like(a)

    def rnd():
        d.copy_to_device(a)
        d.copy_to_host(b)
        cuda.synchronize()
    return Lib("numba", [("h2d", "pageable"), ("d2h", "pageable")], rnd)


def make_jax():
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import numpy as np

    a = np.ones(COPY_BYTES // 4, np.float32)
    gpu = jax.devices("gpu")[0]

    def rnd():
        x = jax.device_put(a, gpu)  # a new array each round: its conversion back is a new copy
        x.block_until_ready()
        np.asarray(x)
    return Lib("jax", [("h2d", "pinned"), ("d2h", "pinned")], rnd)


def make_cudart12():
    """The CUDA 12 runtime through ctypes: the library of ``PACED_CUDART`` (preloaded)."""
    import mmap

    import cuda.bindings  # noqa: F401  (cuda-python: the import that starts the tracer)

    rt = ctypes.CDLL(os.environ.get("PACED_CUDART") or "libcudart.so.12")
    vp, sz = ctypes.c_void_p, ctypes.c_size_t

    def check(status, what):
        if status != 0:
            raise RuntimeError(f"{what}: cudaError {status}")
    version = ctypes.c_int(0)
    check(rt.cudaRuntimeGetVersion(ctypes.byref(version)), "cudaRuntimeGetVersion")
    dev, pinned = vp(), vp()
    check(rt.cudaMalloc(ctypes.byref(dev), sz(COPY_BYTES)), "cudaMalloc")
    check(rt.cudaHostAlloc(ctypes.byref(pinned), sz(COPY_BYTES), ctypes.c_uint(0)), "cudaHostAlloc")
    pageable = ctypes.create_string_buffer(COPY_BYTES)
    # A registered range too (MEMORY2 records it as pinned): page-aligned anonymous memory.
    reg = mmap.mmap(-1, COPY_BYTES)
    reg_addr = ctypes.addressof(ctypes.c_char.from_buffer(reg))
    check(rt.cudaHostRegister(vp(reg_addr), sz(COPY_BYTES), ctypes.c_uint(0)), "cudaHostRegister")
    rt.cudaMemcpy.argtypes = [vp, vp, sz, ctypes.c_int]
    h2d, d2h = 1, 2

    def rnd():
        check(rt.cudaMemcpy(dev, pinned, COPY_BYTES, h2d), "cudaMemcpy")
        check(rt.cudaMemcpy(pinned, dev, COPY_BYTES, d2h), "cudaMemcpy")
        check(rt.cudaMemcpy(dev, ctypes.addressof(pageable), COPY_BYTES, h2d), "cudaMemcpy")
        check(rt.cudaMemcpy(ctypes.addressof(pageable), dev, COPY_BYTES, d2h), "cudaMemcpy")
    lib = Lib("cudart12", [("h2d", "pinned"), ("d2h", "pinned"), ("h2d", "pageable"), ("d2h", "pageable")], rnd,
              allocs=(2, 2 * COPY_BYTES), registered=COPY_BYTES)
    lib.runtime_version = version.value
    lib.keep = (reg, pageable)
    return lib


MAKERS = {"torch": make_torch, "cupy": make_cupy, "numba": make_numba, "jax": make_jax, "cudart12": make_cudart12}


def child(libs_wanted: list, seconds: float, out: str) -> int:
    for path in filter(None, os.environ.get("PACED_PRELOAD", "").split(os.pathsep)):
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)  # this CUDA 12 runtime and CUPTI, before anything else
    libs, errors, extra = [], {}, {}
    for name in libs_wanted:
        try:
            lib = MAKERS[name]()
            for _ in range(WARMUP_ROUNDS):
                lib.round()
            libs.append(lib)
            if hasattr(lib, "runtime_version"):
                extra["cuda_runtime_version"] = lib.runtime_version
        except Exception as e:
            errors[name] = f"{type(e).__name__}: {e}"[:300]
    moved = {k: 0 for k in KEYS}

    def count(rounds):
        for lib in libs:
            for d, mem in lib.streams:
                moved[f"{d}.{mem}"] += rounds * COPY_BYTES
    count(WARMUP_ROUNDS)
    print(f"PACED start {time.time()}", flush=True)
    t0 = time.monotonic()
    wall0 = time.time()
    rounds = late = 0
    while True:
        due = t0 + rounds * ROUND_S
        if due - t0 >= seconds:
            break
        now = time.monotonic()
        if now < due:
            time.sleep(due - now)
        elif now - due > ROUND_S / 2:
            late += 1
        for lib in libs:
            lib.round()
        rounds += 1
    elapsed = time.monotonic() - t0
    wall1 = time.time()
    count(rounds)
    print(f"PACED end {wall1}", flush=True)
    try:
        from importlib import metadata
        versions = {d: metadata.version(d) for d in ("cupti-python", "cuda-bindings") if _has_dist(metadata, d)}
    except Exception:
        versions = {}
    truth = {"libs": {lib.name: lib.streams for lib in libs}, "errors": errors, "rounds": rounds,
             "late_rounds": late, "paced_s": elapsed, "wall_start": wall0, "wall_end": wall1,
             "moved_bytes": moved, "pinned_allocs": [sum(lib.allocs[0] for lib in libs),
                                                     sum(lib.allocs[1] for lib in libs)],
             "registered_bytes": sum(lib.registered for lib in libs),
             "child_versions": versions, **extra}
    with open(out, "w") as f:
        json.dump(truth, f)
    return 0


def _has_dist(metadata, name) -> bool:
    try:
        metadata.version(name)
        return True
    except Exception:
        return False


# --- the measurement -----------------------------------------------------------------------------------

def install_wheels(wheel_dir: str) -> dict:
    """The wheels of ``wheel_dir`` in a temporary --target directory, and the libraries to preload."""
    wheels = sorted(glob.glob(os.path.join(wheel_dir, "*.whl")))
    target = tempfile.mkdtemp(prefix="cupti12_")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
                        "--target", target, *wheels], capture_output=True, text=True, timeout=600)
    cudart = sorted(glob.glob(os.path.join(target, "nvidia", "*", "lib", "libcudart.so.12*")))
    cupti = sorted(glob.glob(os.path.join(target, "nvidia", "*", "lib", "libcupti.so.12*")))
    return {"target": target, "wheels": [os.path.basename(w) for w in wheels], "pip_rc": r.returncode,
            "pip_tail": portable_text(r.stderr[-1500:]), "cudart": cudart[:1], "cupti": cupti[:1]}


def run_engine(engine: str, libs: list, seconds: float, wheels: dict | None) -> dict:
    with tempfile.TemporaryDirectory() as d:
        trace_dir = os.path.join(d, "trace")
        os.mkdir(trace_dir, 0o700)
        truth_path = os.path.join(d, "truth.json")
        env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
        path = [ROOT, env.get("PYTHONPATH", "")]
        if wheels:
            path.insert(0, wheels["target"])
            env["PACED_PRELOAD"] = os.pathsep.join(wheels["cudart"] + wheels["cupti"])
            env["PACED_CUDART"] = (wheels["cudart"] or [""])[0]
        env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
        cmd = [sys.executable, "-m", "pinmon", "trace", "--dir", trace_dir, "--engine", engine, "--",
               sys.executable, HERE, truth_path, "--child", "--libs", ",".join(libs), "--seconds", str(seconds)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        lines: list = []
        err: list = []
        readers = [threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True),
                   threading.Thread(target=lambda: err.extend(p.stderr), daemon=True)]
        for t in readers:
            t.start()
        report_path = os.path.join(trace_dir, f"{p.pid}.json")  # pinmon trace execs: the program's pid
        reports: dict = {}
        deadline = time.monotonic() + seconds * 4 + 300
        while p.poll() is None and time.monotonic() < deadline:
            try:
                with open(report_path) as f:
                    rep = json.load(f)
                reports.setdefault(rep.get("time"), rep)
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        if p.poll() is None:
            p.kill()
        rc = p.wait()
        for t in readers:
            t.join(5)
        try:
            with open(report_path) as f:
                final = json.load(f)
        except (OSError, ValueError):
            final = {}
        try:
            with open(truth_path) as f:
                truth = json.load(f)
        except (OSError, ValueError):
            truth = {}
    row = {"engine": engine, "rc": rc, "stderr_tail": portable_text(
        "".join(err)[-2000:].replace(sys.executable, os.path.basename(sys.executable))),
           "engine_in_report": final.get("engine"), "engine_notice": final.get("engine_notice"),
           "truth": {k: v for k, v in truth.items() if k not in ("wall_start", "wall_end")}}
    if not truth.get("rounds") or not truth.get("libs"):
        row["error"] = ("no library ran" if truth.get("rounds") else "the program did not finish its paced part")
        return row
    # The truth of the engine that ran (auto or cupti fall back to the hooks where CUPTI cannot start).
    ran = "hooks" if final.get("engine") == "hooks" else engine
    row.update(compare(ran, truth, sorted(reports.values(), key=lambda r: r.get("time") or 0), final))
    cupti = final.get("cupti") or {}
    if cupti:
        row["cupti"] = {k: cupti.get(k) for k in ("version", "major", "state", "record_path", "record_path_error",
                                                    "dropped_records", "records", "record_errors",
                                                    "registrations_error", "registrations_notes")}
    return row


def compare(engine: str, truth: dict, reports: list, final: dict) -> dict:
    rate_per_stream = truth["rounds"] * COPY_BYTES / truth["paced_s"]
    seen = {name: streams for name, streams in truth["libs"].items() if engine != "hooks" or name in HOOKED}
    want = {k: 0.0 for k in KEYS}
    for streams in seen.values():
        for d, mem in streams:
            want[f"{d}.{mem}"] += rate_per_stream
    lo, hi = truth["wall_start"] + WINDOW_SETTLE_S, truth["wall_end"]
    kept = [r for r in reports if lo <= (r.get("time") or 0) <= hi]

    def rate(rep, key):
        d, mem = key.split(".")
        v = (((rep.get("copies") or {}).get(d) or {}).get(mem) or {}).get("bytes_per_s")
        return v if isinstance(v, (int, float)) else None

    def stats(values, truth_rate):
        values = [v for v in values if v is not None]
        if not values:
            return {"truth_bytes_per_s": truth_rate, "reports": 0}
        out = {"truth_bytes_per_s": truth_rate, "reports": len(values), "median": statistics.median(values),
               "min": min(values), "max": max(values)}
        if truth_rate:
            ratios = [v / truth_rate for v in values]
            out.update(ratio_median=statistics.median(ratios), ratio_min=min(ratios), ratio_max=max(ratios),
                       within_goal=all(abs(x - 1) <= GOAL for x in ratios))
        return out

    keys = {k: stats([rate(r, k) for r in kept], want[k]) for k in KEYS if want[k] or any(rate(r, k) for r in kept)}
    directions = {}
    for d in ("h2d", "d2h"):
        total = [sum(rate(r, f"{d}.{m}") or 0.0 for m in ("pinned", "pageable", "managed", "other")) for r in kept]
        directions[d] = stats(total, sum(v for k, v in want.items() if k.startswith(d)))
    life = {}
    moved = lifetime_truth(truth, seen)
    for k in KEYS:
        d, mem = k.split(".")
        got = (((final.get("copies") or {}).get(d) or {}).get(mem) or {}).get("bytes")
        life[k] = {"report_bytes": got, "moved_bytes": moved[k],
                   "ratio": got / moved[k] if isinstance(got, (int, float)) and moved[k] else None}
    allocs = final.get("allocs") or {}
    pinned = final.get("pinned") or {}
    return {"libs_seen": sorted(seen), "stream_bytes_per_s": rate_per_stream, "reports_kept": len(kept),
            "reports_read": len(reports), "window_rates": keys, "directions": directions,
            "all_within_goal": bool(keys) and all(v.get("within_goal") for v in keys.values() if v.get("truth_bytes_per_s")),
            "lifetime": life,
            "pinned_allocs": {"program": truth.get("pinned_allocs"),
                              "report": [allocs.get("count"), allocs.get("bytes")]},
            # Registered memory (cudart12's cudaHostRegister, which no hook sees): in the pinned bytes,
            # and as registered where the engine tells registrations apart.
            "registered": {"program": truth.get("registered_bytes"), "report": pinned.get("registered_bytes"),
                           "from": pinned.get("registered_from"), "pinned_bytes": pinned.get("bytes")}}


def lifetime_truth(truth: dict, seen: dict) -> dict:
    """Bytes the program moved per key, of the libraries this engine sees (warm-up included)."""
    rounds = truth["rounds"] + WARMUP_ROUNDS
    out = {k: 0 for k in KEYS}
    for streams in seen.values():
        for d, mem in streams:
            out[f"{d}.{mem}"] += rounds * COPY_BYTES
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--libs", default="torch,cupy,numba,jax")
    ap.add_argument("--engines", default="cupti,hooks")
    ap.add_argument("--seconds", type=float, default=14.0)
    ap.add_argument("--wheels", default=None, help="a directory of CUDA 12 wheels (the CUPTI 12 proof)")
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    libs = [x for x in args.libs.split(",") if x]
    unknown = [x for x in libs if x not in LIBS]
    if unknown:
        ap.error(f"unknown --libs {unknown}; known: {', '.join(LIBS)}")
    if args.child:
        return child(libs, args.seconds, args.out)
    wheels = install_wheels(os.path.abspath(args.wheels)) if args.wheels else None
    if wheels and (wheels["pip_rc"] != 0 or not wheels["wheels"] or not wheels["cupti"]):
        print(f"trace_paced: the wheels of {args.wheels} did not install: {wheels['pip_tail'] or 'no wheels'}",
              file=sys.stderr)
        return 1
    try:
        rows = [run_engine(e, libs, args.seconds, wheels) for e in args.engines.split(",") if e]
    finally:
        if wheels:
            shutil.rmtree(wheels["target"], ignore_errors=True)
    doc = {"schema": "pinmon.bench.trace_paced/1", "time": time.time(), "provenance": provenance(),
           "argv": portable_argv(sys.argv), "copy_bytes": COPY_BYTES, "round_s": ROUND_S,
           "stream_bytes_per_s": STREAM_BYTES_PER_S, "goal_within": GOAL, "engines": rows}
    if wheels:
        doc["wheels"] = {k: v for k, v in wheels.items() if k in ("wheels", "pip_rc", "pip_tail")}
        doc["wheels"]["preloaded"] = [portable_text(p, tmp=tempfile.gettempdir()) for p in wheels["cudart"] + wheels["cupti"]]
    with open(args.out, "w") as f:
        f.write(portable_text(json.dumps(doc, indent=1)))
    for r in rows:
        print(f"{r['engine']:6s} rc={r['rc']} engine={r.get('engine_in_report')} kept={r.get('reports_kept')} "
              f"all within {GOAL:.0%}: {r.get('all_within_goal')}")
        for k, v in (r.get("window_rates") or {}).items():
            print(f"   {k:13s} truth {v['truth_bytes_per_s'] / 1e6:7.1f} MB/s  median x{v.get('ratio_median', float('nan')):.3f}"
                  f"  [{v.get('ratio_min', float('nan')):.3f}, {v.get('ratio_max', float('nan')):.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
