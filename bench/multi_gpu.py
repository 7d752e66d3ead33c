"""The 8-GPU box's pieces of bench/multi_gpu_batch.sh that read the machine: what the box is, pinmon's
per-GPU link bytes during a load, a snapshot's time with all GPUs vs one, which GPUs sit on which node.

    python3 bench/multi_gpu.py facts OUT.json          GPUs, links now and max, each GPU's NUMA node
                                                       (sysfs, NVML, pinmon's), CPUs, nodes
    python3 bench/multi_gpu.py watch OUT.json --seconds S
                                                       a LiveCollector at 1 Hz: per GPU and interval,
                                                       RX/TX link bytes, method, link gen/width
    python3 bench/multi_gpu.py scale OUT.json [--repeats N]
                                                       CPU and wall time of LiveCollector.snapshot()
                                                       with every GPU vs the first one (real NVML)
    python3 bench/multi_gpu.py pick nodes|remote BOX.json
                                                       "GPU NODE" per node (its first GPU), or
                                                       "GPU GPU_NODE FAR_NODE" for the far-node test

``scale`` limits NVML to its first GPUs with ``FirstGpus``, which answers ``nvmlDeviceGetCount`` with
fewer devices and passes every other call through: pinmon has no GPU filter of its own, and
CUDA_VISIBLE_DEVICES does not reach NVML. CUDA indices are NVML's only under
CUDA_DEVICE_ORDER=PCI_BUS_ID (the batch sets it); the results carry PCI bus ids to match on.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import portable_argv, provenance

SMI_FIELDS = ("index", "pci.bus_id", "name", "pcie.link.gen.current", "pcie.link.gen.max",
              "pcie.link.width.current", "pcie.link.width.max")


# --- facts ---------------------------------------------------------------------------------------

def parse_smi_csv(text: str, fields=SMI_FIELDS) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=... --format=csv,noheader,nounits`` rows as dicts; numbers as int
    where they read as one ("[N/A]" and the like stay text)."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            continue
        row: dict[str, Any] = {}
        for k, v in zip(fields, cells):
            row[k] = int(v) if v.isdigit() else v
        rows.append(row)
    return rows


def nvidia_smi_gpus() -> tuple[list[dict], str | None]:
    try:
        p = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return [], f"nvidia-smi: {e}"
    if p.returncode != 0:
        return [], f"nvidia-smi exit {p.returncode}: {p.stderr.strip()[:200]}"
    return parse_smi_csv(p.stdout), None


def sysfs_node_text(pci_bus_id: str | None, sysfs_root: str = "/sys") -> str | None:
    """The raw ``numa_node`` of the GPU's PCI device ("-1" on a one-node VM); None if unreadable."""
    from pinmon.collect.nvml.sysfs import sysfs_numa_node_text

    return sysfs_numa_node_text(pci_bus_id, sysfs_root)


def nvml_numa_nodes(count: int) -> list[Any]:
    """``nvmlDeviceGetNumaNodeId`` per NVML index: the node, or the error's text (NotSupported...)."""
    try:
        import pynvml
    except ImportError as e:
        return [f"no pynvml: {e}"] * count
    out: list[Any] = []
    try:
        pynvml.nvmlInit()
    except Exception as e:
        return [f"nvmlInit: {e}"] * count
    try:
        for i in range(count):
            try:
                out.append(pynvml.nvmlDeviceGetNumaNodeId(pynvml.nvmlDeviceGetHandleByIndex(i)))
            except Exception as e:
                out.append(f"{type(e).__name__}: {e}")
    finally:
        pynvml.nvmlShutdown()
    return out


def host_nodes(root: str = "/") -> dict[str, Any]:
    """The host's NUMA nodes (online, and those with memory), each node's CPUs and memory."""
    from pinmon.collect.host.numa import list_nodes, parse_node_list

    nodes = list_nodes(root) or ()
    out: dict[str, Any] = {"nodes": list(nodes), "memory_nodes": list(list_nodes(root, "has_memory") or ()),
                           "cpus": {}, "cpu_count": {}, "mem_total_kib": {}}
    for n in nodes:
        base = os.path.join(root, "sys/devices/system/node", f"node{n}")
        try:
            with open(os.path.join(base, "cpulist")) as f:
                text = f.read().strip()
            out["cpus"][str(n)] = text
            out["cpu_count"][str(n)] = len(parse_node_list(text) or ())
            with open(os.path.join(base, "meminfo")) as f:
                for line in f:
                    if "MemTotal:" in line:
                        out["mem_total_kib"][str(n)] = int(line.split()[-2])
        except (OSError, ValueError):
            pass
    return out


def facts() -> dict:
    smi, smi_error = nvidia_smi_gpus()
    pinmon_gpus: list[dict] = []
    pinmon_error = None
    try:
        from pinmon.collect.live import LiveCollector

        with LiveCollector(interval_s=1.0) as col:
            snap = col.snapshot()
        pinmon_error = snap.nvml_error
        pinmon_gpus = [{"index": g.index, "pci_bus_id": g.pci_bus_id, "numa_node": g.numa_node,
                        "cpu_affinity": g.cpu_affinity, "gen": g.link.gen, "gen_max": g.link.gen_max,
                        "width": g.link.width, "width_max": g.link.width_max} for g in snap.gpus]
    except Exception as e:
        pinmon_error = f"{type(e).__name__}: {e}"
    nvml_nodes = nvml_numa_nodes(len(smi) or len(pinmon_gpus))
    by_bus = {g["pci_bus_id"]: g for g in pinmon_gpus}
    gpus = []
    for k, row in enumerate(smi or [{"index": g["index"], "pci.bus_id": g["pci_bus_id"]} for g in pinmon_gpus]):
        bus = row.get("pci.bus_id")
        p = by_bus.get(bus, {})
        gpus.append({**row, "sysfs_numa_node": sysfs_node_text(bus),
                     "nvml_numa_node": nvml_nodes[k] if k < len(nvml_nodes) else None,
                     "pinmon_numa_node": p.get("numa_node"), "pinmon_cpu_affinity": p.get("cpu_affinity")})
    return {"provenance": provenance(), "gpu_count": len(gpus), "gpus": gpus, "nvidia_smi_error": smi_error,
            "pinmon_error": pinmon_error, "cpu_count": os.cpu_count(),
            "cpus_usable": len(os.sched_getaffinity(0)), "host": host_nodes()}


def pick(which: str, box: dict) -> list[str]:
    """Lines for the shell: ``nodes``: "GPU NODE", the first GPU of each node ("GPU unknown" for the
    first and last GPU where no GPU's node is known on a multi-node host); ``remote``: one
    "GPU GPU_NODE FAR_NODE" (the first GPU with a memory node other than its own), or nothing."""
    gpu_node = {}
    for g in box.get("gpus", ()):
        node = g.get("pinmon_numa_node")
        if isinstance(node, int) and isinstance(g.get("index"), int):
            gpu_node.setdefault(g["index"], node)
    host = box.get("host", {})
    nodes = [n for n in host.get("memory_nodes") or host.get("nodes", ()) if isinstance(n, int)]
    if which == "nodes":
        first: dict[int, int] = {}
        for index in sorted(gpu_node):
            first.setdefault(gpu_node[index], index)
        if not first and len(nodes) > 1:
            # No GPU's node known (a VM's sysfs says -1, NVML NotSupported): the first and the last
            # GPU, most likely on different sockets; probe --numa still measures every node for each.
            indices = sorted(g["index"] for g in box.get("gpus", ()) if isinstance(g.get("index"), int))
            return [f"{k} unknown" for k in sorted({indices[0], indices[-1]})] if indices else []
        return [f"{gpu} {node}" for node, gpu in sorted(first.items(), key=lambda kv: kv[0])]
    for index in sorted(gpu_node):
        far = [n for n in nodes if n != gpu_node[index]]
        if far:
            return [f"{index} {gpu_node[index]} {far[0]}"]
    return []


# --- watch ---------------------------------------------------------------------------------------

def gpu_row(g) -> dict:
    p = g.pcie
    return {"index": g.index, "pci_bus_id": g.pci_bus_id, "method": p.method, "rx_bytes": p.rx_bytes,
            "tx_bytes": p.tx_bytes, "interval_s": p.interval_s, "rx_bytes_per_s": p.rx_bytes_per_s,
            "tx_bytes_per_s": p.tx_bytes_per_s, "gen": g.link.gen, "width": g.link.width, "lost": g.lost}


def watch(seconds: float, interval_s: float = 1.0, collector=None) -> dict:
    """Snapshots every ``interval_s`` for ``seconds``: each with the time it was taken (``time``,
    time.time() when ``snapshot()`` returned) and every GPU's ``gpu_row``."""
    from pinmon.collect.live import LiveCollector

    col = collector or LiveCollector(interval_s=interval_s)
    rows = []
    try:
        col.snapshot()  # the first snapshot opens the counting intervals
        nxt = time.monotonic()
        end = nxt + seconds
        while True:
            nxt += interval_s
            if nxt > end:
                break
            time.sleep(max(0.0, nxt - time.monotonic()))
            c0 = time.thread_time()
            snap = col.snapshot()
            rows.append({"time": time.time(), "snapshot_cpu_s": time.thread_time() - c0,
                         "gpus": [gpu_row(g) for g in snap.gpus]})
    finally:
        col.close()
    return {"interval_s": interval_s, "seconds": seconds, "snapshots": rows}


# --- scale ---------------------------------------------------------------------------------------

class FirstGpus:
    """An NVML module that shows only its first ``count`` GPUs: ``nvmlDeviceGetCount`` answers
    ``min(count, real)``, every other name is the wrapped module's."""

    def __init__(self, nvml, count: int):
        self._nvml = nvml
        self._count = count

    def nvmlDeviceGetCount(self):
        return min(self._count, self._nvml.nvmlDeviceGetCount())

    def __getattr__(self, name):
        return getattr(self._nvml, name)


def time_snapshots(nvml, count: int | None, repeats: int, settle_s: float = 2.0) -> dict:
    """CPU (this thread) and wall time per ``LiveCollector.snapshot()`` seeing ``count`` GPUs (None:
    all), and the NVML sampler threads' CPU share over the same stretch."""
    from pinmon.collect.live import LiveCollector

    view = nvml if count is None else FirstGpus(nvml, count)
    with LiveCollector(interval_s=1.0, nvml=view) as col:
        first = col.snapshot()
        time.sleep(settle_s)  # the sampler's threads are up and have read once
        sampler = col._nvml
        s0 = sampler.cpu_seconds() if sampler is not None else 0.0
        w0, c0 = time.perf_counter(), time.thread_time()
        walls = []
        for _ in range(repeats):
            t = time.perf_counter()
            col.snapshot()
            walls.append(time.perf_counter() - t)
        wall = time.perf_counter() - w0
        cpu = time.thread_time() - c0
        share = ((sampler.cpu_seconds() - s0) / wall) if sampler is not None and wall > 0 else None
    walls.sort()
    return {"gpus": len(first.gpus), "repeats": repeats, "snapshot_cpu_ms": cpu / repeats * 1e3,
            "snapshot_wall_ms": wall / repeats * 1e3, "snapshot_wall_ms_median": walls[len(walls) // 2] * 1e3,
            "sampler_cpu_share": share, "nvml_error": first.nvml_error}


def scale(repeats: int, nvml=None, settle_s: float = 2.0) -> dict:
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError as e:
            return {"error": f"no NVML bindings: {e}", "ratio_all_over_one_cpu": None}
    one = time_snapshots(nvml, 1, repeats, settle_s)
    every = time_snapshots(nvml, None, repeats, settle_s)
    # Without NVML both read no GPU: a ratio of two GPU-less snapshots would say nothing.
    measured = one["gpus"] == 1 and every["gpus"] > 1 and one["snapshot_cpu_ms"] > 0
    ratio = every["snapshot_cpu_ms"] / one["snapshot_cpu_ms"] if measured else None
    return {"one_gpu": one, "all_gpus": every, "ratio_all_over_one_cpu": ratio,
            "note": "NVML limited to its first GPU by answering nvmlDeviceGetCount with 1; the rest of the"
                    " snapshot (host memory, /proc scan) is the same in both"}


# --- main ----------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("facts").add_argument("out")
    w = sub.add_parser("watch")
    w.add_argument("out")
    w.add_argument("--seconds", type=float, required=True)
    w.add_argument("--interval", type=float, default=1.0)
    s = sub.add_parser("scale")
    s.add_argument("out")
    s.add_argument("--repeats", type=int, default=30)
    p = sub.add_parser("pick")
    p.add_argument("which", choices=("nodes", "remote"))
    p.add_argument("box")
    a = ap.parse_args(argv)
    if a.cmd == "pick":
        try:
            with open(a.box) as f:
                box = json.load(f)
        except (OSError, ValueError) as e:
            print(f"multi_gpu.py pick: cannot read {a.box}: {e}", file=sys.stderr)
            return 2
        for line in pick(a.which, box):
            print(line)
        return 0
    if a.cmd == "watch" and not (a.seconds > 0 and a.interval > 0):
        ap.error("--seconds and --interval must be positive")
    if a.cmd == "scale" and a.repeats < 1:
        ap.error("--repeats must be at least 1")
    if a.cmd == "facts":
        res = facts()
    elif a.cmd == "watch":
        res = watch(a.seconds, a.interval)
    else:
        res = scale(a.repeats)
    res = {"provenance": res.pop("provenance", None) or provenance(), "argv": portable_argv(sys.argv), **res}
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    if a.cmd == "scale":
        r = res
        if r.get("ratio_all_over_one_cpu") is None:
            print(f"scale: not measured ({r.get('error') or r['all_gpus'].get('nvml_error') or 'fewer than 2 GPUs'})")
        else:
            print(f"scale: 1 GPU {r['one_gpu']['snapshot_cpu_ms']:.2f} ms, {r['all_gpus']['gpus']} GPUs "
                  f"{r['all_gpus']['snapshot_cpu_ms']:.2f} ms CPU per snapshot; ratio {r['ratio_all_over_one_cpu']:.2f}")
    elif a.cmd == "facts":
        for g in res["gpus"]:
            print(" ".join(f"{k}={v}" for k, v in g.items()))
    else:
        print(f"watch: {len(res['snapshots'])} snapshots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
