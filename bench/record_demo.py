"""Record the bundled demo on a real GPU: idle, pinned and pageable traffic, a write-combined buffer,
traced examples (small pinned allocations, pageable copies, a WC readback), and a pinned-memory hog that crosses 30% and then 50% of RAM, with live quick probes.

Usage (GPU machine): python bench/record_demo.py OUT.jsonl.gz [--hog-fraction 0.55]
Every figure in the recording is what pinmon measured live; nothing is synthesised.

Each workload is reaped as soon as it exits (``poll`` every tick): an exited child left unreaped is
a zombie, and a recording should show a program only while it runs. The reader also counts a zombie
as dead, so a traced example's row ends when the example does either way.
"""
import argparse
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from pinmon.collect.live import LiveCollector  # noqa: E402
from pinmon.probe import run_probe  # noqa: E402
from pinmon.recording import Recorder  # noqa: E402

HOG = r"""
import sys, time, cupy as cp
target = int(sys.argv[1]); hold = float(sys.argv[2]); step = 1 << 30
ptrs = []
try:
    while len(ptrs) * step < target:
        ptrs.append(cp.cuda.runtime.hostAlloc(step, 0))
        time.sleep(0.25)
    time.sleep(hold)
finally:
    for p in ptrs:
        cp.cuda.runtime.freeHost(p)
"""

WC = r"""
import sys, time, cupy as cp
p = cp.cuda.runtime.hostAlloc(256 << 20, cp.cuda.runtime.hostAllocWriteCombined)
time.sleep(float(sys.argv[1])); cp.cuda.runtime.freeHost(p)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--hog-fraction", type=float, default=0.55)
    ap.add_argument("--probe-every", type=float, default=30.0)
    a = ap.parse_args()
    py = sys.executable
    load = os.path.join(HERE, "transfer_load.py")
    # (start s, argv) of each workload, relative to the start of the recording.
    examples = os.path.join(os.path.dirname(HERE), "examples")

    def traced(name, *args):  # an example under the tracer: its row reads "traced", its figures exact
        return [py, "-m", "pinmon.trace", os.path.join(examples, name), *args]

    plan = [
        (8, [py, load, "18"]),
        (20, traced("small_pinned_allocs.py", "--seconds", "25")),
        (30, [py, load, "18", "--pageable"]),
        (30, traced("pageable_copies.py", "--seconds", "15")),
        (50, [py, load, "10", "--d2h"]),
        (50, [py, "-c", WC, "40"]),
        (50, traced("wc_readback.py", "--seconds", "14")),
    ]
    col = LiveCollector(interval_s=1.0)
    total = col.snapshot().host.effective_mem_limit_bytes
    plan.append((64, [py, "-c", HOG, str(int(total * a.hog_fraction)), "25"]))
    duration = 64 + a.hog_fraction * total / (1 << 30) * 0.8 + 40
    rec = Recorder(a.out)
    procs = []
    probe_lock = threading.Lock()
    last_probe = [None]

    def probe():
        with probe_lock:
            snap = col.snapshot()
            link = snap.gpus[0].link.theoretical_bytes_per_s if snap.gpus else None
            r = run_probe("quick", gpu_index=0, link_theoretical_bytes_per_s=link)
            col.set_probe(r)
            last_probe[0] = time.time()

    t0 = time.time()
    threading.Thread(target=probe, daemon=True).start()
    pending = sorted(plan, key=lambda p: p[0])
    next_t = t0 + 1.0
    try:
        while time.time() - t0 < duration:
            now = time.time() - t0
            while pending and pending[0][0] <= now:
                procs.append(subprocess.Popen(pending.pop(0)[1], stdout=subprocess.DEVNULL))
            procs = [p for p in procs if p.poll() is None]  # reap the workloads that ended
            if last_probe[0] and time.time() - last_probe[0] > a.probe_every and not probe_lock.locked():
                threading.Thread(target=probe, daemon=True).start()
            time.sleep(max(0.0, next_t - time.time()))
            next_t += 1.0
            s = col.snapshot()
            rec.write(s)
            print(f"{time.time()-t0:6.1f}s pinned={s.host.pinned_bytes_est/2**30:6.2f}GiB "
                  f"rx={[(g.pcie.rx_bytes_per_s or 0)/1e9 for g in s.gpus]}", flush=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
        rec.close()
        col.close()
    print("wrote", a.out, rec.count, "snapshots")


if __name__ == "__main__":
    main()
