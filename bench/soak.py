"""Soak: a long recording played as fast as possible through replay, advisor, TUI and exporter.

1. Writes a recording of ``--hours`` at 1 Hz (24 h = 86,400 snapshots) with the real recorder: 8 GPUs
   with varying traffic (a daily wave plus bursts), processes that come and go every few minutes,
   pinned memory that grows and falls back, a link that trains down for an hour under load, PCIe
   errors that tick up, so the advisor's findings fire and clear.
2. Replays it through ``ReplaySource`` and the advisor (its history as the app keeps it,
   ``pinmon.advise.history.AdvisorHistory``) and,
   when ``pinmon.export`` is there, the exporter's state and a scrape every 15 snapshots (a 15 s
   scrape interval).
3. Feeds the first ``--tui-snapshots`` of it to the terminal app, headless (``App.run_test``), as
   fast as the app takes them.

Reports, per stage: snapshots/s, ms per snapshot in the first and last tenth (a slowdown shows as
last > first), and RSS growth after a warm-up tenth (goal < 5 MiB). Writes JSON (default
bench/results/soak.json). CPU only.

Usage: python bench/soak.py [--hours 24] [--tui-snapshots 3000] [--out FILE] [--keep FILE]
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import math
import os
import sys
import tempfile
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pinmon.model import (
    Gpu,
    GpuProcess,
    HeldMemory,
    HostMemory,
    Link,
    Pcie,
    Placement,
    ProcessIdentity,
    ProcessPinned,
    Snapshot,
)
from provenance import provenance

GIB = 1 << 30
MIB = 1 << 20
T0 = 1_780_000_000.0
GEN5_X16 = 63.0e9
GEN4_X16 = 31.5e9
N_GPUS = 8
RAM = 2048 * GIB


def _rss() -> int:
    return psutil.Process().memory_info().rss


def synth_snapshot(i: int) -> Snapshot:
    """Snapshot ``i`` seconds into the synthetic day (deterministic: integer arithmetic and sines)."""
    day = 2 * math.pi * i / 86_400
    gpus = []
    procs = []
    # A job lasts ~7 minutes per GPU, staggered: pids change, processes come and go.
    for g in range(N_GPUS):
        job = (i + 53 * g) // 420
        burst = 1.0 if (i // 7 + g) % 11 < 3 else 0.15
        rx = max(0.0, (20e9 + 15e9 * math.sin(day + g)) * burst)
        tx = rx * 0.08
        degraded = g == 3 and 30_000 <= i < 33_600  # an hour at Gen4 under load
        errors = (i // 5_000) if g == 5 else 0
        gpu_procs = ()
        if (job + g) % 5 != 0:  # one job in five leaves the GPU idle
            pid = 10_000 + 97 * g + job % 400
            gpu_procs = (GpuProcess(pid=pid, gpu_memory_bytes=(40 + job % 60) * GIB),)
            # Pinned memory grows during a job and falls back when it ends.
            pinned = (2 + ((i + 53 * g) % 420) // 30) * GIB
            procs.append(ProcessPinned(
                pid=pid, identity=ProcessIdentity(name=f"train-{g}", user="alice", cmdline=f"python train.py --gpu {g}"),
                held=HeldMemory(pinned_bytes=pinned, write_combined_bytes=0, mappings=8 + job % 5,
                                mappings_churn=(i % 3)),
                placement=Placement(gpu_indices=(g,), gpu_memory_bytes=(40 + job % 60) * GIB)))
        link = Link(gen=4 if degraded else 5, gen_max=5, width=16, width_max=16,
                    theoretical_bytes_per_s=GEN4_X16 if degraded else GEN5_X16,
                    max_theoretical_bytes_per_s=GEN5_X16)
        gpus.append(Gpu(index=g, name="NVIDIA H200", uuid=f"GPU-{g:08x}", pci_bus_id=f"00000000:{0x17 + 16 * g:02X}:00.0",
                        link=link, pcie=Pcie(rx_bytes_per_s=rx, tx_bytes_per_s=tx, method="counters",
                                             rx_bytes=int(rx), tx_bytes=int(tx), interval_s=1.0,
                                             replay_delta=errors, recovery_delta=errors, error_delta=errors,
                                             counter_deltas={"replay": errors, "l0_to_recovery": errors}),
                        memory_total_bytes=141 * GIB, memory_used_bytes=(40 + g) * GIB,
                        cpu_affinity="0-47" if g < 4 else "48-95", numa_node=0 if g < 4 else 1,
                        processes=gpu_procs))
    # A data loader with a big pinned pool on some hours pushes the pinned share past 30%.
    if (i // 3_600) % 6 == 2:
        procs.append(ProcessPinned(pid=9_999, identity=ProcessIdentity(name="loader", user="bob"),
                                   held=HeldMemory(pinned_bytes=700 * GIB, write_combined_bytes=0, mappings=64,
                                                   mappings_churn=0)))
    pinned = sum(p.held.pinned_bytes or 0 for p in procs)
    host = HostMemory(hostname="soak-8gpu", mem_total_bytes=RAM, mem_available_bytes=RAM - pinned - 200 * GIB,
                      effective_mem_limit_bytes=RAM, swap_used_bytes=0, shmem_bytes=4 * GIB, mlocked_bytes=0,
                      pinned_bytes_est=pinned, write_combined_bytes_est=0, memlock_limit_bytes=None,
                      memlock_unlimited=True)
    notices = ("process scan: skipped 3 exited during the scan",) if i % 600 == 0 else ()
    return Snapshot(time=T0 + i, host=host, gpus=tuple(gpus), processes=tuple(procs), notices=notices,
                    interval_s=1.0, source="live")


def write_recording(path: str, n: int) -> dict:
    from pinmon.recording import Recorder

    t0 = time.perf_counter()
    with Recorder(path) as rec:
        for i in range(n):
            rec.write(synth_snapshot(i))
    return {"snapshots": n, "seconds": time.perf_counter() - t0, "bytes": os.path.getsize(path)}


class Meter:
    """Time per item in tenths, and RSS at the end of each tenth."""

    def __init__(self, n: int):
        self.n = max(1, n)
        self.tenth = max(1, self.n // 10)
        self.marks: list[tuple[float, int]] = []  # (perf_counter, rss) at each tenth boundary
        self.start = time.perf_counter()
        self.count = 0

    def tick(self) -> None:
        self.count += 1
        if self.count % self.tenth == 0:
            self.marks.append((time.perf_counter(), _rss()))

    def report(self) -> dict:
        wall = time.perf_counter() - self.start
        times = [self.start] + [t for t, _ in self.marks]
        per = [(b - a) / self.tenth * 1e3 for a, b in itertools.pairwise(times)]
        rss = [r for _, r in self.marks]
        growth = (rss[-1] - rss[0]) if len(rss) >= 2 else None  # after the first tenth (warm-up)
        return {"snapshots": self.count, "seconds": wall, "snapshots_per_s": self.count / wall if wall else None,
                "ms_per_snapshot_by_tenth": per,
                "ms_first_tenth": per[0] if per else None, "ms_last_tenth": per[-1] if per else None,
                "last_over_first": (per[-1] / per[0]) if len(per) >= 2 and per[0] else None,
                "rss_mib_by_tenth": [r / MIB for r in rss],
                "rss_growth_after_warmup_mib": growth / MIB if growth is not None else None}


def soak_replay(path: str, n: int) -> dict:
    from pinmon.advise import advise
    from pinmon.advise.history import AdvisorHistory
    from pinmon.recording.replay import ReplaySource

    try:
        from pinmon.export import ExportState, build_registry, metrics_text
    except ImportError:
        ExportState = None
    state = ExportState(live=False) if ExportState else None
    registry = build_registry(state) if state is not None else None
    history = AdvisorHistory.for_thresholds()
    rules_seen: dict[str, int] = {}
    src = ReplaySource(path)
    meter = Meter(n)
    scrape_bytes = 0
    try:
        while True:
            snap = src.snapshot()
            if snap is None:
                break
            history.append(snap)
            findings = advise(history.snapshots())
            for f in findings:
                rules_seen[f.rule] = rules_seen.get(f.rule, 0) + 1
            if state is not None:
                state.add_snapshot(snap)
                state.set_findings(findings)
                if meter.count % 15 == 0:
                    scrape_bytes = len(metrics_text(registry))
            meter.tick()
    finally:
        src.close()
    out = meter.report()
    out.update(findings_by_rule=rules_seen, exporter=state is not None, last_scrape_bytes=scrape_bytes,
               notices=list(src.notices))
    return out


async def _tui(path: str, n: int) -> dict:
    from pinmon.advise import advise
    from pinmon.recording.replay import ReplaySource
    from pinmon.tui.app import PinmonApp

    src = ReplaySource(path)
    app = PinmonApp(src, lambda h: advise(h), start_polling=False, probe_every_s=None)
    meter = Meter(n)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(n):
            snap = src.snapshot()
            if snap is None:
                break
            app.apply_snapshot(snap)
            await pilot.pause()  # let the screen redraw, as it would between two real snapshots
            meter.tick()
    src.close()
    return meter.report()


def soak_tui(path: str, n: int) -> dict:
    try:
        import textual  # noqa: F401
    except ImportError:
        return {"skipped": "textual is not installed"}
    return asyncio.run(_tui(path, n))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--tui-snapshots", type=int, default=3000)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/soak.json"))
    ap.add_argument("--keep", default=None, help="write the recording here (default: a temporary file)")
    args = ap.parse_args(argv)
    n = int(args.hours * 3600)
    tmp = None
    path = args.keep
    if path is None:
        tmp = tempfile.mkdtemp(prefix="pinmon-soak-")
        path = os.path.join(tmp, "soak.jsonl.gz")
    result = {"provenance": provenance(), "hours": args.hours, "gpus": N_GPUS}
    try:
        result["write"] = write_recording(path, n)
        print(f"wrote {n} snapshots ({result['write']['bytes'] / MIB:.1f} MiB) in {result['write']['seconds']:.0f} s")
        gc.collect()
        result["replay_advisor_exporter"] = r = soak_replay(path, n)
        print(f"replay+advisor{'+exporter' if r['exporter'] else ''}: {r['snapshots_per_s']:.0f} snapshots/s,"
              f" {r['ms_first_tenth']:.2f} -> {r['ms_last_tenth']:.2f} ms/snapshot (first -> last tenth),"
              f" RSS +{r['rss_growth_after_warmup_mib']:.1f} MiB after warm-up; findings {r['findings_by_rule']}")
        gc.collect()
        m = min(n, args.tui_snapshots)
        result["tui"] = t = soak_tui(path, m)
        if "skipped" not in t and t["snapshots"] >= 10:
            print(f"TUI headless, first {m} snapshots: {t['snapshots_per_s']:.0f} snapshots/s,"
                  f" {t['ms_first_tenth']:.1f} -> {t['ms_last_tenth']:.1f} ms/snapshot,"
                  f" RSS +{t['rss_growth_after_warmup_mib']:.1f} MiB after warm-up")
    finally:
        if tmp is not None:
            try:
                os.remove(path)
                os.rmdir(tmp)
            except OSError:
                pass
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
