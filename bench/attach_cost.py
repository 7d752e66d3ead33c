"""What pinmon attach costs: attach and detach times, pinmon's CPU at 10,000 events a second (both
readers), the cost of one probed call, and the slowdown of two loops of 1 MiB pinned copies: back-to-back
synchronous copies (``loop_1mib``: the worst case, a probe's cost on every short call) and asynchronous
copies on a stream synchronised every 64 (``loop_1mib_async``: how PyTorch's ``non_blocking`` copies
and CuPy's streams run).

Two machines, one script:

- here (default, ``--standin``; root, gcc, tracefs): the stand-in libcuda of the tests, built with gcc,
  called by ``bench/attach/paced_driver.c`` (built here too). The copies do nothing: the per-call cost
  is the uprobe's alone, and the loop slowdown is not measured (nothing to slow).
- the GPU box (``--real``; root): the machine's libcuda.so.1 copied to ``--lcdir`` (default /tmp/lcdir:
  the driver's own files sit on squashfs there, which refuses uprobes) and loaded from it through
  ``LD_LIBRARY_PATH``; the workloads are CuPy (``--workload cupy``, default) or the C driver
  (``--workload driver``, gcc on the box or ``--driver PATH`` of a binary built elsewhere).

Goals (from the issue; reported, never asserted): attach and detach at most 0.2 s each, pinmon at most
5% of a core at 10,000 events/s, a 1 MiB pinned copy loop slowed by at most 1%.

Usage (root, from the repository root):
  python3 bench/attach_cost.py OUT.json                      # here
  python3 bench/attach_cost.py OUT.json --real               # GPU box, CuPy
  python3 bench/attach_cost.py OUT.json --real --workload driver
  python3 bench/attach_cost.py OUT.json --parts attach_detach --rounds 15   # one part
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
from attach_accuracy import real_libcuda

from pinmon.attach import AttachError, AttachSession
from provenance import portable_argv, portable_text, provenance

DRIVER_SOURCE = os.path.join(HERE, "attach", "paced_driver.c")
PARTS = ("attach_detach", "cpu_raw", "cpu_text", "per_call", "loop_1mib", "loop_1mib_async")
STANDIN_SOURCE = os.path.join(ROOT, "tests", "attach", "standin_libcuda.c")
MIB = 1 << 20

CUPY_CHILD = r"""
import json, sys, time
import cupy, numpy
mode, a, size = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rt = cupy.cuda.runtime
mem = cupy.cuda.alloc_pinned_memory(max(size, 4096))
d = cupy.empty(max(size, 4096), numpy.uint8)
stream = cupy.cuda.Stream(non_blocking=True)
def go():
    print("ready", flush=True)
    sys.stdin.readline()
if mode == "rate":
    print("ready", flush=True)
    t0 = time.monotonic(); n = int(a * float(sys.argv[4]))
    for i in range(n):
        due = t0 + i / a
        while time.monotonic() < due:
            time.sleep(max(0.0, due - time.monotonic()))
        rt.memcpyAsync(d.data.ptr, mem.ptr, 4, 1, stream.ptr)
    stream.synchronize()
    print(json.dumps({"calls": n}), flush=True)
elif mode == "tight":
    for _ in range(1000):
        rt.memcpyAsync(d.data.ptr, mem.ptr, size, 1, stream.ptr)
    stream.synchronize(); go()
    n = int(a); t0 = time.perf_counter()
    for _ in range(n):
        rt.memcpyAsync(d.data.ptr, mem.ptr, size, 1, stream.ptr)
    t1 = time.perf_counter(); stream.synchronize()
    print(json.dumps({"calls": n, "ns_per_call": (t1 - t0) * 1e9 / n}), flush=True)
elif mode == "loop":
    for _ in range(20):
        rt.memcpy(d.data.ptr, mem.ptr, size, 1)
    go()
    n = 0; t0 = time.monotonic()
    while time.monotonic() - t0 < a:
        rt.memcpy(d.data.ptr, mem.ptr, size, 1); n += 1
    t1 = time.monotonic()
    print(json.dumps({"copies": n, "seconds": t1 - t0, "copies_per_s": n / (t1 - t0)}), flush=True)
elif mode == "aloop":
    for _ in range(64):
        rt.memcpyAsync(d.data.ptr, mem.ptr, size, 1, stream.ptr)
    stream.synchronize(); go()
    n = 0; t0 = time.monotonic()
    while time.monotonic() - t0 < a:
        for _ in range(64):
            rt.memcpyAsync(d.data.ptr, mem.ptr, size, 1, stream.ptr)
        stream.synchronize(); n += 64
    t1 = time.monotonic()
    print(json.dumps({"copies": n, "seconds": t1 - t0, "copies_per_s": n / (t1 - t0)}), flush=True)
"""


class Workload:
    """Starts the chosen workload program in one of its modes (rate, tight, loop, aloop)."""

    def __init__(self, kind: str, env: dict, driver: str | None, standin: bool, tmp: str) -> None:
        self.kind, self.env, self.driver, self.standin = kind, env, driver, standin
        self.cupy_child = os.path.join(tmp, "cupy_child.py")
        with open(self.cupy_child, "w") as f:
            f.write(CUPY_CHILD)

    def argv(self, mode: str, *args) -> list:
        if self.kind == "cupy":
            if mode == "rate":
                return [sys.executable, self.cupy_child, "rate", str(args[0]), "4", str(args[1])]
            return [sys.executable, self.cupy_child, mode, str(args[0]), str(args[1])]
        return [self.driver] + (["--standin"] if self.standin else []) + [mode] + [str(a) for a in args]

    def start(self, mode: str, *args) -> subprocess.Popen:
        p = subprocess.Popen(self.argv(mode, *args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=self.env)
        line = p.stdout.readline().strip()
        if line != "ready":
            p.kill()
            raise RuntimeError(f"workload did not start: {line!r} {portable_text(p.stderr.read()[-800:])}")
        return p

    @staticmethod
    def finish(p: subprocess.Popen, go: bool = False, timeout: float = 300) -> dict:
        out, err = p.communicate("go\n" if go else None, timeout=timeout)
        lines = [x for x in out.splitlines() if x.startswith("{")]
        if p.returncode != 0 or not lines:
            raise RuntimeError(f"workload failed (rc {p.returncode}): {portable_text(err[-800:])}")
        return json.loads(lines[-1])


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def attach_times(w: Workload, rounds: int) -> dict:
    p = w.start("rate", 100, rounds * 3 + 30)
    try:
        attach, detach, cleanup, probes = [], [], [], None
        for _ in range(rounds):
            s = AttachSession([p.pid])
            s.attach()
            probes = sum(len(f.probes) for f in s.files)
            s.run(0.2)
            s.detach()
            attach.append(s.attach_s)
            detach.append(s.detach_s)
            cleanup.append(s.cleanup_s)
    finally:
        p.kill()
        p.wait()
    # detach_s: until the probes are gone from the targets; cleanup_s: then pinmon's own instance removed
    return {"rounds": rounds, "probes": probes, "attach_s": _summary(attach), "detach_s": _summary(detach),
            "cleanup_s": _summary(cleanup), "goal_s": 0.2,
            "within_goal": statistics.median(attach) <= 0.2 and statistics.median(detach) <= 0.2}


def cpu_at_rate(w: Workload, rate: float, seconds: float, reader: str) -> dict:
    p = w.start("rate", rate, seconds + 4)
    try:
        with AttachSession([p.pid], reader=reader) as s:
            c0, t0 = cpu_s(), time.monotonic()
            r = s.run(seconds)
            c1, t1 = cpu_s(), time.monotonic()
    finally:
        p.kill()
        p.wait()
    share = (c1 - c0) / (t1 - t0)
    return {"reader": reader, "target_events_per_s": rate, "events": r.events, "events_per_s": r.events / r.window_s,
            "lost_events": r.lost_events, "cpu_share_of_a_core": share, "goal_share": 0.05, "within_goal": share <= 0.05,
            "notices": list(r.notices)}


def probed(w: Workload, mode: str, *args) -> dict:
    """One run of a tight or loop workload with the attach in place from before it starts."""
    p = w.start(mode, *args)
    try:
        with AttachSession([p.pid]) as s:
            out = Workload.finish(p, go=True)
            r = s.finish()
        out["events"] = r.events
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return out


def plain(w: Workload, mode: str, *args) -> dict:
    return Workload.finish(w.start(mode, *args), go=True)


def per_call(w: Workload, n: int, rounds: int) -> dict:
    base = [plain(w, "tight", n, 4)["ns_per_call"] for _ in range(rounds)]
    with_probes = [probed(w, "tight", n, 4)["ns_per_call"] for _ in range(rounds)]
    return {"calls": n, "size_bytes": 4, "rounds": rounds, "plain_ns": _summary(base), "probed_ns": _summary(with_probes),
            "cost_per_probed_call_ns": statistics.median(with_probes) - statistics.median(base)}


def loop_slowdown(w: Workload, seconds: float, rounds: int, mode: str = "loop") -> dict:
    """``loop``: back-to-back synchronous copies; ``aloop``: asynchronous ones on a stream, synchronised
    every 64."""
    base, with_probes = [], []
    for _ in range(rounds):  # alternate, so that drift on the box touches both alike
        base.append(plain(w, mode, seconds, MIB)["copies_per_s"])
        with_probes.append(probed(w, mode, seconds, MIB)["copies_per_s"])
    slow = 1 - statistics.median(with_probes) / statistics.median(base)
    return {"mode": "synchronous" if mode == "loop" else "asynchronous, a stream synchronised every 64 copies",
            "size_bytes": MIB, "seconds": seconds, "rounds": rounds, "plain_copies_per_s": _summary(base),
            "probed_copies_per_s": _summary(with_probes), "slowdown": slow, "goal": 0.01, "within_goal": slow <= 0.01}


def _summary(values: list) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def build_driver(tmp: str) -> str:
    exe = os.path.join(tmp, "paced_driver")
    subprocess.run(["gcc", "-O2", "-o", exe, DRIVER_SOURCE, "-ldl"], check=True, capture_output=True, timeout=120)
    return exe


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--real", action="store_true", help="the GPU box: the machine's libcuda and CuPy")
    ap.add_argument("--workload", choices=("cupy", "driver"), default=None)
    ap.add_argument("--driver", default=None, help="a paced_driver binary built elsewhere (no gcc on the box)")
    ap.add_argument("--lcdir", default="/tmp/lcdir")
    ap.add_argument("--seconds", type=float, default=10.0, help="the CPU measurement's window")
    ap.add_argument("--rate", type=float, default=10_000.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--parts", default=None, help="comma-separated parts to run (default: all): " + ", ".join(PARTS))
    args = ap.parse_args()
    kind = args.workload or ("cupy" if args.real else "driver")
    doc: dict = {"schema": "pinmon.bench.attach_cost/1", "time": time.time(), "provenance": provenance(),
                 "argv": portable_argv(sys.argv), "machine": "gpu" if args.real else "standin", "workload": kind}
    with tempfile.TemporaryDirectory(prefix="attach-cost-") as tmp:
        env = dict(os.environ)
        if args.real:
            src = real_libcuda()
            os.makedirs(args.lcdir, exist_ok=True)
            shutil.copy2(src, os.path.join(args.lcdir, "libcuda.so.1"))
            doc["libcuda"] = {"from": portable_text(src), "copied_to": portable_text(args.lcdir)}
            env["LD_LIBRARY_PATH"] = os.pathsep.join(x for x in (args.lcdir, env.get("LD_LIBRARY_PATH")) if x)
        else:
            subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-fno-ipa-icf", "-o", os.path.join(tmp, "libcuda.so.1"),
                            STANDIN_SOURCE], check=True, capture_output=True, timeout=120)
            env["LD_LIBRARY_PATH"] = tmp
        driver = args.driver or (build_driver(tmp) if kind == "driver" else None)
        w = Workload(kind, env, driver, standin=not args.real, tmp=tmp)
        parts = [("attach_detach", lambda: attach_times(w, args.rounds)),
                 ("cpu_raw", lambda: cpu_at_rate(w, args.rate, args.seconds, "raw")),
                 ("cpu_text", lambda: cpu_at_rate(w, args.rate, args.seconds, "text")),
                 ("per_call", lambda: per_call(w, 200_000 if kind == "driver" else 50_000, args.rounds))]
        if args.real:  # the stand-in's copies do nothing: there is no copy loop to slow down
            parts.append(("loop_1mib", lambda: loop_slowdown(w, 5.0, args.rounds, "loop")))
            parts.append(("loop_1mib_async", lambda: loop_slowdown(w, 5.0, args.rounds, "aloop")))
        wanted = set(args.parts.split(",")) if args.parts else None
        if wanted is not None and not wanted <= set(PARTS):
            ap.error(f"--parts: unknown {sorted(wanted - set(PARTS))}; known: {', '.join(PARTS)}")
        for name, fn in parts:
            if wanted is not None and name not in wanted:
                continue
            try:
                doc[name] = fn()
            except (AttachError, RuntimeError, OSError, subprocess.SubprocessError, ValueError) as e:
                doc[name] = {"error": portable_text(f"{type(e).__name__}: {e}"[:600])}
            print(name, json.dumps(doc[name])[:300], flush=True)
    with open(args.out, "w") as f:
        f.write(portable_text(json.dumps(doc, indent=1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
