"""Main-thread CPU of one second's update in the terminal app, headless: new snapshot in, screen drawn.

The app runs under Textual's test pilot (no terminal, no workers) at ``--size``. Snapshots are an idle
H200 box: the bundled demo's first snapshot, its clock stepping 1 s, PCIe at a few MB/s of noise and
available RAM moving by up to 50 MB, no processes, no probe (what a live app on a quiet box redraws each
second: the clock, the GPU rows, the RAM line). After 60 to fill the sparklines, each further snapshot
is timed with ``time.thread_time``: ``apply`` (history, advisor, views' text) and ``compositor`` (the
screen update Textual builds from it), medians over ``--snapshots``.

Usage: python bench/tui_frame.py OUT.json [--tree DIR] [--size 160x48] [--snapshots 300]
``--tree DIR`` measures the pinmon package under DIR (an A/B of two trees, run one after the other).
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gzip
import json
import os
import random
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance

DEMO = os.path.join(ROOT, "pinmon", "data", "demo.jsonl.gz")
WARM = 60


def idle_snapshots(n: int, seed: int = 1) -> list[dict]:
    with gzip.open(DEMO, "rt") as f:
        first = json.loads(f.readline())
    rng = random.Random(seed)
    out = []
    for i in range(n):
        s = json.loads(json.dumps(first))
        s["time"] = first["time"] + i
        s["processes"], s["probe"], s["notices"], s["source"] = [], None, [], "live"
        s["host"]["pinned_bytes_est"] = 0
        s["host"]["mem_available_bytes"] = first["host"]["mem_available_bytes"] - rng.randrange(0, 50_000_000)
        for g in s["gpus"]:
            g["processes"], g["notices"] = [], []
            g["pcie"]["rx_bytes_per_s"] = rng.uniform(1e5, 3e6)
            g["pcie"]["tx_bytes_per_s"] = rng.uniform(1e5, 3e6)
        out.append(s)
    return out


async def measure(size: tuple[int, int], count: int) -> dict:
    from textual.screen import Screen

    from pinmon.cli.common import advise
    from pinmon.cli.config import Config
    from pinmon.model import Snapshot
    from pinmon.tui.app import PinmonApp

    snaps = [Snapshot.from_dict(d) for d in idle_snapshots(WARM + count)]
    snaps = [dataclasses.replace(s, source="live") for s in snaps]

    class Source:
        live = True
        interval_s = 1.0

        def snapshot(self):
            return snaps[0]

        def close(self):
            pass

    spent = [0.0]
    real = Screen._compositor_refresh

    def timed_refresh(self):
        t = time.thread_time()
        try:
            return real(self)
        finally:
            spent[0] += time.thread_time() - t

    Screen._compositor_refresh = timed_refresh
    config = Config()
    app = PinmonApp(Source(), lambda h: advise(h, config), start_polling=False, probe_every_s=None)
    applies, comps = [], []
    async with app.run_test(size=size) as pilot:
        for s in snaps[:WARM]:
            app.apply_snapshot(s)
        await pilot.pause(0.3)
        for s in snaps[WARM:]:
            spent[0] = 0.0
            t = time.thread_time()
            app.apply_snapshot(s)
            applies.append(time.thread_time() - t)
            await pilot.pause(0.02)  # the screen update runs here
            comps.append(spent[0])
    Screen._compositor_refresh = real
    both = [a + c for a, c in zip(applies, comps)]
    return {"apply_ms": statistics.median(applies) * 1e3, "compositor_ms": statistics.median(comps) * 1e3,
            "total_ms": statistics.median(both) * 1e3,
            "total_quartiles_ms": [q * 1e3 for q in statistics.quantiles(both, n=4)]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--tree", default=ROOT)
    ap.add_argument("--size", default="160x48")
    ap.add_argument("--snapshots", type=int, default=300)
    args = ap.parse_args()
    tree = os.path.abspath(args.tree)
    sys.path.insert(0, tree)
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    result = asyncio.run(measure((cols, rows), args.snapshots))
    import pinmon

    # The A/B is void if another pinmon (an installed one) was imported instead of the tree's.
    result["pinmon_from_tree"] = os.path.dirname(pinmon.__file__) == os.path.join(tree, "pinmon")
    result.update({"provenance": provenance(tree), "size": [cols, rows], "snapshots": args.snapshots,
                   "time": time.time()})
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{tree}: apply {result['apply_ms']:.2f} ms + compositor {result['compositor_ms']:.2f} ms"
          f" = {result['total_ms']:.2f} ms per update (median of {args.snapshots})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
