"""``pinmon pinned``: the per-process pinned memory table, estimated from /proc/PID/maps.

Live processes (all, or ``--pid``), whose rows carry an in-process tracer's exact figures where one
reports, and saved copies of /proc/PID/maps (``--maps-file``). As in the live collector, no row and
no total exceeds this machine's RAM (processes that share a buffer each count it). Text, or
``pinmon.pinned/1`` with ``--json``. Exit 0, or 2 for bad input (no such process, a file that is not
a maps file).
"""
from __future__ import annotations

import os

from ...collect.resident import CAPPED_TOTAL_NOTICE, capped_totals
from ...limits import MAX_MAPS_BYTES
from ..common import UsageError, dumps, pid_arg

JSON_SCHEMA = "pinmon.pinned/1"


def add_parser(sub) -> None:
    pn = sub.add_parser("pinned", help="per-process pinned memory table (estimated from /proc/PID/maps)",
                        description="Per-process CUDA pinned and write-combined memory, estimated from /proc/PID/maps.")
    pn.add_argument("--pid", type=pid_arg, action="append", default=None, metavar="PID", help="only this process (repeatable)")
    pn.add_argument("--maps-file", action="append", default=None, metavar="FILE",
                    help="estimate from a saved copy of /proc/PID/maps (repeatable)")
    pn.add_argument("--json", action="store_true", help="print JSON")


def run(args) -> int:
    from ...model import ProcessPinned

    rows: list[ProcessPinned] = []
    files: dict[int, str] = {}  # row index -> the saved maps file it was read from
    notes: list[str] = []
    for path in args.maps_file or []:
        est = _estimate_maps_file(path)
        files[len(rows)] = path
        # pid 0: no process behind a saved file; the output shows the file's name and no pid.
        rows.append(ProcessPinned(pid=0, name=os.path.basename(path), pinned_bytes=est.pinned_bytes,
                                  write_combined_bytes=est.write_combined_bytes,
                                  pinned_mappings=est.pinned_mappings, source="est."))
        if not est.is_cuda:
            notes.append(f"{path}: no /dev/nvidia* mapping: not a CUDA process, nothing counted")
    if args.pid or not args.maps_file:
        live_rows, live_notes = _scan_processes(args.pid)
        rows += live_rows
        notes += live_notes
    rows, total_pinned, total_wc, capped = _capped_to_ram(rows)
    if capped:
        notes.append(CAPPED_TOTAL_NOTICE)
    if args.json:
        procs = []
        for i, r in enumerate(rows):
            d = r.to_dict()
            if i in files:
                d.update(pid=None, maps_file=files[i])
            procs.append(d)
        print(dumps({"schema": JSON_SCHEMA, "processes": procs,
                     "total_pinned_bytes": total_pinned, "total_write_combined_bytes": total_wc,
                     "notices": notes}, indent=1))
    else:
        _print_table(rows, notes)
    return 0


def _capped_to_ram(rows):
    """(rows, pinned total, write-combined total, total capped?): every row, and the totals,
    at most this machine's RAM (MemTotal), by the live collector's rules."""
    from ...collect.collector import cap_rows_to_ram
    from ...collect.host import read_host_memory

    mem_total = read_host_memory()[0].get("mem_total_bytes")
    rows = cap_rows_to_ram(rows, mem_total)
    pinned, wc, capped = capped_totals((r.pinned_bytes for r in rows), (r.write_combined_bytes for r in rows),
                                       mem_total)
    return rows, pinned, wc, capped


def _scan_processes(pids):
    """(rows, notices) of this machine's CUDA processes (only ``pids`` when given); a traced
    process's row carries its in-process tracer's exact figures."""
    from ...collect.processes import ProcessScanner, scan_notice
    from ...collect.traced import merge_traced, read_all

    for pid in pids or []:
        if not os.path.exists(f"/proc/{pid}"):
            raise UsageError(f"pid {pid}: no such process")
    scanner = ProcessScanner(pids=pids)
    scan = scanner.scan()
    traced = read_all()
    rows = merge_traced(scan.processes, traced, scanner.describe, pids)
    notes = list(traced.notices)
    n = scan_notice(scan)
    if n:
        notes.append(n)
    found = {p.pid for p in rows}
    for pid in pids or []:
        if pid not in found:
            notes.append(f"pid {pid}: not a CUDA process (no /dev/nvidia* mapping) or not readable")
    return rows, notes


def _print_table(rows, notes) -> None:
    from ...outputs.text import process_table
    from ...units import printable

    if rows:
        print("\n".join(process_table(rows, limit=len(rows))))
    else:
        print("no CUDA processes with pinned memory found")
    for n in notes:
        print(f"note: {printable(n, 2000)}")
    print("pinned = shared /dev/zero mappings, WC = user /dev/nvidiactl mappings (est.;"
          " cudaHostRegister'ed memory is invisible here)")


def _estimate_maps_file(path: str):
    """The pinned estimate of a saved /proc/PID/maps file; UsageError for anything else."""
    from ...collect.procmaps import estimate_pinned, parse_maps
    from ...infile import InputError, read_capped

    try:
        text = read_capped(path, MAX_MAPS_BYTES, "a maps file").decode("utf-8", errors="replace")
    except InputError as e:
        raise UsageError(str(e)) from None
    if not text.strip():
        raise UsageError(f"{path}: empty file, not a /proc/PID/maps file")
    if not any(parse_maps(line) for line in text.splitlines()[:50]):
        raise UsageError(f"{path}: not a /proc/PID/maps file (no 'start-end perms offset dev inode' lines)")
    return estimate_pinned(text)
