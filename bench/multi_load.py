"""Known PCIe traffic on every GPU at once: one process per GPU copies pinned host memory to its GPU,
each at its own rate and copy size, the payload counted with the time of each copy's end.

Usage: python3 bench/multi_load.py OUT.json --seconds S [--gpus all|0,2,5] [--start-in S] [--step-gbps G]

GPU k (CUDA's numbering; run with CUDA_DEVICE_ORDER=PCI_BUS_ID so it is nvidia-smi's and NVML's too)
copies ``SIZES_MIB[k % 5]`` MiB host to device, paced to ``(k + 1) * step`` GB/s (6, 12 ... 48 GB/s by
default: every GPU a different figure, so a monitor that shows one GPU's traffic under another's
name is caught). A link slower than its target runs flat out. Each child binds itself to the CPUs
local to its GPU (sysfs ``local_cpulist``) before CUDA starts, so its pinned buffer is on its GPU's
node. All children start copying at the same wall-clock time, ``--start-in`` seconds after launch
(CUDA contexts on eight GPUs take a few seconds).

OUT.json: ``{"provenance", "argv", "gpus": [{"cuda_index", "pci_bus_id", "target_bytes_per_s",
"copy_bytes", "payload_bytes", "copies", "start", "end", "bytes_per_s", "timeline"}]}`` where
``timeline`` is ``[[time.time(), payload bytes so far], ...]`` at most every ``TIMELINE_STEP_S``
(first and last copy always), so the payload of any window can be read off it
(bench/multi_gpu_summary.py ``payload_between``). A child that fails leaves ``{"cuda_index",
"error"}`` in its place.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from provenance import portable_argv, provenance

MIB = 1 << 20
SIZES_MIB = (16, 32, 64, 128, 256)
STEP_BYTES_PER_S = 6e9
TIMELINE_STEP_S = 0.02


def target_rate(k: int, step_bytes_per_s: float = STEP_BYTES_PER_S) -> float:
    return (k + 1) * step_bytes_per_s


def copy_size(k: int) -> int:
    return SIZES_MIB[k % len(SIZES_MIB)] * MIB


def parse_gpus(text: str, count: int) -> list[int]:
    """``all`` or a comma list of CUDA indices, each below ``count``; ValueError otherwise."""
    if text == "all":
        return list(range(count))
    try:
        chosen = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"not a GPU list: {text!r} (all, or CUDA indices such as 0,2,5)") from None
    bad = [k for k in chosen if not 0 <= k < count]
    if not chosen or bad:
        raise ValueError(f"no CUDA device {bad[0] if bad else text!r}: {count} visible")
    return chosen


def local_cpus(pci_bus_id: str | None, sysfs_root: str = "/sys") -> set[int] | None:
    """The CPUs the kernel lists as local to the PCI device (``local_cpulist``); None if unknown."""
    from pinmon.collect.host.numa import parse_node_list
    from pinmon.collect.nvml import sysfs_pci_address

    address = sysfs_pci_address(pci_bus_id)
    if address is None:
        return None
    try:
        with open(os.path.join(sysfs_root, "bus/pci/devices", address, "local_cpulist")) as f:
            cpus = parse_node_list(f.read())
    except OSError:
        return None
    return set(cpus) if cpus else None


class Timeline:
    """Payload so far at the end of copies, kept at most every ``step_s`` (and the last one always)."""

    def __init__(self, step_s: float = TIMELINE_STEP_S):
        self.step_s = step_s
        self.points: list[list[float]] = []
        self._pending: list[float] | None = None

    def add(self, t: float, total_bytes: int) -> None:
        if not self.points or t - self.points[-1][0] >= self.step_s:
            self.points.append([t, total_bytes])
            self._pending = None
        else:
            self._pending = [t, total_bytes]

    def finish(self) -> list[list[float]]:
        if self._pending is not None:
            self.points.append(self._pending)
            self._pending = None
        return self.points


def child(k: int, rate: float, size: int, start_at: float, seconds: float) -> dict:
    import cupy as cp
    import numpy as np

    bus = cp.cuda.Device(k).pci_bus_id
    cpus = local_cpus(bus)
    if cpus:
        os.sched_setaffinity(0, cpus)  # before any allocation: the pinned pages land on this node
    with cp.cuda.Device(k):
        dev = cp.cuda.alloc(size)
        host = cp.cuda.alloc_pinned_memory(size)
        np.frombuffer(host, dtype=np.uint8, count=size)[:] = 1
        stream = cp.cuda.Stream(non_blocking=True)
        kind = cp.cuda.runtime.memcpyHostToDevice
        cp.cuda.runtime.memcpyAsync(dev.ptr, host.ptr, size, kind, stream.ptr)  # warm-up, not counted
        stream.synchronize()
        time.sleep(max(0.0, start_at - time.time()))
        timeline = Timeline()
        moved = copies = 0
        t0 = time.time()
        timeline.add(t0, 0)
        end = t0 + seconds
        while True:
            now = time.time()
            if now >= end:
                break
            # Paced: the next copy starts when the bytes so far fit the target rate.
            due = t0 + moved / rate
            if due > now:
                time.sleep(min(due - now, end - now))
                continue
            cp.cuda.runtime.memcpyAsync(dev.ptr, host.ptr, size, kind, stream.ptr)
            stream.synchronize()
            moved += size
            copies += 1
            timeline.add(time.time(), moved)
        t1 = time.time()
    return {"cuda_index": k, "pci_bus_id": bus, "target_bytes_per_s": rate, "copy_bytes": size,
            "payload_bytes": moved, "copies": copies, "start": t0, "end": t1,
            "bytes_per_s": moved / (t1 - t0) if t1 > t0 else None, "cpus_bound": len(cpus) if cpus else None,
            "timeline": timeline.finish()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--gpus", default="all")
    ap.add_argument("--start-in", type=float, default=8.0)
    ap.add_argument("--step-gbps", type=float, default=STEP_BYTES_PER_S / 1e9)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--rate", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if not a.seconds > 0 or not a.step_gbps > 0 or a.start_in < 0:
        ap.error("--seconds and --step-gbps must be positive, --start-in not negative")
    if a.child is not None:
        try:
            res = child(a.child, a.rate, a.size, a.start_at, a.seconds)
        except Exception as e:  # the parent records why, next to the other GPUs' loads
            res = {"cuda_index": a.child, "error": f"{type(e).__name__}: {e}"}
        with open(a.out, "w") as f:
            json.dump(res, f)
        return 0 if "error" not in res else 1
    try:
        import cupy as cp

        count = cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # no CuPy, no driver, no GPU: one line, and a result that says so
        reason = f"no CUDA device to load: {type(e).__name__}: {e}"
        print(f"multi_load.py: {reason}", file=sys.stderr)
        with open(a.out, "w") as f:
            json.dump({"provenance": provenance(), "argv": portable_argv(sys.argv), "error": reason, "gpus": []}, f)
        return 1
    try:
        gpus = parse_gpus(a.gpus, count)
    except ValueError as e:
        ap.error(str(e))
    start_at = time.time() + a.start_in
    procs = []
    for k in gpus:
        path = f"{a.out}.gpu{k}.json"
        argv_k = [sys.executable, os.path.abspath(__file__), path, "--child", str(k),
                  "--rate", repr(target_rate(k, a.step_gbps * 1e9)), "--size", str(copy_size(k)),
                  "--start-at", repr(start_at), "--seconds", repr(a.seconds)]
        procs.append((k, path, subprocess.Popen(argv_k)))
    results = []
    for k, path, p in procs:
        p.wait()
        try:
            with open(path) as f:
                results.append(json.load(f))
            os.unlink(path)
        except (OSError, ValueError) as e:
            results.append({"cuda_index": k, "error": f"no result (exit {p.returncode}): {e}"})
    with open(a.out, "w") as f:
        json.dump({"provenance": provenance(), "argv": portable_argv(sys.argv), "start_at": start_at,
                   "gpus": results}, f)
    for r in results:
        if "error" in r:
            print(f"GPU {r['cuda_index']}: {r['error']}")
        else:
            print(f"GPU {r['cuda_index']} {r['pci_bus_id']}: {r['payload_bytes'] / 1e9:.1f} GB in "
                  f"{r['end'] - r['start']:.1f} s = {r['bytes_per_s'] / 1e9:.2f} GB/s "
                  f"(target {r['target_bytes_per_s'] / 1e9:.0f}, copies of {r['copy_bytes'] // MIB} MiB)")
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
