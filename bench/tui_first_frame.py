"""Time to first frame of the terminal app against nvitop, on a pseudo-terminal, runs alternating.

Each program is spawned on a new pseudo-terminal of ``--size`` (what an SSH session gives it) with
its output drained as a terminal would; the clock runs from the spawn until the first screen that
shows its frame: pinmon's tab strip ("1 Overview" and "7 Containers" in the text it wrote, escape
sequences taken out), nvitop's header ("NVITOP"). Then q quits it (killed after 10 s). The programs
take turns, in ABBA order (pinmon, nvitop, nvitop, pinmon, ...), so a drift of the machine's speed
falls on both alike. nvitop runs where it imports; the JSON says whether NVML saw a GPU (on a box
without one, pinmon's figure is its start-up without NVML's).

Usage: python bench/tui_first_frame.py OUT.json [--runs 10] [--size 80x24] [--only pinmon,nvitop]
       [--pinmon-args "--no-probe"] [--tree DIR]
``--tree DIR`` adds the pinmon of another checkout (``pinmon_tree``) to the turns: an A/B of two trees.
``--bytecode compiled`` (the default) first compiles every module the programs import (pinmon, Textual,
nvitop and what they use) and lets the children cache bytecode, as a package installed by pip is
compiled at install; ``as-is`` keeps the environment's setting. Wheels unpacked with ``pip install
--no-compile`` under ``PYTHONDONTWRITEBYTECODE=1`` are compiled from source at every start (Textual
alone: 0.54 s against 0.21 s from bytecode on the 2-core box), which no installed copy does.
pinmon writes its outline (the tab strip and "starting…") before Textual loads: ``first_frame_s``
is when that is on screen, ``app_frame_s`` when Textual's own frame (with the footer's keys) is.
Goal (issue 30, D1): pinmon's median at most 1.5x nvitop's, in the same run.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import re
import select
import shlex
import signal
import statistics
import struct
import subprocess
import sys
import termios
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from overhead import imports

from provenance import portable_argv, provenance

# Escape sequences (CSI, OSC, two-byte ESC x) taken out of the output, leaving the text written.
_ESCAPES = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
MARKERS = {"pinmon": (b"1 Overview", b"7 Containers"), "nvitop": (b"NVITOP",)}
# The program's own drawn frame, where it differs from the first: pinmon's outline (the tab strip,
# "starting…") is written before Textual loads; Textual's frame is the one with the footer's keys.
APP_MARKERS = {"pinmon": (b"q Quit",)}
TIMEOUT_S = 60.0
QUIT_WAIT_S = 10.0


def shown_text(raw: bytes) -> bytes:
    return _ESCAPES.sub(b"", raw)


def tree_env(env: dict, root: str) -> dict:
    return dict(env, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))


def first_frame(argv: list[str], markers: tuple[bytes, ...], size: tuple[int, int], env: dict,
                app_markers: tuple[bytes, ...] = ()) -> dict:
    """Spawn ``argv`` on a pty of ``size`` (cols, rows); seconds until every marker was written, and
    until every one of ``markers`` and ``app_markers`` was (``app_frame_s``)."""
    cols, rows = size
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its terminal
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    out = b""
    seconds = app_seconds = None
    try:
        while time.perf_counter() - t0 < TIMEOUT_S:
            ready, _, _ = select.select([fd], [], [], 0.02)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            text = shown_text(out)
            now = time.perf_counter() - t0
            if seconds is None and all(m in text for m in markers):
                seconds = now
            if seconds is not None and all(m in text for m in app_markers):
                app_seconds = now
                break
        os.write(fd, b"q")
        end = time.perf_counter() + QUIT_WAIT_S
        status = None
        while time.perf_counter() < end:
            select.select([fd], [], [], 0.05)
            try:
                os.read(fd, 65536)
            except OSError:
                pass
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = None
    finally:
        os.close(fd)
    return {"first_frame_s": seconds, "app_frame_s": app_seconds, "quit_on_q": status is not None,
            "tail": None if seconds is not None else shown_text(out)[-300:].decode("utf-8", "replace")}


def nvml_gpus() -> object:
    """How many GPUs NVML sees here (0 without a driver), or why it could not say."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception as e:  # no driver, no bindings: a box without a GPU
        return f"none ({type(e).__name__})"


def summary(times: list) -> dict:
    got = [t for t in times if t is not None]
    if not got:
        return {"runs": len(times), "failed": len(times)}
    return {"runs": len(times), "failed": len(times) - len(got), "median_s": statistics.median(got),
            "min_s": min(got), "max_s": max(got), "all_s": times}


# What each program imports, for --bytecode compiled: its own package and the libraries it draws with.
IMPORTS = {"pinmon": ("pinmon", "textual", "rich", "psutil", "pynvml", "prometheus_client", "platformdirs",
                      "markdown_it", "pygments"),
           "nvitop": ("nvitop", "psutil", "pynvml")}


def compile_imports(py: str, env: dict, names: list, args: argparse.Namespace) -> list:
    """Compile (``compileall``) the directories of the packages the programs import, in the children's
    environment; the packages compiled."""
    wanted = sorted({m for n in names for m in IMPORTS.get(n, ())})
    code = ("import compileall, importlib.util, os, sys\n"
            "done = []\n"
            "for name in sys.argv[1:]:\n"
            "    spec = importlib.util.find_spec(name)\n"
            "    if spec is None or not spec.origin:\n"
            "        continue\n"
            "    where = os.path.dirname(spec.origin) if spec.submodule_search_locations else spec.origin\n"
            "    ok = compileall.compile_dir(where, quiet=2) if os.path.isdir(where) else compileall.compile_file(where, quiet=2)\n"
            "    done.append(name)\n"
            "print(' '.join(done))\n")
    r = subprocess.run([py, "-c", code, *wanted], env=env, capture_output=True, text=True, timeout=600, cwd="/")
    return r.stdout.split()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--runs", type=int, default=10, help="runs of each program (default 10)")
    ap.add_argument("--size", default="80x24")
    ap.add_argument("--only", default="pinmon,nvitop")
    ap.add_argument("--pinmon-args", default="--no-probe", help='pinmon\'s arguments (default "--no-probe")')
    ap.add_argument("--tree", default=None, help="another checkout's pinmon to compare (pinmon_tree)")
    ap.add_argument("--bytecode", choices=("compiled", "as-is"), default="compiled",
                    help="compile what the programs import first, as an installed package is (default)")
    args = ap.parse_args(argv)
    size = tuple(int(x) for x in args.size.lower().split("x"))
    env = tree_env(dict(os.environ, TERM="xterm-256color"), ROOT)
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    no_cache_set = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    if args.bytecode == "compiled":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    py = sys.executable
    programs = {"pinmon": [py, "-m", "pinmon", *shlex.split(args.pinmon_args)],
                "nvitop": [py, "-m", "nvitop"]}
    wanted = [p for p in args.only.split(",") if p]
    envs = {name: env for name in programs}
    if args.tree:
        programs["pinmon_tree"] = programs["pinmon"]
        envs["pinmon_tree"] = tree_env(env, os.path.abspath(args.tree))
        MARKERS["pinmon_tree"] = MARKERS["pinmon"]
        wanted.insert(1, "pinmon_tree")
    result: dict = {"provenance": provenance(), "size": f"{size[0]}x{size[1]}", "nvml_gpus": nvml_gpus(),
                    "tree": os.path.basename(os.path.abspath(args.tree)) if args.tree else None,
                    "order": "ABBA", "programs": {}, "skipped": {}}
    if "nvitop" in wanted and not imports(py, "nvitop", env):
        wanted.remove("nvitop")
        result["skipped"]["nvitop"] = "nvitop does not import here"
    result["bytecode"] = {"mode": args.bytecode, "PYTHONDONTWRITEBYTECODE_was_set": no_cache_set}
    if args.bytecode == "compiled":
        result["bytecode"]["compiled"] = compile_imports(py, env, [n for n in wanted if n != "pinmon_tree"], args)
    times: dict = {p: [] for p in wanted}
    app_times: dict = {p: [] for p in wanted}
    runs: list = []
    for i in range(args.runs):
        order = wanted if i % 2 == 0 else wanted[::-1]
        for name in order:
            base = "pinmon" if name == "pinmon_tree" else name
            r = first_frame(programs[name], MARKERS[name], size, envs[name], APP_MARKERS.get(base, ()))
            times[name].append(r["first_frame_s"])
            app_times[name].append(r["app_frame_s"])
            runs.append({"program": name, "round": i, **r})
            shown = "no frame" if r["first_frame_s"] is None else f"{r['first_frame_s']:.3f} s"
            if base in APP_MARKERS and r["app_frame_s"] is not None:
                shown += f" (its app's frame {r['app_frame_s']:.3f} s)"
            print(f"round {i} {name:>7}: {shown}", flush=True)
    for name in wanted:
        result["programs"][name] = {"argv": portable_argv(programs[name]), **summary(times[name])}
        base = "pinmon" if name == "pinmon_tree" else name
        if base in APP_MARKERS:
            result["programs"][name]["app_frame"] = summary(app_times[name])
    mine, theirs = result["programs"].get("pinmon", {}), result["programs"].get("nvitop", {})
    if mine.get("median_s") and theirs.get("median_s"):
        result["pinmon_over_nvitop_median"] = mine["median_s"] / theirs["median_s"]
        result["goal_met"] = result["pinmon_over_nvitop_median"] <= 1.5
        print(f"pinmon / nvitop (medians): {result['pinmon_over_nvitop_median']:.2f} (goal <= 1.5)")
        app = mine.get("app_frame", {})
        if app.get("median_s"):
            result["pinmon_app_frame_over_nvitop_median"] = app["median_s"] / theirs["median_s"]
            print(f"pinmon's Textual frame / nvitop (medians): {result['pinmon_app_frame_over_nvitop_median']:.2f}")
    other = result["programs"].get("pinmon_tree", {})
    if mine.get("median_s") and other.get("median_s"):
        result["pinmon_over_tree_median"] = mine["median_s"] / other["median_s"]
        print(f"pinmon / pinmon of --tree (medians): {result['pinmon_over_tree_median']:.2f}")
    if isinstance(result["nvml_gpus"], str):
        result["note"] = "no GPU on this machine: pinmon started without NVML (its live collector finds none)"
    result["runs"] = runs
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    for name in wanted:
        s = result["programs"][name]
        if "median_s" in s:
            print(f"{name}: median {s['median_s']:.3f} s (min {s['min_s']:.3f}, max {s['max_s']:.3f}) over {s['runs']} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
