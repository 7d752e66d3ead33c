"""What pinmon costs and how exact it is, next to its peers. For the GPU box; ``scale`` runs anywhere.

Parts (``--parts``, default all):
- ``collect``, ``tui``, ``export``, ``nvitop``, ``dmon``: each program runs in its own subprocess, one
  after another (sequentially, so they never share cores), for ``--seconds`` at a 1 s refresh:
  (a) a ``pinmon check``-style loop (LiveCollector snapshot every 1 s), (b) ``pinmon --no-probe`` live
  app on a pseudo-terminal, (c) ``pinmon export`` scraped every 15 s, (d) ``nvitop`` on a
  pseudo-terminal (where it imports), (e) ``nvidia-smi dmon -s t -d 1``. CPU share: user+system
  seconds of the process tree (psutil) over the window after a 3 s warm-up, divided by the window
  (1.0 = one core). RSS: peak of the tree's summed RSS, sampled every second.
- ``accuracy``: a CuPy pinned host-to-device copy loop moves a counted number of bytes; pinmon's
  counters-method RX bytes over exactly that window vs the bytes moved (link bytes carry ~8% of
  protocol overhead, so the payload-corrected ratio is shown too), and what 1 Hz calls of the
  20 ms ``nvmlDeviceGetPcieThroughput`` would have reported.
- ``scale``: time per ``LiveCollector.snapshot()`` with 1, 8 and 64 fake GPUs (tests/fakes) and a
  fake /proc of 1,000 processes (100 of them CUDA); goal: 8 GPUs <= 2x one GPU.

Usage: python bench/overhead.py [--out DIR] [--seconds 60] [--parts collect,tui,export,nvitop,dmon,accuracy,scale]
Prints ratios, writes DIR/overhead.json. Textual is never imported here (the app runs as a child).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
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
PARTS = ("collect", "tui", "export", "nvitop", "dmon", "accuracy", "scale")
WARMUP_S = 3.0
EXPORT_LISTEN = "127.0.0.1:19477"
MIB = 1 << 20


# --- measuring a process tree --------------------------------------------------------------------

def _tree(proc: psutil.Process) -> list:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def tree_cpu_s(proc: psutil.Process) -> float:
    total = 0.0
    for p in _tree(proc):
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in _tree(proc):
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


def measure(argv: list[str], seconds: float, *, pty_size=None, env=None, during=None) -> dict:
    """Run ``argv`` for warm-up + ``seconds``; CPU share and peak RSS of its tree over the window."""
    stop = threading.Event()
    master = None
    if pty_size is not None:
        import fcntl
        import pty
        import struct
        import termios

        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", pty_size[1], pty_size[0], 0, 0))
        p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT,
                             start_new_session=True)
        os.close(slave)
        reader = master
    else:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env=env, cwd=ROOT, start_new_session=True)
        reader = p.stdout.fileno()
    drainer = threading.Thread(target=_drain, args=(reader, stop), daemon=True)
    drainer.start()
    proc = psutil.Process(p.pid)
    out = {"argv": argv}
    try:
        time.sleep(WARMUP_S)
        if p.poll() is not None:
            return {**out, "error": f"exited during warm-up with code {p.returncode}"}
        c0, w0 = tree_cpu_s(proc), time.monotonic()
        peak = tree_rss(proc)
        next_scrape = w0
        while time.monotonic() - w0 < seconds and p.poll() is None:
            if during is not None and time.monotonic() >= next_scrape:
                during()
                next_scrape += 15.0
            time.sleep(1.0)
            peak = max(peak, tree_rss(proc))
        wall = time.monotonic() - w0
        cpu = tree_cpu_s(proc) - c0
        out.update(cpu_share=cpu / wall, cpu_s=cpu, window_s=wall, peak_rss_mib=peak / MIB,
                   exited=p.poll())
        return out
    finally:
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


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (env.get("PYTHONPATH"), ROOT) if x)
    env.setdefault("TERM", "xterm-256color")
    return env


COLLECT_LOOP = """
import time
from pinmon.collect.collector import LiveCollector
with LiveCollector(interval_s=1.0) as col:
    nxt = time.monotonic()
    while True:
        col.snapshot()
        nxt += 1.0
        time.sleep(max(0.0, nxt - time.monotonic()))
"""


def part_program(name: str, seconds: float) -> dict:
    py = sys.executable
    env = child_env()
    if name == "collect":
        return measure([py, "-c", COLLECT_LOOP], seconds, env=env)
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
        probe = subprocess.run([py, "-c", "import nvitop"], env=env, capture_output=True)
        if probe.returncode != 0:
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
    try:
        import cupy as cp
        import pynvml
    except ImportError as e:
        return {"skipped": f"needs CuPy and pynvml: {e}"}
    from pinmon.collect.collector import LiveCollector

    size = 256 * MIB
    window = max(5.0, min(seconds, 20.0))
    host = cp.cuda.alloc_pinned_memory(size)
    dev = cp.cuda.alloc(size)
    stream = cp.cuda.Stream(non_blocking=True)
    moved = [0]
    stop = threading.Event()

    def copies():
        with stream:
            while not stop.is_set():
                cp.cuda.runtime.memcpyAsync(dev.ptr, host.ptr, size, cp.cuda.runtime.memcpyHostToDevice, stream.ptr)
                stream.synchronize()
                moved[0] += size

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    sampled = []

    def sample_1hz():
        while not stop.is_set():
            t = time.monotonic()
            kb = pynvml.nvmlDeviceGetPcieThroughput(handle, pynvml.NVML_PCIE_UTIL_RX_BYTES)
            sampled.append(kb * 1000.0)  # B/s over a 20 ms window, extrapolated to the second
            stop.wait(max(0.0, 1.0 - (time.monotonic() - t)))

    with LiveCollector(interval_s=1.0) as col:
        col.snapshot()
        time.sleep(1.0)
        base = col.snapshot()  # the counting interval restarts here
        t0 = time.monotonic()
        threads = [threading.Thread(target=copies), threading.Thread(target=sample_1hz)]
        for t in threads:
            t.start()
        time.sleep(window)
        stop.set()
        for t in threads:
            t.join()
        t1 = time.monotonic()
        snap = col.snapshot()
    pynvml.nvmlShutdown()
    g = snap.gpus[0] if snap.gpus else None
    rx = g.pcie.rx_bytes if g is not None else None
    idle_rate = base.gpus[0].pcie.rx_bytes_per_s if base.gpus else None
    sampled_bytes = sum(sampled) * 1.0  # each 1 Hz call stands for one second
    out = {"window_s": t1 - t0, "payload_bytes": moved[0], "method": g.pcie.method if g else None,
           "pinmon_rx_link_bytes": rx, "pinmon_interval_s": g.pcie.interval_s if g else None,
           "idle_rx_bytes_per_s_before": idle_rate,
           "ratio_pinmon_over_payload": rx / moved[0] if rx and moved[0] else None,
           "ratio_after_1_078_link_overhead": rx / moved[0] / 1.078 if rx and moved[0] else None,
           "sampled_calls": len(sampled), "sampled_extrapolated_bytes": sampled_bytes,
           "ratio_sampled_over_payload": sampled_bytes / moved[0] if moved[0] else None}
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
    from pinmon.collect.collector import LiveCollector
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
    res = {"python": platform.python_version(), "cpus": os.cpu_count(), "seconds": args.seconds,
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
            print(f"{part:8} CPU {r['cpu_share'] * 100:6.2f}% of one core, peak RSS {r['peak_rss_mib']:6.1f} MiB")
        elif part == "accuracy" and "ratio_pinmon_over_payload" in r:
            print(f"accuracy: pinmon {r['ratio_pinmon_over_payload']:.3f}x payload (link bytes;"
                  f" {r['ratio_after_1_078_link_overhead']:.3f}x after 1.078 overhead),"
                  f" sampled 1 Hz {r['ratio_sampled_over_payload']:.3f}x")
        elif part == "scale":
            print("scale: " + ", ".join(f"{n} GPUs {r[f'gpus_{n}']['snapshot_cpu_ms']:.2f} ms" for n in (1, 8, 64))
                  + f"; 8/1 = {r['ratio_8_over_1_cpu']:.2f}, 64/1 = {r['ratio_64_over_1_cpu']:.2f}")
        else:
            print(f"{part:8} {r}")
    for name in ("tui", "export", "nvitop", "dmon"):
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
