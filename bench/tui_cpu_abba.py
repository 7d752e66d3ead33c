"""CPU of the terminal app against nvitop at 1 Hz, in ABBA order: pinmon, nvitop, nvitop, pinmon.

Each run is one program alone on a pseudo-terminal of ``--size`` (160x48: the wide layout, graphs on),
its output drained as a terminal would, measured as ``overhead.py`` measures (the CPU seconds of the
process tree over ``--seconds`` after a 3 s warm-up, over the window; 1.0 = one core): as root, to the
microsecond from a cgroup of the run's own (``cpu_meter.py``; each run records its ``cpu_meter``), else in
10 ms ticks. A round is
A B B A; ``--rounds`` of them. ABBA puts a drift of the machine (a virtual machine's neighbours, its
clock) on both programs alike; each round gives a ratio of the two programs' mean shares.

Usage: python bench/tui_cpu_abba.py OUT.json [--rounds 3] [--seconds 45] [--size 160x48]
       [--pinmon-args "--interval 1 --no-probe"] [--only pinmon,nvitop]
Without nvitop (or with --only pinmon) it measures pinmon alone, runs still in pairs. ``--tree DIR``
puts the pinmon of another checkout in nvitop's place (``pinmon_tree``): an A/B of two trees. ``--pinmon-args
"demo"`` measures the replay of the bundled recording (no NVML: a box without a GPU).
Goal (issue 31): the app at most nvitop's CPU at 1 Hz, 160x48, graphs on.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from overhead import child_env, imports, measure  # the same process-tree accounting

from provenance import portable_argv, provenance


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=45.0)
    ap.add_argument("--size", default="160x48")
    ap.add_argument("--pinmon-args", default="--interval 1 --no-probe")
    ap.add_argument("--only", default="pinmon,nvitop")
    ap.add_argument("--tree", default=None, help="another checkout's pinmon, in nvitop's place")
    args = ap.parse_args(argv)
    size = tuple(int(x) for x in args.size.lower().split("x"))
    env = child_env()
    py = sys.executable
    programs = {"pinmon": [py, "-m", "pinmon", *shlex.split(args.pinmon_args)],
                "nvitop": [py, "-m", "nvitop", "--interval", "1"]}
    wanted = [p for p in args.only.split(",") if p]
    envs = {name: env for name in programs}
    if args.tree:
        programs["pinmon_tree"] = programs["pinmon"]
        envs["pinmon_tree"] = dict(env, PYTHONPATH=os.path.abspath(args.tree))
        wanted = ["pinmon", "pinmon_tree"]
    result: dict = {"provenance": provenance(), "size": args.size, "seconds": args.seconds, "order": "ABBA",
                    "tree": os.path.basename(os.path.abspath(args.tree)) if args.tree else None,
                    "argv": {}, "rounds": [], "skipped": {}}
    if "nvitop" in wanted and not imports(py, "nvitop", env):
        wanted.remove("nvitop")
        result["skipped"]["nvitop"] = "nvitop does not import here"
    a, b = (wanted + wanted)[:2]  # pinmon alone: its runs still come in pairs
    for name in wanted:
        result["argv"][name] = portable_argv(programs[name])
    for r in range(args.rounds):
        runs = []
        for name in (a, b, b, a):
            m = measure(programs[name], args.seconds, pty_size=size, env=envs[name])
            m["program"] = name
            runs.append(m)
            share = m.get("cpu_share")
            print(f"round {r} {name:>7}: " + (f"CPU {share * 100:.3f}% of one core, peak RSS {m['peak_rss_mib']:.0f} MiB"
                                              if share is not None else str(m)), flush=True)
        means = {}
        for name in wanted:
            shares = [m["cpu_share"] for m in runs if m["program"] == name and m.get("cpu_share") is not None]
            means[name] = statistics.mean(shares) if shares else None
        row = {"runs": runs, "mean_cpu_share": means}
        if means.get("pinmon") and means.get("nvitop"):
            row["pinmon_over_nvitop"] = means["pinmon"] / means["nvitop"]
        if means.get("pinmon") and means.get("pinmon_tree"):
            row["pinmon_over_tree"] = means["pinmon"] / means["pinmon_tree"]
        result["rounds"].append(row)
    ratios = [r["pinmon_over_nvitop"] for r in result["rounds"] if "pinmon_over_nvitop" in r]
    for name in wanted:
        shares = [m["cpu_share"] for r in result["rounds"] for m in r["runs"]
                  if m["program"] == name and m.get("cpu_share") is not None]
        if shares:
            result[f"{name}_cpu_share_median"] = statistics.median(shares)
            print(f"{name}: median CPU {statistics.median(shares) * 100:.3f}% of one core over {len(shares)} runs")
    trees = [r["pinmon_over_tree"] for r in result["rounds"] if "pinmon_over_tree" in r]
    if trees:
        result["pinmon_over_tree_per_round"] = trees
        print("pinmon / pinmon of --tree per round: " + ", ".join(f"{x:.2f}" for x in trees))
    if ratios:
        result["pinmon_over_nvitop_per_round"] = ratios
        result["goal_met_every_round"] = all(x <= 1.0 for x in ratios)
        print("pinmon / nvitop per round: " + ", ".join(f"{x:.2f}" for x in ratios) + " (goal <= 1.0)")
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
