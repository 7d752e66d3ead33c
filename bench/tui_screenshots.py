"""Screenshots of the real app: live (on a GPU box, during a transfer) and the bundled demo.

Usage: python bench/tui_screenshots.py OUTDIR [--live SECONDS] [--demo]
Writes SVGs named live-80x24.svg, live-160x48.svg, demo-80x24.svg, demo-160x48.svg, and prints the
time to first frame.
"""
import argparse
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pinmon.advise import advise  # noqa: E402
from pinmon.tui.app import PinmonApp  # noqa: E402


async def shoot(make_source, out, name, size, wait_s, **kw):
    src = make_source()
    app = PinmonApp(src, lambda h: advise(h), **kw)
    t0 = time.perf_counter()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        while app.session.latest is None and time.perf_counter() - t0 < 10:
            await pilot.pause(0.05)
        print(f"{name} {size}: first snapshot after {time.perf_counter() - t0:.2f} s")
        await pilot.pause(wait_s)
        app.save_screenshot(os.path.join(out, f"{name}-{size[0]}x{size[1]}.svg"))
    src.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--live", type=float, default=0)
    ap.add_argument("--demo", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.live:
        from pinmon.collect.collector import LiveCollector
        from pinmon.probe import run_probe

        for size in ((80, 24), (160, 48)):
            asyncio.run(shoot(lambda: LiveCollector(interval_s=1.0), a.out, "live", size, a.live,
                              probe_runner=lambda kind="quick", **kw: run_probe(kind, **kw),
                              probe_unavailable_reason=None, probe_every_s=60.0))
    if a.demo:
        from pinmon.cli.commands.demo import demo_path
        from pinmon.collect.replay import ReplaySource

        for size in ((80, 24), (160, 48)):
            # Speed 16 reaches the pinned hog (about 100 s into the recording) within a few seconds.
            asyncio.run(shoot(lambda: ReplaySource(demo_path()), a.out, "demo", size, 7.0,
                              interval_s=1.0, speed=16.0, probe_every_s=None))


if __name__ == "__main__":
    main()
