"""pinmon attach against known traffic on the GPU box: every copy kind's bytes/s within 1% of the
truth, allocation and registration sizes exact, a device-to-host copy into write-combined memory
flagged. One JSON.

Workloads, each its own process started BEFORE the attach, each loading the machine's libcuda.so.1
copied to ``--lcdir`` (the driver's files sit on squashfs on the box, which refuses uprobes) through
``LD_LIBRARY_PATH``, each paced at 25 rounds a second (a deadline schedule) and recording every
round's start on CLOCK_MONOTONIC (the clock of the attach's window):

| workload  | per round                                                         | host memory            |
| --------- | ----------------------------------------------------------------- | ---------------------- |
| `torch`   | 8 MiB `copy_` each way from a `pin_memory()` tensor                | pinned                 |
| `cupy`    | 8 MiB `ndarray.set`/`get` (pageable); `runtime.memcpy` each way from `hostAlloc` memory (pinned); 8 MiB device to host into a 16 MiB write-combined `hostAlloc`; every 0.5 s `hostAlloc` 3 MiB + 4 KiB then `freeHost`, and `hostRegister` 2 MiB then `hostUnregister` | pageable, pinned, write-combined |
| `numba`   | 8 MiB `copy_to_device`/`copy_to_host`                               | pageable               |
| `jax`     | 8 MiB `device_put` and `np.asarray` (`XLA_PYTHON_CLIENT_PREALLOCATE=false`) | pinned (JAX stages) |
| `cudart`  | the CUDA runtime through cuda-bindings (`cuda.bindings.runtime`): 8 MiB `cudaMemcpy` each way from `cudaHostAlloc` and from pageable memory | pinned, pageable |
| `driver`  | `bench/attach/paced_driver.c` (C, dlopens libcuda.so.1): 8 MiB each way pinned and pageable, 8 MiB into write-combined memory, a 2D copy of 8 MiB from pinned memory; every 0.5 s an allocation of 3 MiB + 4 KiB and a registration of 2 MiB | all |

The truth of a stream over the window: its bytes per round times the rounds that started inside the
window, over the window. The attach's figure: its bytes of that (direction, host memory) over the
same window. A workload that cannot start (a library missing) is reported and skipped.

``--vs-cupti torch|cupy``: instead, one paced workload started under ``pinmon trace --engine cupti``
and attached too, both figures per stream side by side (``vs_cupti`` in the JSON): the truth over the
attach's window; the attach's rate; CUPTI's window rates (each report's last 5 to 5.5 s of GPU time)
of the reports written once a whole CUPTI window lies inside the attach's, their median; and CUPTI's
lifetime bytes between the reports nearest the window's two ends, over the time between them. CUPTI
counts copies into write-combined memory with its pinned ones (so ``cupy``'s write-combined stream is
the attach's alone). cupti-python and cuda-bindings must import in the workload's Python (on the GPU
box: the lead's ``.whl`` installed into ``/tmp/site``, on ``PYTHONPATH``).

Usage (root, on the GPU box, from the repository root):
  python3 bench/attach_accuracy.py OUT.json [--libs torch,cupy,numba,jax,cudart,driver] [--window 10]
      [--driver PATH]   # a paced_driver built elsewhere, where the box has no gcc
  python3 bench/attach_accuracy.py OUT.json --vs-cupti torch --window 12
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
from trace_paced import COPY_BYTES, ROUND_S, make_jax, make_numba, make_torch

from provenance import portable_argv, portable_text, provenance

MIB = 1 << 20
COPY = COPY_BYTES
GOAL = 0.01
LIBS = ("torch", "cupy", "numba", "jax", "cudart", "driver")
DRIVER_SOURCE = os.path.join(HERE, "attach", "paced_driver.c")


# --- the workloads (run as children of this script) ------------------------------------------------

def _from_trace_paced(make):
    """A workload of bench/trace_paced.py (the same paced rounds its engines are measured on)."""
    def build():
        lib = make()
        return [(d, m, COPY) for d, m in lib.streams], lib.round, None
    return build


def _cupy():
    import cupy
    import numpy as np
    rt = cupy.cuda.runtime
    a = np.ones(COPY // 4, np.float32)
    b = np.empty_like(a)
    d = cupy.empty(a.shape, a.dtype)
    pinned = rt.hostAlloc(COPY, 0)
    wc = rt.hostAlloc(16 * MIB, 4)                   # cudaHostAllocWriteCombined
    reg = np.ones(2 * MIB, np.uint8)

    def rnd():
        d.set(a)
        d.get(out=b)
        rt.memcpy(d.data.ptr, pinned, COPY, 1)
        rt.memcpy(pinned, d.data.ptr, COPY, 2)
        rt.memcpy(wc, d.data.ptr, COPY, 2)

    def cycle():
        p = rt.hostAlloc(3 * MIB + 4096, 0)
        rt.freeHost(p)
        rt.hostRegister(reg.ctypes.data, reg.nbytes, 0)
        rt.hostUnregister(reg.ctypes.data)
    streams = [("h2d", "pageable", COPY), ("d2h", "pageable", COPY), ("h2d", "pinned", COPY),
               ("d2h", "pinned", COPY), ("d2h", "write_combined", COPY)]
    return streams, rnd, (cycle, 3 * MIB + 4096, 2 * MIB)


def _cudart():
    from cuda.bindings import runtime as rt

    def ok(result):
        err = result[0] if isinstance(result, tuple) else result
        if int(err) != 0:
            raise RuntimeError(f"cudart error {err}")
        return result[1] if isinstance(result, tuple) and len(result) > 1 else None
    dev = ok(rt.cudaMalloc(COPY))
    pinned = ok(rt.cudaHostAlloc(COPY, 0))
    pageable = ctypes.create_string_buffer(COPY)
    page_ptr = ctypes.addressof(pageable)
    h2d, d2h = rt.cudaMemcpyKind.cudaMemcpyHostToDevice, rt.cudaMemcpyKind.cudaMemcpyDeviceToHost

    def rnd():
        ok(rt.cudaMemcpy(dev, pinned, COPY, h2d))
        ok(rt.cudaMemcpy(pinned, dev, COPY, d2h))
        ok(rt.cudaMemcpy(dev, page_ptr, COPY, h2d))
        ok(rt.cudaMemcpy(page_ptr, dev, COPY, d2h))
    rnd.keep = pageable  # type: ignore[attr-defined]
    return [("h2d", "pinned", COPY), ("d2h", "pinned", COPY), ("h2d", "pageable", COPY),
            ("d2h", "pageable", COPY)], rnd, None


MAKERS = {"torch": _from_trace_paced(make_torch), "cupy": _cupy, "numba": _from_trace_paced(make_numba),
          "jax": _from_trace_paced(make_jax), "cudart": _cudart}


def child(lib: str, seconds: float, out: str) -> int:
    streams, rnd, cycle = MAKERS[lib]()
    for _ in range(5):
        rnd()
    print("ready", flush=True)
    rounds, allocs = [], []
    t0 = time.monotonic()
    next_cycle = t0
    i = 0
    while True:
        due = t0 + i * ROUND_S
        if due - t0 >= seconds:
            break
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        rounds.append(time.monotonic())
        rnd()
        if cycle and time.monotonic() >= next_cycle:
            allocs.append(time.monotonic())
            cycle[0]()
            next_cycle += 0.5
        i += 1
    doc = {"streams": streams, "rounds": rounds, "allocs": allocs}
    if cycle:
        doc["alloc_bytes"], doc["register_bytes"] = cycle[1], cycle[2]
    with open(out, "w") as f:
        json.dump(doc, f)
    return 0


# --- the measurement -------------------------------------------------------------------------------

# A CUPTI report's window is up to 5.5 s of GPU time before the report's time; a second more for the
# report to be written.
CUPTI_SETTLE_S = 6.5

def real_libcuda() -> str:
    ctypes.CDLL("libcuda.so.1")
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and os.path.basename(parts[5]).startswith("libcuda.so"):
                return parts[5]
    raise RuntimeError("libcuda.so.1 not found in this process's maps")


def driver_truth(doc: dict) -> dict:
    c = doc["copy_bytes"]
    streams = [(d, m, c) for d, m in doc["streams"]] + [("h2d", "pinned", doc["copy2d_bytes"])]
    return {"streams": streams, "rounds": doc["rounds"], "allocs": doc["allocs"], "alloc_bytes": doc["alloc_bytes"],
            "register_bytes": doc["register_bytes"]}


def compare(truth: dict, proc, start: float, window: float) -> dict:
    rounds = sum(1 for t in truth["rounds"] if start <= t <= start + window)
    want: dict = {}
    for d, m, b in truth["streams"]:
        want[(d, m)] = want.get((d, m), 0) + b * rounds
    rows = {}
    for (d, m), b in sorted(want.items()):
        got = proc.stat(d, m) if proc is not None else None
        rate = got.bytes_per_s if got else 0.0
        ratio = rate / (b / window) if b else None
        rows[f"{d}.{m}"] = {"truth_bytes": b, "truth_bytes_per_s": b / window, "attach_bytes": got.bytes if got else 0,
                            "attach_bytes_per_s": rate, "ratio": ratio, "count": got.count if got else 0,
                            "within_goal": ratio is not None and abs(ratio - 1) <= GOAL}
    extra = {f"{s.direction}.{s.memory}": s.bytes for s in (proc.stats if proc else ()) if (s.direction, s.memory) not in want}
    out = {"rounds_in_window": rounds, "streams": rows, "unexpected": extra,
           "all_within_goal": bool(rows) and all(r["within_goal"] for r in rows.values()),
           "write_combined_flagged": (proc is not None and proc.stat("d2h", "write_combined") is not None)}
    if truth.get("alloc_bytes") and proc is not None:
        n = sum(1 for t in truth["allocs"] if start <= t <= start + window)
        a = proc.allocations
        out["allocations"] = {
            "cycles_in_window": n, "count": a.count, "median_bytes": a.median_bytes, "max_bytes": a.size_max_bytes,
            "frees": a.frees, "registrations": a.registrations, "registration_max_bytes": a.registration_max_bytes,
            "sizes_exact": a.median_bytes == truth["alloc_bytes"] == a.size_max_bytes
            and a.registration_max_bytes == truth["register_bytes"] == a.registration_median_bytes,
            "counts_match_within_one": abs(a.count - n) <= 1 and abs(a.registrations - n) <= 1}
    if proc is not None:
        out["notes"] = list(proc.notes)
    return out


def _report_rate(rep: dict, direction: str, memory: str, key: str = "bytes_per_s"):
    v = (((rep.get("copies") or {}).get(direction) or {}).get(memory) or {}).get(key)
    return v if isinstance(v, (int, float)) else None


def vs_cupti(lib: str, window: float, env: dict, tmp: str) -> dict:
    """One paced workload under ``pinmon trace --engine cupti``, attached too: both figures per stream."""
    from pinmon.attach import AttachError, AttachSession

    trace_dir = os.path.join(tmp, "trace")
    os.mkdir(trace_dir, 0o700)
    out = os.path.join(tmp, f"{lib}_cupti_truth.json")
    run_s = window + 25.0
    cmd = [sys.executable, "-m", "pinmon", "trace", "--dir", trace_dir, "--engine", "cupti", "--",
           sys.executable, os.path.abspath(__file__), out, "--child", lib, "--seconds", str(run_s)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    line = p.stdout.readline().strip()
    if line != "ready":
        p.kill()
        _, err = p.communicate(timeout=60)
        return {"lib": lib, "error": "did not start", "stderr_tail": portable_text(err[-1500:])}
    report_path = os.path.join(trace_dir, f"{p.pid}.json")   # pinmon trace execs: the program's pid
    reports: dict = {}
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            try:
                with open(report_path) as f:
                    rep = json.load(f)
                reports.setdefault(rep.get("time"), rep)
            except (OSError, ValueError):
                pass
            stop.wait(0.1)
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    time.sleep(2.0)  # paced, before the attach
    to_wall = time.time() - time.monotonic()
    doc: dict = {"lib": lib, "window_s": window}
    result = None
    try:
        with AttachSession([p.pid]) as s:
            result = s.run(window)
        doc["attach"] = {"attach_s": result.attach_s, "detach_s": s.detach_s, "events": result.events,
                         "lost_events": result.lost_events, "notices": list(result.notices),
                         "failed": {str(k): v for k, v in result.failed.items()}}
    except AttachError as e:
        doc["attach"] = {"error": str(e)}
    try:
        _, err = p.communicate(timeout=run_s + 120)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    stop.set()
    poller.join(5)
    doc["stderr_tail"] = portable_text(err[-800:])
    try:
        with open(out) as f:
            truth = json.load(f)
    except (OSError, ValueError):
        doc["error"] = f"no truth written (rc {p.returncode})"
        return doc
    if result is None:
        doc["error"] = "not attached"
        return doc
    ordered = [r for _, r in sorted(((t, r) for t, r in reports.items() if isinstance(t, (int, float))),
                                    key=lambda tr: tr[0])]
    final = ordered[-1] if ordered else {}
    doc["cupti"] = {"engine_in_report": final.get("engine"), "engine_notice": final.get("engine_notice"),
                    "reports_read": len(ordered)}
    proc = result.processes.get(p.pid)
    rows = compare(truth, proc, result.started_mono, result.window_s)
    start_wall = result.started_mono + to_wall
    end_wall = start_wall + result.window_s
    kept = [r for r in ordered if start_wall + CUPTI_SETTLE_S <= r["time"] <= end_wall]
    doc["cupti"]["reports_kept"] = len(kept)
    ends = None
    if ordered:
        first = min(ordered, key=lambda r: abs(r["time"] - start_wall))
        last = min(ordered, key=lambda r: abs(r["time"] - end_wall))
        if last["time"] > first["time"]:
            ends = (first, last)
    for key, row in rows["streams"].items():
        d, m = key.split(".")
        truth_rate = row["truth_bytes_per_s"]
        rates = [v for v in (_report_rate(r, d, m) for r in kept) if v is not None]
        row["attach_ratio"] = row.pop("ratio")
        if rates:
            med = statistics.median(rates)
            row.update(cupti_window_bytes_per_s=med, cupti_window_min=min(rates), cupti_window_max=max(rates),
                       cupti_window_ratio=med / truth_rate if truth_rate else None, cupti_reports=len(rates))
        if ends is not None:
            a, b = (_report_rate(r, d, m, "bytes") for r in ends)
            if a is not None and b is not None:
                rate = (b - a) / (ends[1]["time"] - ends[0]["time"])
                row.update(cupti_lifetime_bytes_per_s=rate, cupti_lifetime_ratio=rate / truth_rate if truth_rate else None,
                           cupti_lifetime_span_s=ends[1]["time"] - ends[0]["time"])
    doc.update(rows)
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--libs", default=",".join(LIBS))
    ap.add_argument("--window", type=float, default=10.0)
    ap.add_argument("--lcdir", default="/tmp/lcdir")
    ap.add_argument("--driver", default=None)
    ap.add_argument("--vs-cupti", choices=("torch", "cupy"), default=None,
                    help="one paced workload under pinmon trace --engine cupti, attached too")
    ap.add_argument("--child", default=None)
    ap.add_argument("--seconds", type=float, default=0.0)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.seconds, args.out)
    from pinmon.attach import AttachError, AttachSession

    libs = [x for x in args.libs.split(",") if x]
    doc: dict = {"schema": "pinmon.bench.attach_accuracy/1", "time": time.time(), "provenance": provenance(),
                 "argv": portable_argv(sys.argv), "window_s": args.window, "goal_within": GOAL, "workloads": {}}
    src = real_libcuda()
    os.makedirs(args.lcdir, exist_ok=True)
    shutil.copy2(src, os.path.join(args.lcdir, "libcuda.so.1"))
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    env["LD_LIBRARY_PATH"] = os.pathsep.join(x for x in (args.lcdir, env.get("LD_LIBRARY_PATH")) if x)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (ROOT, env.get("PYTHONPATH")) if x)
    run_s = args.window + 25.0
    if args.vs_cupti:
        with tempfile.TemporaryDirectory(prefix="attach-vs-cupti-") as tmp:
            doc["vs_cupti"] = vs_cupti(args.vs_cupti, args.window, env, tmp)
        with open(args.out, "w") as f:
            f.write(portable_text(json.dumps(doc, indent=1)))
        v = doc["vs_cupti"]
        print("error: " + str(v["error"]) if "error" in v else "\n".join(
            f"{k}: attach x{(r.get('attach_ratio') or 0):.4f}  CUPTI window x{(r.get('cupti_window_ratio') or 0):.4f}"
            f"  lifetime x{(r.get('cupti_lifetime_ratio') or 0):.4f}" for k, r in v["streams"].items()))
        return 0
    with tempfile.TemporaryDirectory(prefix="attach-accuracy-") as tmp:
        procs: dict = {}
        for lib in libs:
            out = os.path.join(tmp, f"{lib}.json")
            try:
                if lib == "driver":
                    exe = args.driver
                    if exe is None:
                        exe = os.path.join(tmp, "paced_driver")
                        subprocess.run(["gcc", "-O2", "-o", exe, DRIVER_SOURCE, "-ldl"], check=True,
                                       capture_output=True, timeout=120)
                    argv = [exe, "paced", str(run_s), out]
                else:
                    argv = [sys.executable, os.path.abspath(__file__), out, "--child", lib, "--seconds", str(run_s)]
                p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                procs[lib] = (p, out)
            except (OSError, subprocess.SubprocessError) as e:
                doc["workloads"][lib] = {"error": portable_text(f"{type(e).__name__}: {e}"[:400])}
        ready = {}
        for lib, (p, out) in procs.items():
            line = p.stdout.readline().strip()
            if line == "ready":
                ready[lib] = (p, out)
            else:
                p.kill()
                _, err = p.communicate(timeout=60)
                doc["workloads"][lib] = {"error": "did not start", "stderr_tail": portable_text(err[-1500:])}
        result = None
        if ready:
            time.sleep(2.0)  # all paced, before the attach
            try:
                with AttachSession([p.pid for p, _ in ready.values()]) as s:
                    result = s.run(args.window)
                doc["attach"] = {"attach_s": result.attach_s, "detach_s": s.detach_s, "events": result.events,
                                 "lost_events": result.lost_events, "failed": {str(k): v for k, v in result.failed.items()},
                                 "files": [{"path": portable_text(f.path), "probes": f.probes, "refused": f.refused}
                                           for f in result.files], "notices": list(result.notices),
                                 "sampled": result.sampled, "window_s": result.window_s}
            except AttachError as e:
                doc["attach"] = {"error": str(e)}
        for lib, (p, out) in ready.items():
            try:
                _, err = p.communicate(timeout=run_s + 120)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
            try:
                with open(out) as f:
                    truth = json.load(f)
            except (OSError, ValueError):
                doc["workloads"][lib] = {"error": f"no truth written (rc {p.returncode})",
                                         "stderr_tail": portable_text(err[-1500:])}
                continue
            if lib == "driver":
                truth = driver_truth(truth)
            if result is None:
                doc["workloads"][lib] = {"error": "not attached"}
                continue
            proc = result.processes.get(p.pid)
            row = compare(truth, proc, result.started_mono, result.window_s)
            row["pid_attached"] = proc is not None
            doc["workloads"][lib] = row
    doc["all_within_goal"] = bool(doc["workloads"]) and all(w.get("all_within_goal") for w in doc["workloads"].values())
    with open(args.out, "w") as f:
        f.write(portable_text(json.dumps(doc, indent=1)))
    for lib, w in doc["workloads"].items():
        print(f"{lib:7s}", "error: " + str(w["error"]) if "error" in w else
              " ".join(f"{k} x{(v['ratio'] or 0):.4f}" for k, v in w["streams"].items()),
              "| WC flagged" if w.get("write_combined_flagged") else "", "| sizes exact" if
              (w.get("allocations") or {}).get("sizes_exact") else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
