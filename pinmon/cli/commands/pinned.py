"""``pinmon pinned``: the per-process pinned memory table, estimated from /proc/PID/maps.

Live processes (all, or ``--pid``), whose rows carry an in-process tracer's exact figures where one
reports, and saved copies of /proc/PID/maps (``--maps-file``). The live rows and totals are the live
collector's (``LiveCollector`` without NVML); no row and no total exceeds this machine's RAM. Text, or
``pinmon.pinned/2`` with ``--json``. Exit 0, or 2 for bad input (no such process, a file that is not
a maps file).
"""
from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...collect.processes.resident import CAPPED_TOTAL_NOTICE, capped_totals
from ...limits import MAX_MAPS_BYTES
from ..common import UsageError, dumps, pid_arg
from ..options import Settings, shared
from ..parser import Commands

if TYPE_CHECKING:
    from ...collect.processes.procmaps import PinnedEstimate
    from ...model import Cgroup, ProcessPinned, Snapshot

JSON_SCHEMA = "pinmon.pinned/2"


def add_parser(sub: Commands) -> None:
    pn = sub.add_parser("pinned", parents=shared("config"),
                        help="per-process pinned memory table (estimated from /proc/PID/maps)",
                        description="Per-process CUDA pinned and write-combined memory, estimated from /proc/PID/maps.")
    pn.add_argument("--pid", type=pid_arg, action="append", default=None, metavar="PID", help="only this process (repeatable)")
    pn.add_argument("--maps-file", action="append", default=None, metavar="FILE",
                    help="estimate from a saved copy of /proc/PID/maps (repeatable)")
    pn.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from ...collect.live import cap_rows_to_ram
    from ...model import HeldMemory, ProcessIdentity, ProcessPinned

    file_rows: list[ProcessPinned] = []
    notes: list[str] = []
    for path in args.maps_file or []:
        est = _estimate_maps_file(path)
        # pid 0: no process behind a saved file; the output shows the file's name and no pid.
        file_rows.append(ProcessPinned(pid=0, source="est.", identity=ProcessIdentity(name=os.path.basename(path)),
                                       held=HeldMemory(pinned_bytes=est.pinned_bytes,
                                                       write_combined_bytes=est.write_combined_bytes,
                                                       mappings=est.pinned_mappings)))
        if not est.is_cuda:
            notes.append(f"{path}: no /dev/nvidia* mapping: not a CUDA process, nothing counted")
    live_rows: list[ProcessPinned] = []
    groups: tuple[Cgroup, ...] = ()
    live_pinned = live_wc = 0
    if args.pid or not args.maps_file:
        snap = _live_snapshot(args.pid)
        live_rows = list(snap.processes)
        groups = snap.cgroups
        notes += list(snap.notices)
        live_pinned, live_wc = snap.host.pinned_bytes_est or 0, snap.host.write_combined_bytes_est or 0
        mem_total = snap.host.mem_total_bytes
        found = {p.pid for p in live_rows}
        notes += [f"pid {pid}: not a CUDA process (it maps no NVIDIA device) or not readable"
                  for pid in args.pid or [] if pid not in found]
    else:
        from ...collect.host.memory import read_host_memory

        mem_total = read_host_memory()[0].get("mem_total_bytes")
    file_rows = cap_rows_to_ram(file_rows, mem_total)
    # The live processes' totals are the collector's (each buffer once, what the kernel backs: a
    # tracer's report fills in its row, never a total); a saved file adds its own figures.
    total_pinned, total_wc, capped = capped_totals(
        [live_pinned] + [r.held.pinned_bytes for r in file_rows],
        [live_wc] + [r.held.write_combined_bytes for r in file_rows],
        mem_total)
    if capped:
        notes.append(CAPPED_TOTAL_NOTICE)
    rows = file_rows + live_rows
    if args.json:
        procs = []
        for i, r in enumerate(rows):
            d = r.to_dict()
            if i < len(file_rows):
                d.update(pid=None, maps_file=args.maps_file[i])
            procs.append(d)
        print(dumps({"schema": JSON_SCHEMA, "processes": procs, "cgroups": [g.to_dict() for g in groups],
                     "total_pinned_bytes": total_pinned, "total_write_combined_bytes": total_wc,
                     "notices": notes}, indent=1))
    else:
        _print_table(rows, groups, notes)
    return 0


def _live_snapshot(pids: list[int] | None) -> Snapshot:
    """A snapshot of this machine's CUDA processes (only ``pids`` when given), host memory and the
    kernel's pinned count, by the live collector without NVML: a traced process's row carries its
    tracer's figures, within what the kernel shows."""
    from ...collect.live import LiveCollector

    for pid in pids or []:
        if not os.path.exists(f"/proc/{pid}"):
            raise UsageError(f"pid {pid}: no such process")
    with LiveCollector(use_nvml=False, pids=pids, kernel_read_every_s=0, oom_lookback_s=0) as col:
        return col.snapshot()


def _print_table(rows: Sequence[ProcessPinned], groups: Sequence[Cgroup], notes: Sequence[str]) -> None:
    from ...outputs.text import grouped_process_lines
    from ...units import printable

    if rows:
        print("\n".join(grouped_process_lines(rows, groups, limit=len(rows), max_groups=len(groups))))
    else:
        print("no CUDA processes with pinned memory found")
    for n in notes:
        print(f"note: {printable(n, 2000)}")
    print("PINNED = all a process holds: its shared /dev/zero mappings (est.; cudaHostRegister'ed memory is"
          " invisible there) or its tracer's count, and WC and VMPIN; WC = user /dev/nvidiactl mappings (est.),"
          " VMPIN = the kernel's VmPin (io_uring, RDMA)")


def _estimate_maps_file(path: str) -> PinnedEstimate:
    """The pinned estimate of a saved /proc/PID/maps file; UsageError for anything else."""
    from ...collect.processes.procmaps import estimate_pinned, parse_maps
    from ...recording.infile import InputError, read_capped

    try:
        text = read_capped(path, MAX_MAPS_BYTES, "a maps file").decode("utf-8", errors="replace")
    except InputError as e:
        raise UsageError(str(e)) from None
    if not text.strip():
        raise UsageError(f"{path}: empty file, not a /proc/PID/maps file")
    if not any(parse_maps(line) for line in text.splitlines()[:50]):
        raise UsageError(f"{path}: not a /proc/PID/maps file (no 'start-end perms offset dev inode' lines)")
    return estimate_pinned(text)
