"""A traced CuPy process on a real GPU against the bounds a report is held to: the CUDA-process check,
the mappings' floor and its slack, the GPU links' ceiling on rates.

Usage: python3 bench/report_bounds_gpu.py OUT.json        (about half a minute on a one-GPU box)

A child under ``pinmon trace`` (CuPy) allocates 256 MiB of default pinned memory, 64 MiB write-combined
and 500 x 4 KiB, then copies 256 MiB host-to-device from pinned memory in a loop. With it running:

1. ``devices``: the host's ``/dev/nvidia*`` nodes pinmon learns (``kernel_objects.learn``), and whether
   the child is a CUDA process by them (the fast path) and by ``/proc/PID/map_files`` alone (no node
   known: a container's own nodes).
2. ``row``: the live collector's snapshot (NVML on): the child's row (``traced``), the report's own pinned
   and write-combined bytes, the maps estimate, ``held.report_understated``, and the gap between the maps
   and the report's allocated bytes: what ``bounds.UNDERSTATED_SLACK_BYTES`` (16 MiB) must cover for a
   truthful report (a context's own staging, 2 MiB chunks of small allocations).
3. ``rates``: the ceilings of the snapshot's GPUs (``rates.ceilings_of``) and the row's copy rates, which
   a real load must leave known (not None), and the notices.

A part that cannot run is recorded with its error. The JSON holds ``provenance`` (bench/provenance.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance

MIB = 1 << 20
SCHEMA = "pinmon.bench.report_bounds/1"

CHILD = r"""
import sys, threading
import cupy as cp
rt = cp.cuda.runtime
cp.zeros(1)
keep = [rt.hostAlloc(256 << 20, 0), rt.hostAlloc(64 << 20, rt.hostAllocWriteCombined)]
keep += [rt.hostAlloc(4096, 0) for _ in range(500)]
dev = cp.empty(256 << 20, dtype=cp.uint8)
stop = threading.Event()

def copy():
    while not stop.is_set():
        rt.memcpy(dev.data.ptr, keep[0], 256 << 20, rt.memcpyHostToDevice)

t = threading.Thread(target=copy, daemon=True)
t.start()
print("ready", flush=True)
sys.stdin.read()
stop.set()
t.join()
"""


def part(out: dict, name: str, fn) -> None:
    try:
        out[name] = fn()
    except Exception as e:  # record and go on: one part's failure must not lose the others
        out[name] = {"error": f"{type(e).__name__}: {e}"}


def devices(pid: int) -> dict:
    from pinmon.collect.processes.kernel_objects import KernelObjects, learn
    from pinmon.collect.processes.scan import ProcessScanner

    objects = learn()
    fast = ProcessScanner(pids=[pid], objects=objects).scan().processes
    kernel_only = KernelObjects(shmem_dev=objects.shmem_dev, nvidiactl=None)
    asked = ProcessScanner(pids=[pid], objects=kernel_only).scan().processes
    return {"nvidia_nodes_learned": len(objects.nvidia_nodes), "nvidiactl_learned": objects.nvidiactl is not None,
            "cuda_by_host_nodes": bool(fast), "cuda_by_map_files_alone": bool(asked),
            "pinned_bytes_by_map_files_alone": asked[0].held.pinned_bytes if asked else None}


def row_and_rates(pid: int, report_dir: str) -> tuple[dict, dict]:
    from pinmon.collect.live import LiveCollector
    from pinmon.collect.traced.rates import ceilings_of

    with open(os.path.join(report_dir, f"{pid}.json")) as f:
        report = json.load(f)
    with LiveCollector(pids=[pid], kernel_read_every_s=0, oom_lookback_s=0) as col:
        time.sleep(2.0)  # NVML's first readings, and a window of copies in the report
        snap = col.snapshot()
        est = col.scanner.estimate(pid)
    rows = [p for p in snap.processes if p.pid == pid]
    r = rows[0] if rows else None
    pinned = report.get("pinned", {})
    reported_alloc = (pinned.get("bytes") or 0) - min(pinned.get("registered_bytes") or 0, pinned.get("bytes") or 0)
    row = {
        "source": r.source if r else None,
        "report_pinned_bytes": pinned.get("bytes"), "report_write_combined_bytes": pinned.get("write_combined_bytes"),
        "report_engine": report.get("engine"),
        "maps_pinned_bytes": est.pinned_bytes if est else None,
        "maps_write_combined_bytes": est.write_combined_bytes if est else None,
        "row_pinned_bytes": r.held.pinned_bytes if r else None,
        "row_write_combined_bytes": r.held.write_combined_bytes if r else None,
        "report_understated": r.held.report_understated if r else None,
        "maps_minus_report_bytes": (est.pinned_bytes - reported_alloc) if est else None,
        "slack_bytes": 16 * MIB,
    }
    ceil = ceilings_of(snap.gpus)
    copies = r.copies if r else None
    rates = {
        "gpus": [{"index": g.index, "name": g.name, "link_max_bytes_per_s": g.link.max_theoretical_bytes_per_s}
                 for g in snap.gpus],
        "window_ceiling_bytes_per_s": ceil.window_bytes_per_s, "copy_ceiling_bytes_per_s": ceil.copy_bytes_per_s,
        "h2d_pinned_bytes_per_s": (copies.get("h2d", "pinned").bytes_per_s
                                   if copies and copies.get("h2d", "pinned") else None),
        "h2d_pinned_achieved_bytes_per_s": (copies.get("h2d", "pinned").achieved_bytes_per_s
                                            if copies and copies.get("h2d", "pinned") else None),
        "copies_notes": list(copies.notes) if copies else [],
        "notices": [n for n in snap.notices if n.startswith("trace reports:")],
    }
    return row, rates


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out: dict = {"schema": SCHEMA, "provenance": provenance()}
    with tempfile.TemporaryDirectory(prefix="pinmon-bounds-") as report_dir:
        os.chmod(report_dir, 0o700)
        env = dict(os.environ, PINMON_TRACE_DIR=report_dir, PINMON_TRACE_INTERVAL="0.2")
        child = subprocess.Popen([sys.executable, "-m", "pinmon", "trace", "--", sys.executable, "-c", CHILD],
                                 cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        try:
            if child.stdout.readline().strip() != "ready":
                out["error"] = child.stderr.read()[-2000:]
            else:
                deadline = time.monotonic() + 30
                while not os.path.exists(os.path.join(report_dir, f"{child.pid}.json")) and time.monotonic() < deadline:
                    time.sleep(0.1)
                time.sleep(1.5)  # a report written with the copy loop running
                part(out, "devices", lambda: devices(child.pid))
                both: dict = {}
                part(both, "x", lambda: row_and_rates(child.pid, report_dir))
                if isinstance(both["x"], tuple):
                    out["row"], out["rates"] = both["x"]
                else:
                    out["row"] = out["rates"] = both["x"]
        finally:
            child.stdin.close()
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    with open(argv[0], "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(json.dumps({k: v for k, v in out.items() if k != "provenance"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
