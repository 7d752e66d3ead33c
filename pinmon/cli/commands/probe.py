"""``pinmon probe``: measure on this box what pinned host memory buys over pageable memory.

A quick probe always runs (64 MiB each way, pinned and pageable); ``--sweep`` adds the size sweep
and the allocation cost with its break-even, ``--modes`` the cudaHostAlloc flags and
cudaHostRegister. ``--numa`` runs, instead of the quick probe, pinned copies with the host buffer on
each NUMA node (local vs remote to the GPU); on a one-node host it says so and measures nothing.
Text tables on the terminal (with a progress bar on stderr), or one JSON document with ``--json``.
Exit 0 when every probe measured, 3 when one could not (no CuPy, no GPU, not enough memory), 2 for
bad arguments.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ..common import UsageError, cuda_device_arg
from ..options import Settings, shared
from ..parser import Commands

if TYPE_CHECKING:
    from ...model import ProbeResult

PROBE_SCHEMA = "pinmon.probe/1"
JSON_SCHEMA = PROBE_SCHEMA
EXIT_UNAVAILABLE = 3


def add_parser(sub: Commands) -> None:
    p = sub.add_parser(
        "probe", parents=shared("config", "max_pinned"),
        help="measure pinned vs pageable transfers on this GPU (needs CuPy)",
        description="Measure host<->device copies from pinned and pageable memory with CuPy: GB/s, "
                    "speedup, share of the PCIe link. Pinned memory used is capped (default 256M, never "
                    "over 5% of available RAM) and freed before exit, also on Ctrl-C. "
                    "Exit 0 measured, 3 could not measure (reason on stderr), 2 bad arguments.")
    p.add_argument("--sweep", action="store_true",
                   help="also sweep sizes 4K..256M and measure allocation cost and break-even")
    p.add_argument("--modes", action="store_true",
                   help="also measure write-combined, mapped, portable and cudaHostRegister memory")
    p.add_argument("--numa", action="store_true",
                   help="instead of the quick probe, copy with the host buffer on each NUMA node (local vs "
                        "remote to the GPU); on a one-node host say so and exit 0")
    p.add_argument("--gpu", type=cuda_device_arg, default=0, metavar="N|all",
                   help="CUDA device index (CUDA's numbering, as in CUDA_VISIBLE_DEVICES), or all (default 0)")
    p.add_argument("--json", action="store_true",
                   help=f'print {{"schema": "{PROBE_SCHEMA}", "results": [...]}}')


def probe_kinds(sweep: bool, modes: bool) -> list[str]:
    kinds = ["quick"]
    if sweep:
        kinds += ["sweep", "alloc"]
    if modes:
        kinds.append("modes")
    return kinds


def one_node_text(nodes: Sequence[int]) -> str:
    where = f" (node {nodes[0]})" if nodes else ""
    return (f"this host has one NUMA node{where}: host memory is equally near every GPU, nothing to compare;"
            " no NUMA probe run")


def nvml_links(nvml: object = None) -> dict[str, tuple[str | None, float | None]]:
    """{PCI address as sysfs spells it: (GPU name, link theoretical bytes/s)} from NVML; {} when NVML is
    unavailable. NVML and CUDA spell bus ids differently ("00000000:1B:00.0", "0000:1b:00.0")."""
    from ...collect.nvml import NvmlCollector, sysfs_pci_address

    col = NvmlCollector(nvml, background=False)
    try:
        if not col.start():
            return {}
        gpus, _ = col.read()
        return {key: (g.name, g.link.theoretical_bytes_per_s)
                for g in gpus if (key := sysfs_pci_address(g.pci_bus_id))}
    except Exception:  # the link rate only annotates the result; a failing NVML must not stop a probe
        return {}
    finally:
        col.close()


class ProgressBar:
    """One self-overwriting line on a terminal: ``[#####.....]  12/40  sweep h2d pinned 1M``."""

    def __init__(self, stream: TextIO, title: str, width: int = 24):
        self.stream = stream
        self.title = title
        self.width = width
        self.shown = False

    def __call__(self, done: int, total: int, label: str) -> None:
        total = max(total, 1)
        filled = min(self.width, self.width * done // total)
        cols = shutil.get_terminal_size((80, 24)).columns
        line = f"{self.title} [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} {label}"
        self.stream.write("\r" + line[: cols - 1].ljust(cols - 1))
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            cols = shutil.get_terminal_size((80, 24)).columns
            self.stream.write("\r" + " " * (cols - 1) + "\r")
            self.stream.flush()
            self.shown = False


def run(args: argparse.Namespace, settings: Settings) -> int:
    from ...collect.nvml import sysfs_pci_address
    from ...outputs.probe_text import format_probe, unavailable_text
    from ...probe import cuda_devices, run_probe

    max_pinned = settings.max_pinned_bytes
    kinds = probe_kinds(args.sweep, args.modes)
    # Whether there is a GPU to probe comes first: "nothing to compare" is only true of a box that has one.
    devices, reason = cuda_devices()
    if reason:
        print(f"pinmon: {unavailable_text(reason)}", file=sys.stderr)
        if args.json:  # a script reading stdout gets the reason too
            print(json.dumps({"schema": PROBE_SCHEMA, "status": "unavailable",
                              "reason": unavailable_text(reason), "results": []}, indent=1))
        return EXIT_UNAVAILABLE
    nodes: Sequence[int] = ()
    if getattr(args, "numa", False):
        from ...collect.host.numa import list_nodes

        nodes = list_nodes(which="has_memory") or ()
        if len(nodes) < 2:
            print(f"pinmon probe --numa: {one_node_text(nodes)}", file=sys.stderr if args.json else sys.stdout)
            kinds = kinds[1:]
            if not kinds:
                if args.json:
                    print(json.dumps({"schema": PROBE_SCHEMA, "status": "skipped",
                                      "reason": one_node_text(nodes), "results": []}, indent=1))
                return 0
        else:
            kinds[0] = "numa"
    if args.gpu == "all":
        chosen = devices
    else:
        chosen = [d for d in devices if d[0] == args.gpu]
        if not chosen:
            raise UsageError(f"no CUDA device {args.gpu}: CuPy sees {len(devices)} "
                             f"(0-{len(devices) - 1}; see CUDA_VISIBLE_DEVICES)")
    links = nvml_links()
    bar_stream = sys.stderr if sys.stderr.isatty() else None
    width = shutil.get_terminal_size((80, 24)).columns
    results: list[ProbeResult] = []
    payload: list[dict[str, Any]] = []
    for index, bus in chosen:
        name, link = links.get(sysfs_pci_address(bus) or "", (None, None))
        for kind in kinds:
            bar = ProgressBar(bar_stream, f"GPU {index} {kind}") if bar_stream else None
            try:
                if kind == "numa":
                    from ...collect.nvml import sysfs_numa_node
                    from ...probe.numa import run_numa_probe

                    result = run_numa_probe(index, nodes, gpu_node=sysfs_numa_node(bus), max_pinned_bytes=max_pinned,
                                            link_theoretical_bytes_per_s=link, progress=bar)
                else:
                    result = run_probe(kind, gpu_index=index, max_pinned_bytes=max_pinned, progress=bar,
                                       link_theoretical_bytes_per_s=link)
            finally:
                if bar is not None:
                    bar.clear()
            results.append(result)
            payload.append({"cuda_index": index, "pci_bus_id": bus, "name": name,
                            "result": result.to_dict()})
            if not args.json:
                title = f"== GPU {index}" + (f" {name}" if name else "") + (f" ({bus})" if bus else "")
                sys.stdout.write(f"{title}\n{format_probe(result, width=width)}\n")
                sys.stdout.flush()
    failed = [r for r in results if r.status != "ok"]
    if args.json:
        doc: dict[str, Any] = {"schema": PROBE_SCHEMA, "status": "unavailable" if failed else "ok"}
        if failed:
            doc["reason"] = "; ".join(f"GPU {r.gpu_index} {r.kind}: {unavailable_text(r.reason)}" for r in failed)
        print(json.dumps({**doc, "results": payload}, indent=1))
    for r in failed:
        print(f"pinmon: GPU {r.gpu_index} {r.kind}: {unavailable_text(r.reason)}", file=sys.stderr)
    return EXIT_UNAVAILABLE if failed else 0
