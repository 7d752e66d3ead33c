"""Where pinmon's CPU goes: per thread of the live programs, and per part of one snapshot.

- ``threads``: the TUI (``pinmon --no-probe`` on a 160x48 pseudo-terminal), a 1 Hz collect loop and,
  where it imports, nvitop at 1 Hz run for ``--seconds`` each after a 3 s warm-up; each thread's CPU
  seconds over the window (the scheduler's nanoseconds, else user+system ticks), the main thread named
  as such (in the TUI it draws the screen; the collection runs in a worker thread, the byte/error
  counters in their own).
- ``parts``: in this process, ``--snapshots`` calls of each part of ``LiveCollector.snapshot()``
  (host memory, NVML read, /proc scan, tracer reports), CPU time per call (``time.thread_time``).
- ``profile``: the TUI's main thread under cProfile for ``--seconds``; the top functions by own
  time and by cumulative time are written next to the JSON.
- ``snapprofile``: ``--snapshots`` live snapshots under cProfile (the collection, which runs in a
  worker thread of the app), written next to the JSON likewise.

Usage: python bench/cpu_breakdown.py OUT.json [--seconds 30] [--snapshots 50] [--parts threads,parts,profile,snapprofile]
[--tree DIR] measures the pinmon package found under DIR instead of this checkout (an A/B of two trees).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from overhead import COLLECT_LOOP, WARMUP_S, imports, spawn, stop_spawned  # the same programs as overhead.py

from provenance import portable_argv, provenance

PTY_SIZE = (160, 48)


def _env(tree: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (tree, env.get("PYTHONPATH")) if x)
    env.setdefault("TERM", "xterm-256color")
    return env


def _thread_times(proc: psutil.Process) -> dict[int, float]:
    """CPU seconds of each thread: the scheduler's nanosecond count (``/proc/PID/task/TID/schedstat``,
    its first field) where the kernel has it, else user+system time in clock ticks (10 ms: over a
    30 s window a thread at 0.2% is 6 ticks, too coarse to compare two versions)."""
    out: dict[int, float] = {}
    for t in proc.threads():
        try:
            with open(f"/proc/{proc.pid}/task/{t.id}/schedstat") as f:
                out[t.id] = int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            out[t.id] = t.user_time + t.system_time
    return out


def _wakeups(proc: psutil.Process) -> dict[int, int]:
    """Voluntary context switches of each thread (a thread that polls on a timer shows its rate):
    psutil reads a thread's counts as a process's (Linux lists each thread under /proc too)."""
    out = {}
    for t in proc.threads():
        try:
            out[t.id] = psutil.Process(t.id).num_ctx_switches().voluntary
        except psutil.Error:
            pass  # the thread ended meanwhile
    return out


def thread_cpu(argv: list[str], seconds: float, env: dict, pty_size=None, cwd: str = ROOT) -> dict:
    """CPU share of one core per thread of ``argv`` over ``seconds`` after the warm-up."""
    # -m/-c put the working directory first on sys.path: cwd picks the tree measured.
    p, master, stop = spawn(argv, env, pty_size, cwd)
    try:
        time.sleep(WARMUP_S)
        if p.poll() is not None:
            return {"argv": portable_argv(argv), "error": f"exited during warm-up with code {p.returncode}"}
        proc = psutil.Process(p.pid)
        t0, s0, w0 = _thread_times(proc), _wakeups(proc), time.monotonic()
        time.sleep(seconds)
        t1, s1, wall = _thread_times(proc), _wakeups(proc), time.monotonic() - w0
    finally:
        stop_spawned(p, master, stop)
    threads = []
    for tid, cpu in t1.items():
        delta = cpu - t0.get(tid, 0.0)
        wakes = s1.get(tid, 0) - s0.get(tid, 0) if tid in s1 else None
        threads.append({"thread": "main" if tid == p.pid else f"tid {tid}",
                        "cpu_share": delta / wall, "cpu_s": delta,
                        "wakeups_per_s": None if wakes is None else wakes / wall})
    threads.sort(key=lambda t: -t["cpu_s"])
    total = sum(t["cpu_s"] for t in threads)
    return {"argv": portable_argv(argv), "window_s": wall, "cpu_share": total / wall, "threads": threads}


def part_threads(seconds: float, tree: str) -> dict:
    """The app, a bare collect loop and, where it imports, nvitop at 1 Hz on the same pty size:
    where each one's CPU goes, thread by thread."""
    py, env = sys.executable, _env(tree)
    out = {
        "tui": thread_cpu([py, "-m", "pinmon", "--interval", "1", "--no-probe"], seconds, env, PTY_SIZE, tree),
        "collect": thread_cpu([py, "-c", COLLECT_LOOP, "gpm"], seconds, env, cwd=tree),
    }
    if imports(py, "nvitop", env):
        out["nvitop"] = thread_cpu([py, "-m", "nvitop", "--interval", "1"], seconds, env, PTY_SIZE, tree)
    return out


def part_parts(snapshots: int, tree: str) -> dict:
    """CPU per call of each part of a live snapshot, measured in a child on ``tree``'s code."""
    code = r"""
import json, sys, time
from pinmon.collect.live import LiveCollector
from pinmon.collect.traced.reader import read_all
n = int(sys.argv[1])
col = LiveCollector(interval_s=1.0)
time.sleep(2.0)
parts = {"host": col.host.read, "scan": col.scanner.scan,
         "traced": lambda: read_all(), "snapshot": col.snapshot}
if col._nvml is not None:
    parts["nvml"] = col._nvml.read
out = {}
for name, fn in parts.items():
    fn()
    c0 = time.thread_time()
    for _ in range(n):
        fn()
        time.sleep(0.02)  # spread out, as a 1 Hz loop would, so caches are not all warm
    out[name + "_cpu_s"] = (time.thread_time() - c0) / n
scan = col.scanner.scan()
out["processes_scanned"] = scan.scanned
out["cuda_processes"] = len(scan.processes)
col.close()
print(json.dumps(out))
"""
    r = subprocess.run([sys.executable, "-c", code, str(snapshots)], env=_env(tree), cwd=tree,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1:] or [f"exit {r.returncode}"]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def part_snapprofile(snapshots: int, tree: str, out_path: str) -> dict:
    """``LiveCollector.snapshot()`` under cProfile in a child (the collection runs in a worker thread
    of the app, which the ``profile`` part does not see): the top functions by own and cumulative
    time, written next to the JSON."""
    report = out_path + ".snapshot_profile.txt"
    code = r"""
import cProfile, pstats, sys, time
from pinmon.collect.live import LiveCollector
n, report = int(sys.argv[1]), sys.argv[2]
col = LiveCollector(interval_s=1.0)
time.sleep(2.0)
col.snapshot()
prof = cProfile.Profile()
for _ in range(n):
    time.sleep(0.02)
    prof.enable()
    col.snapshot()
    prof.disable()
col.close()
with open(report, "w") as f:
    st = pstats.Stats(prof, stream=f).strip_dirs()  # file names only: no path of this machine
    f.write(f"{n} snapshots\n")
    st.sort_stats("tottime").print_stats(40)
    st.sort_stats("cumulative").print_stats(60)
"""
    r = subprocess.run([sys.executable, "-c", code, str(snapshots), report], env=_env(tree), cwd=tree,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1:] or [f"exit {r.returncode}"]}
    return {"report": os.path.basename(report), "snapshots": snapshots}


def part_profile(seconds: float, tree: str, out_path: str) -> dict:
    fd, prof = tempfile.mkstemp(suffix=".prof")
    os.close(fd)
    argv = [sys.executable, "-m", "cProfile", "-o", prof, "-m", "pinmon", "--interval", "1", "--no-probe"]
    p, master, stop = spawn(argv, _env(tree), PTY_SIZE, tree)
    try:
        time.sleep(WARMUP_S + seconds)
    finally:
        stop_spawned(p, master, stop, quit_key=b"q")  # a clean exit writes the profile
    if not os.path.getsize(prof):
        return {"error": "no profile written"}
    text = io.StringIO()
    keep = out_path + ".prof"  # the whole profile, for callers/callees later
    with open(prof, "rb") as src, open(keep, "wb") as dst:
        dst.write(src.read())
    stats = pstats.Stats(prof, stream=text).strip_dirs()  # file names only: no path of this machine
    stats.sort_stats("tottime").print_stats(40)
    stats.sort_stats("cumulative").print_stats(60)
    report = out_path + ".profile.txt"
    with open(report, "w") as f:
        f.write(text.getvalue())
    os.unlink(prof)
    return {"report": os.path.basename(report), "profile": os.path.basename(keep)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--snapshots", type=int, default=50)
    ap.add_argument("--parts", default="threads,parts,profile")
    ap.add_argument("--tree", default=ROOT, help="directory holding the pinmon package to measure")
    args = ap.parse_args(argv)
    tree = os.path.abspath(args.tree)
    result = {"provenance": provenance(tree), "seconds": args.seconds, "time": time.time()}
    for part in args.parts.split(","):
        if part == "threads":
            result["threads"] = part_threads(args.seconds, tree)
            for name, r in result["threads"].items():
                top = ", ".join(f"{t['thread']} {t['cpu_share'] * 100:.2f}%"
                                + (f" {t['wakeups_per_s']:.0f}/s" if t.get("wakeups_per_s") is not None else "")
                                for t in r.get("threads", [])[:4])
                print(f"{name}: {r.get('cpu_share', float('nan')) * 100:.2f}% of one core ({top})")
        elif part == "parts":
            result["parts"] = part_parts(args.snapshots, tree)
            print("snapshot parts (ms CPU per call):", {k: (round(v * 1e3, 3) if k.endswith("_s") else v)
                                                        for k, v in result["parts"].items()})
        elif part == "snapprofile":
            result["snapprofile"] = part_snapprofile(args.snapshots, tree, args.out)
            print("snapshot profile:", result["snapprofile"])
        elif part == "profile":
            result["profile"] = part_profile(args.seconds, tree, args.out)
            print("profile:", result["profile"])
        else:
            ap.error(f"unknown part {part!r}")
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
