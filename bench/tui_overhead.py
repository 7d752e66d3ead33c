"""What the terminal app costs: time to first frame, CPU share of one core and RSS at a 1 s refresh.

Each program runs on a pseudo-terminal of the given size (what an SSH session gives it), its output
drained as a terminal would. First frame: spawn until a marker appears in the output (pinmon's status
line, nvitop's header). CPU: user+system seconds of the process tree over a steady window after the
first frame (psutil), divided by the window. Runs one program at a time, so they do not share cores.

Usage: python bench/tui_overhead.py [--seconds 30] [--out FILE.json] [--only demo,live,nvitop]
Targets: pinmon demo (replay), pinmon live (NVML + /proc + automatic probes, unless --no-probe), and
nvitop (`python -m nvitop`) where it imports.
"""
import argparse
import fcntl
import json
import os
import pty
import select
import signal
import struct
import sys
import termios
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cpu_meter import tree_cpu_s  # the same process-tree accounting
from overhead import tree_rss

from provenance import portable_argv, provenance


def run_on_pty(argv, marker: bytes, seconds: float, size=(80, 24), quit_keys=b"q", env=None):
    """Spawn ``argv`` on a pty; return first-frame time, steady CPU share, RSS and exit status."""
    cols, rows = size
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.environ.update(env or {})
        os.environ["TERM"] = "xterm-256color"
        os.environ.pop("COLUMNS", None)
        os.environ.pop("LINES", None)
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    os.kill(pid, signal.SIGWINCH)
    t0 = time.perf_counter()
    proc = psutil.Process(pid)
    seen = b""
    first_frame_s = None
    out_bytes = 0

    def drain(timeout):
        nonlocal seen, first_frame_s, out_bytes
        r, _, _ = select.select([fd], [], [], timeout)
        if not r:
            return True
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return False
        if not chunk:
            return False
        out_bytes += len(chunk)
        if first_frame_s is None:
            seen = (seen + chunk)[-65536:]
            if marker in seen:
                first_frame_s = time.perf_counter() - t0
        return True

    deadline = t0 + 60
    while first_frame_s is None and time.perf_counter() < deadline:
        if not drain(0.05):
            break
    warm_until = time.perf_counter() + 3.0  # start-up work (imports, first scans) is not steady state
    while time.perf_counter() < warm_until and drain(0.05):
        pass
    cpu0, w0 = tree_cpu_s(proc), time.perf_counter()
    rss_peak = 0
    bytes0 = out_bytes
    end = w0 + seconds
    while time.perf_counter() < end:
        if not drain(0.1):
            break
        rss_peak = max(rss_peak, tree_rss(proc))
    cpu1, w1 = tree_cpu_s(proc), time.perf_counter()
    window = w1 - w0
    os.write(fd, quit_keys)
    exit_deadline = time.perf_counter() + 15
    status = None
    while time.perf_counter() < exit_deadline:
        drain(0.05)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        status = None
    os.close(fd)
    return {"argv": portable_argv(argv), "size": f"{cols}x{rows}", "first_frame_s": first_frame_s,
            "window_s": window, "cpu_seconds": cpu1 - cpu0,
            "cpu_share_of_one_core": (cpu1 - cpu0) / window if window > 0 else None,
            "rss_peak_bytes": rss_peak, "output_bytes_per_s": (out_bytes - bytes0) / window if window else None,
            "exited_on_quit": status is not None and os.WIFEXITED(status),
            "exit_code": os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default="demo,live,nvitop")
    ap.add_argument("--size", default="80x24")
    args = ap.parse_args()
    cols, rows = (int(x) for x in args.size.split("x"))
    env = {"PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    py = sys.executable
    targets = {
        "demo": ([py, "-m", "pinmon", "demo"], b"REPLAY"),
        "live": ([py, "-m", "pinmon", "--interval", "1"], b"LIVE"),
        "live_no_probe": ([py, "-m", "pinmon", "--interval", "1", "--no-probe"], b"LIVE"),
        # nvitop's monitor refreshes every 2 s by default; ask for 1 s to compare like with like.
        "nvitop": ([py, "-m", "nvitop", "--interval", "1"], b"NVITOP"),
    }
    wanted = [t for t in args.only.split(",") if t]
    results = {"provenance": provenance(), "seconds": args.seconds, "runs": {}}
    for name in wanted:
        argv, marker = targets[name]
        if name == "nvitop":
            try:
                import nvitop  # noqa: F401
            except Exception as e:
                results["runs"][name] = {"skipped": f"nvitop does not import: {e}"}
                print(f"{name}: skipped ({e})")
                continue
        r = run_on_pty(argv, marker, args.seconds, size=(cols, rows), env=env)
        results["runs"][name] = r
        share = r["cpu_share_of_one_core"]
        print(f"{name:>14}: first frame {r['first_frame_s'] if r['first_frame_s'] is None else round(r['first_frame_s'], 2)} s, "
              f"CPU {share * 100 if share is not None else float('nan'):.2f}% of one core over {r['window_s']:.0f} s, "
              f"RSS {r['rss_peak_bytes'] / 2**20:.0f} MiB, quit ok: {r['exited_on_quit']}")
    runs = results["runs"]
    for mine in ("live", "live_no_probe", "demo"):
        if runs.get(mine, {}).get("cpu_share_of_one_core") and runs.get("nvitop", {}).get("cpu_share_of_one_core"):
            ratio = runs[mine]["cpu_share_of_one_core"] / runs["nvitop"]["cpu_share_of_one_core"]
            results[f"{mine}_cpu_vs_nvitop"] = ratio
            print(f"pinmon {mine} / nvitop CPU: {ratio:.2f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
