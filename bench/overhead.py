"""What pinmon costs and how exact it is, next to its peers. For the GPU box; ``scale`` runs anywhere.

Parts (``--parts``, default all):
- ``collect``, ``tui``, ``export``, ``nvitop``, ``dmon``: each program runs in its own subprocess, one
  after another (sequentially, so they never share cores), for ``--seconds`` at a 1 s refresh:
  (a) a ``pinmon check``-style loop (LiveCollector snapshot every 1 s), (b) ``pinmon --no-probe`` live
  app on a pseudo-terminal, (c) ``pinmon export`` scraped every 15 s, (d) ``nvitop`` on a
  pseudo-terminal (where it imports), (e) ``nvidia-smi dmon -s t -d 1``. CPU share: the CPU seconds
  of the process tree over the window after a 3 s warm-up (as root, counted by a cgroup of its own to
  the microsecond: ``cpu_meter.py``; else user+system ticks), divided by the window (1.0 = one core). RSS: peak of the tree's summed RSS, sampled every second.
- ``accuracy``: a CuPy pinned host-to-device copy loop moves a counted number of bytes, steadily and
  in 0.2 s bursts every 0.7 s; two collectors read at once, one with GPM (the default on Hopper)
  and one with the byte counters; each 1 s interval's RX link bytes of each are set against the
  bytes moved in it (link bytes carry ~8% of protocol overhead, so payload-corrected ratios are
  shown), with what 1 Hz calls of the 20 ms ``nvmlDeviceGetPcieThroughput`` would have reported.
- ``collect_counters``: the ``collect`` loop with GPM turned off (the byte counters' thread).
- ``scale``: time per ``LiveCollector.snapshot()`` with 1, 8 and 64 fake GPUs (tests/fakes) and a
  fake /proc of 1,000 processes (100 of them CUDA); goal: 8 GPUs <= 2x one GPU.

Usage: python bench/overhead.py [--out DIR] [--seconds 60] [--parts collect,tui,export,nvitop,dmon,accuracy,scale]
Prints ratios, writes DIR/overhead.json. Textual is never imported here (the app runs as a child).
"""
from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_meter import CpuMeter, process_tree

from provenance import portable_argv, provenance

PARTS = ("collect", "collect_counters", "tui", "export", "nvitop", "dmon", "accuracy", "scale")
WARMUP_S = 3.0
EXPORT_LISTEN = "127.0.0.1:19477"
MIB = 1 << 20


# --- measuring a process tree --------------------------------------------------------------------

def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in process_tree(proc):
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def _drain(fd: int, stop: threading.Event) -> None:
    # A terminal program blocks when nobody reads its output: read it as a terminal would.
    while not stop.is_set():
        try:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r and not os.read(fd, 65536):
                return
        except OSError:
            return


def spawn(argv: list[str], env=None, pty_size=None, cwd: str = ROOT):
    """Start ``argv`` in ``cwd``, on a pseudo-terminal of ``pty_size`` (cols, rows) when given, its
    output drained as a terminal would; returns (process, pty master or None, drain stop event)."""
    stop = threading.Event()
    master = None
    if pty_size is not None:
        import fcntl
        import pty
        import struct
        import termios

        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", pty_size[1], pty_size[0], 0, 0))
        p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                             start_new_session=True)
        os.close(slave)
        reader = master
    else:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env=env, cwd=cwd, start_new_session=True)
        reader = p.stdout.fileno()
    threading.Thread(target=_drain, args=(reader, stop), daemon=True).start()
    return p, master, stop


def stop_spawned(p, master, stop, quit_key: bytes = b"") -> None:
    """End what ``spawn`` started: ``quit_key`` typed first where given (a clean exit), then
    terminate, then kill."""
    if quit_key and master is not None and p.poll() is None:
        os.write(master, quit_key)
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            pass
    stop.set()
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if master is not None:
        os.close(master)


def measure(argv: list[str], seconds: float, *, pty_size=None, env=None, during=None) -> dict:
    """Run ``argv`` for warm-up + ``seconds``; CPU share and peak RSS of its tree over the window."""
    p, master, stop = spawn(argv, env, pty_size)
    proc = psutil.Process(p.pid)
    meter = CpuMeter(p.pid)  # nanoseconds from a cgroup of its own where root can make one
    out = {"argv": portable_argv(argv), "cpu_meter": meter.kind}
    try:
        time.sleep(WARMUP_S)
        if p.poll() is not None:
            return {**out, "error": f"exited during warm-up with code {p.returncode}"}
        c0, w0 = meter.read(), time.monotonic()
        peak = tree_rss(proc)
        next_scrape = w0
        while time.monotonic() - w0 < seconds and p.poll() is None:
            if during is not None and time.monotonic() >= next_scrape:
                during()
                next_scrape += 15.0
            time.sleep(1.0)
            peak = max(peak, tree_rss(proc))
        wall = time.monotonic() - w0
        cpu = meter.read() - c0
        out.update(cpu_share=cpu / wall, cpu_s=cpu, window_s=wall, peak_rss_mib=peak / MIB,
                   exited=p.poll())
        return out
    finally:
        stop_spawned(p, master, stop)
        meter.close()


def imports(py: str, module: str, env: dict) -> bool:
    """Whether ``module`` imports in the interpreter ``py`` with ``env``, run from ``/`` (a module of
    the working directory does not count)."""
    return subprocess.run([py, "-c", f"import {module}"], env=env, capture_output=True, cwd="/").returncode == 0


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (env.get("PYTHONPATH"), ROOT) if x)
    env.setdefault("TERM", "xterm-256color")
    return env


COLLECT_LOOP = """
import sys, time
from pinmon.collect.live import LiveCollector
with LiveCollector(interval_s=1.0, prefer_gpm=sys.argv[1] == "gpm") as col:
    nxt = time.monotonic()
    while True:
        col.snapshot()
        nxt += 1.0
        time.sleep(max(0.0, nxt - time.monotonic()))
"""


def part_program(name: str, seconds: float) -> dict:
    py = sys.executable
    env = child_env()
    if name in ("collect", "collect_counters"):
        return measure([py, "-c", COLLECT_LOOP, "gpm" if name == "collect" else "counters"], seconds, env=env)
    if name == "tui":
        return measure([py, "-m", "pinmon", "--interval", "1", "--no-probe"], seconds, pty_size=(160, 48), env=env)
    if name == "export":
        def scrape():
            import urllib.request
            try:
                with urllib.request.urlopen(f"http://{EXPORT_LISTEN}/metrics", timeout=5) as r:
                    r.read()
            except OSError:
                pass
        return measure([py, "-m", "pinmon", "export", "--listen", EXPORT_LISTEN, "--interval", "1"], seconds,
                       env=env, during=scrape)
    if name == "nvitop":
        if not imports(py, "nvitop", env):
            return {"skipped": "nvitop does not import"}
        return measure([py, "-m", "nvitop", "--interval", "1"], seconds, pty_size=(160, 48), env=env)
    if name == "dmon":
        smi = shutil.which("nvidia-smi")
        if smi is None:
            return {"skipped": "nvidia-smi not found"}
        return measure([smi, "dmon", "-s", "t", "-d", "1"], seconds, env=env)
    raise ValueError(name)


# --- PCIe accuracy -------------------------------------------------------------------------------

def part_accuracy(seconds: float) -> dict:
    """Both exact methods (GPM, byte counters) side by side, on a steady and on a bursty load."""
    try:
        import cupy as cp
        import pynvml
    except ImportError as e:
        return {"skipped": f"needs CuPy and pynvml: {e}"}
    from pinmon.collect.live import LiveCollector

    size = 64 * MIB
    window = max(5.0, min(seconds, 20.0))
    host = cp.cuda.alloc_pinned_memory(size)
    dev = cp.cuda.alloc(size)
    stream = cp.cuda.Stream(non_blocking=True)
    moved = [0]
    lock = threading.Lock()
    stop = threading.Event()

    def copies(on_s, off_s):
        # Bursts of on_s every on_s + off_s (0.7 s: never in step with the 1 s snapshots).
        with stream:
            while not stop.is_set():
                end = time.monotonic() + on_s
                while time.monotonic() < end and not stop.is_set():
                    cp.cuda.runtime.memcpyAsync(dev.ptr, host.ptr, size, cp.cuda.runtime.memcpyHostToDevice,
                                                stream.ptr)
                    stream.synchronize()
                    with lock:
                        moved[0] += size
                if off_s:
                    stop.wait(off_s)

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    out = {"copy_bytes": size}
    with LiveCollector(interval_s=1.0, prefer_gpm=True) as gpm_col, \
            LiveCollector(interval_s=1.0, prefer_gpm=False) as ctr_col:
        for name, on_s, off_s in (("steady", 1.0, 0.0), ("bursty", 0.2, 0.5)):
            stop.clear()
            for col in (gpm_col, ctr_col):
                col.snapshot()
            time.sleep(1.0)
            rows = []
            with lock:
                m0 = moved[0]
            base = (gpm_col.snapshot(), ctr_col.snapshot())
            t = threading.Thread(target=copies, args=(on_s, off_s))
            t.start()
            nxt = time.monotonic()
            for _ in range(int(window)):
                nxt += 1.0
                time.sleep(max(0.0, nxt - time.monotonic()))
                # The 20 ms sampled call first: it blocks, and the snapshots below close the interval.
                kb = pynvml.nvmlDeviceGetPcieThroughput(handle, pynvml.NVML_PCIE_UTIL_RX_BYTES)
                g, c = gpm_col.snapshot(), ctr_col.snapshot()
                with lock:
                    m1 = moved[0]
                pg, pc = g.gpus[0].pcie, c.gpus[0].pcie
                rows.append({"payload_bytes": m1 - m0, "gpm_rx_bytes": pg.rx_bytes, "gpm_method": pg.method,
                             "gpm_interval_s": pg.interval_s, "counters_rx_bytes": pc.rx_bytes,
                             "counters_method": pc.method, "counters_interval_s": pc.interval_s,
                             "sampled_rx_bytes_1s": kb * 1000.0})
                m0 = m1
            stop.set()
            t.join()
            out[name] = _accuracy_summary(rows, on_s, off_s)
            out[name]["idle_rx_bytes_per_s_before"] = base[1].gpus[0].pcie.rx_bytes_per_s if base[1].gpus else None
    pynvml.nvmlShutdown()
    return out


def _accuracy_summary(rows: list, on_s: float, off_s: float) -> dict:
    """Totals over the window, and how far each 1 s interval strays, per method."""
    import statistics

    payload = sum(r["payload_bytes"] for r in rows)
    out = {"burst_on_s": on_s, "burst_off_s": off_s, "intervals": len(rows), "payload_bytes": payload,
           "rows": rows}
    for key in ("gpm_rx_bytes", "counters_rx_bytes", "sampled_rx_bytes_1s"):
        vals = [r[key] for r in rows]
        if any(v is None for v in vals):
            out[key.replace("_rx_bytes", "").replace("_1s", "")] = {"missing_intervals": sum(v is None for v in vals)}
            continue
        total = sum(vals)
        # Link bytes carry ~7.8% protocol overhead over the payload (measured: 1.078x).
        per = [v / r["payload_bytes"] / 1.078 for v, r in zip(vals, rows) if r["payload_bytes"]]
        out[key.replace("_rx_bytes", "").replace("_1s", "")] = {
            "total_link_bytes": total, "ratio_over_payload": total / payload if payload else None,
            "ratio_after_1_078_link_overhead": total / payload / 1.078 if payload else None,
            "interval_ratio_min": min(per) if per else None, "interval_ratio_max": max(per) if per else None,
            "interval_ratio_median": statistics.median(per) if per else None}
    g = [r["gpm_rx_bytes"] for r in rows]
    c = [r["counters_rx_bytes"] for r in rows]
    if all(v is not None for v in g + c) and all(c):
        per = [a / b for a, b in zip(g, c)]
        out["gpm_over_counters"] = {"total": sum(g) / sum(c), "interval_min": min(per), "interval_max": max(per)}
    return out


# --- scale (CPU only) ----------------------------------------------------------------------------

CUDA_MAPS = ("7f3a00000000-7f3a00200000 rw-s 00000000 00:05 78 /dev/nvidia0\n"
             + "".join(f"7f{i:02x}40000000-7f{i:02x}50000000 rw-s 00000000 00:01 1234 /dev/zero (deleted)\n"
                       for i in range(16)))
PLAIN_MAPS = ("55d0c0000000-55d0c0021000 r-xp 00000000 08:01 4242 /usr/bin/python3.12\n"
              "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n") * 20


def fake_proc(root: str, n: int = 1000, cuda_every: int = 10) -> None:
    # Pids above any pid_max, so psutil never describes a real process by accident.
    for k in range(n):
        d = os.path.join(root, str(5_000_000 + k))
        os.makedirs(d)
        with open(os.path.join(d, "maps"), "w") as f:
            f.write(CUDA_MAPS if k % cuda_every == 0 else PLAIN_MAPS)


def part_scale(repeats: int = 30) -> dict:
    from pinmon.collect.live import LiveCollector
    from tests.fakes.fake_pynvml import FakeNvml

    tmp = tempfile.mkdtemp(prefix="pinmon-scale-")
    fake_proc(tmp)
    res = {"processes": 1000, "cuda_processes": 100, "repeats": repeats}
    for n in (1, 8, 64):
        with LiveCollector(nvml=FakeNvml(n), proc_root=tmp) as col:
            col.snapshot()
            sampler = col._nvml
            s0 = sampler.cpu_seconds()
            w0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(repeats):
                col.snapshot()
            wall = (time.perf_counter() - w0) / repeats
            cpu = (time.thread_time() - c0) / repeats
            share = (sampler.cpu_seconds() - s0) / (time.perf_counter() - w0)
        res[f"gpus_{n}"] = {"snapshot_wall_ms": wall * 1e3, "snapshot_cpu_ms": cpu * 1e3,
                            "sampler_cpu_share": share}
    res["ratio_8_over_1_cpu"] = res["gpus_8"]["snapshot_cpu_ms"] / res["gpus_1"]["snapshot_cpu_ms"]
    res["ratio_64_over_1_cpu"] = res["gpus_64"]["snapshot_cpu_ms"] / res["gpus_1"]["snapshot_cpu_ms"]
    shutil.rmtree(tmp, ignore_errors=True)
    return res


# --- main ----------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results"))
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--parts", default=",".join(PARTS))
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"unknown part {unknown[0]!r} (known: {', '.join(PARTS)})")
    res = {"provenance": provenance(), "seconds": args.seconds,
           "programs_run": "sequentially, one subprocess each", "time": time.time()}
    for part in parts:
        t0 = time.monotonic()
        try:
            if part == "accuracy":
                r = part_accuracy(args.seconds)
            elif part == "scale":
                r = part_scale()
            else:
                r = part_program(part, args.seconds)
        except Exception as e:  # one part failing must not lose the others' figures
            r = {"error": f"{type(e).__name__}: {e}"}
        r["part_wall_s"] = time.monotonic() - t0
        res[part] = r
        if "cpu_share" in r:
            print(f"{part:16} CPU {r['cpu_share'] * 100:6.2f}% of one core, peak RSS {r['peak_rss_mib']:6.1f} MiB")
        elif part == "accuracy" and "steady" in r:
            for load in ("steady", "bursty"):
                a = r[load]
                parts_txt = []
                for m in ("gpm", "counters", "sampled"):
                    x = a.get(m, {})
                    if "ratio_after_1_078_link_overhead" in x:
                        parts_txt.append(f"{m} {x['ratio_after_1_078_link_overhead']:.3f}x"
                                         f" (1 s intervals {x['interval_ratio_min']:.2f}..{x['interval_ratio_max']:.2f})")
                    else:
                        parts_txt.append(f"{m} {x}")
                print(f"accuracy {load}: payload-corrected " + ", ".join(parts_txt))
        elif part == "scale":
            print("scale: " + ", ".join(f"{n} GPUs {r[f'gpus_{n}']['snapshot_cpu_ms']:.2f} ms" for n in (1, 8, 64))
                  + f"; 8/1 = {r['ratio_8_over_1_cpu']:.2f}, 64/1 = {r['ratio_64_over_1_cpu']:.2f}")
        else:
            print(f"{part:8} {r}")
    for name in ("collect_counters", "tui", "export", "nvitop", "dmon"):
        a, b = res.get("collect", {}), res.get(name, {})
        if "cpu_share" in a and "cpu_share" in b and a["cpu_share"]:
            print(f"{name} / collect loop CPU: {b['cpu_share'] / a['cpu_share']:.2f}")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "overhead.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
