"""Screenshots of the real app: live (on a GPU box, during a transfer) and the bundled demo.

Usage: python bench/tui_screenshots.py OUTDIR [--live SECONDS] [--demo] [--demo-at SECONDS] [--prefix NAME]
       [--no-probe] [--shot NAME=KEY,KEY ...] [--shot-wait SECONDS]
Writes SVGs named live-80x24.svg, live-160x48.svg, demo-80x24.svg, demo-160x48.svg, and prints the
time to first frame. ``--prefix`` replaces "live" in the live shots' names; ``--no-probe`` keeps the
live app from probing (its copies would add to the traffic being shown). Each ``--shot`` takes one
more screenshot of each size after the first, named PREFIX-WxH-NAME.svg, after pressing its keys
(Textual's key names; the shots follow one another, so their keys add up), ``--shot-wait`` seconds
after the keys (0.5; a demo replays at 16x, so 5 s later is 80 s further into the recording).
The demo's first shots show the snapshot ``--demo-at`` seconds into the recording (197: the pinned hog
near its peak, ``pinned-ram-share`` critical): the replay holds there until they are taken, so the
shots do not depend on how fast the machine replays.
"""
import argparse
import asyncio
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pinmon.advise import advise
from pinmon.tui.app import PinmonApp


def held_replay(path, at_s):
    """A replay of ``path`` that holds once it has given the snapshot ``at_s`` seconds after its first
    (``reached``), until ``go()``."""
    from pinmon.recording.replay import ReplaySource

    class HeldReplay(ReplaySource):
        def __init__(self):
            super().__init__(path)
            self.at_s = at_s
            self.first = None
            self.reached = threading.Event()
            self._go = threading.Event()

        def snapshot(self):
            if self.reached.is_set():
                self._go.wait()
            snap = super().snapshot()
            if snap is not None:
                self.first = snap.time if self.first is None else self.first
                if snap.time - self.first >= at_s:
                    self.reached.set()
            return snap

        def go(self):
            self._go.set()

    return HeldReplay()


async def shoot(make_source, out, name, size, wait_s, shots=(), shot_wait_s=0.5, **kw):
    """Screenshots of the app on ``make_source()``: ``wait_s`` after the first snapshot, or, for a
    ``held_replay``, once its held snapshot is shown (at most ``wait_s`` x 10)."""
    src = make_source()
    app = PinmonApp(src, lambda h: advise(h), **kw)
    t0 = time.perf_counter()
    held = getattr(src, "reached", None)
    try:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            while app.session.latest is None and time.perf_counter() - t0 < 10:
                await pilot.pause(0.05)
            print(f"{name} {size}: first snapshot after {time.perf_counter() - t0:.2f} s")
            if held is None:
                await pilot.pause(wait_s)
            else:
                t1 = time.perf_counter()
                while time.perf_counter() - t1 < wait_s * 10:
                    shown = app.session.displayed
                    if held.is_set() and shown is not None and shown.time - src.first >= src.at_s:
                        break
                    await pilot.pause(0.05)
                await pilot.pause(0.5)  # drawn
            app.save_screenshot(os.path.join(out, f"{name}-{size[0]}x{size[1]}.svg"))
            if held is not None:
                src.go()
            for shot, keys in shots:
                await pilot.press(*keys)
                await pilot.pause(shot_wait_s)
                app.save_screenshot(os.path.join(out, f"{name}-{size[0]}x{size[1]}-{shot}.svg"))
    finally:
        if held is not None:
            src.go()
    src.close()


def parse_shot(text):
    """"gpus=2" -> ("gpus", ["2"]); "last=g,g,g" -> ("last", ["g", "g", "g"])."""
    name, sep, keys = text.partition("=")
    if not sep or not name or not keys or not all(c.isalnum() or c in "-_" for c in name):
        raise argparse.ArgumentTypeError(f"not NAME=KEY,KEY...: {text!r}")
    return name, [k.strip() for k in keys.split(",") if k.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--live", type=float, default=0)
    ap.add_argument("--demo", action="store_true")
    ap.add_argument("--demo-at", type=float, default=197.0)
    ap.add_argument("--prefix", default="live")
    ap.add_argument("--no-probe", action="store_true")
    ap.add_argument("--shot", type=parse_shot, action="append", default=[])
    ap.add_argument("--shot-wait", type=float, default=0.5)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.live:
        from pinmon.collect.live import LiveCollector
        from pinmon.probe import run_probe

        for size in ((80, 24), (160, 48)):
            asyncio.run(shoot(lambda: LiveCollector(interval_s=1.0), a.out, a.prefix, size, a.live, a.shot, a.shot_wait,
                              probe_runner=lambda kind="quick", **kw: run_probe(kind, **kw),
                              probe_unavailable_reason=None, probe_every_s=None if a.no_probe else 60.0))
    if a.demo:
        from pinmon.cli.commands.demo import demo_path

        for size in ((80, 24), (160, 48)):
            # The pinned hog near its peak (it grows from about 136 s into the recording to 70 GiB at
            # 205 s), with the traffic and the groups of the minutes before: at speed 16, about 12 s.
            asyncio.run(shoot(lambda: held_replay(demo_path(), a.demo_at), a.out, "demo", size, 12.0, a.shot,
                              a.shot_wait, interval_s=1.0, speed=16.0, probe_every_s=None))


if __name__ == "__main__":
    main()
