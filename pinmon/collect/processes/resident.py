"""Caps a /proc/PID/maps estimate of pinned memory by what the kernel says is resident.

A maps estimate counts mapped (virtual) size, and a mapping's path is whatever the process's mount
namespace says: anyone can map a sparse tmpfs file named ``/dev/zero`` (then deleted) next to a
``/dev/nvidiactl`` file and look like a process holding a terabyte of pinned memory. Pinned pages
are always resident, so what a process really pins is bounded by its resident counters in
``/proc/PID/status`` (one short file, no page-table walk):

- a pinned buffer is a shared ``/dev/zero`` mapping: shmem pages, counted in ``RssShmem``;
- a write-combined buffer is driver memory mapped through ``/dev/nvidiactl`` (``vm_insert_page``:
  pages that are not swap-backed count as file pages), so it sits in ``RssFile``; a fake one on
  tmpfs would be shmem. ``RssFile + RssShmem`` less the pinned share bounds it either way.

The bound is loose (libraries and other shared memory are resident too) but sound, and it only
ever lowers a figure. No process's figure, and no total, exceeds the machine's RAM (MemTotal).
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from ..rawfile import READ_FLAGS, read_to_end

MIB = 1 << 20
# The kernel's RSS counters are per-CPU and lag by a few pages per CPU; an estimate within this
# much of the resident figure is left as it is, not flagged as capped.
CAP_SLACK_BYTES = 4 * MIB


@dataclass(frozen=True)
class Resident:
    """Resident bytes of one process from /proc/PID/status; None where the line is missing."""

    file_bytes: int | None
    shmem_bytes: int | None


@dataclass(frozen=True)
class Capped:
    pinned_bytes: int
    write_combined_bytes: int
    capped: bool  # True when either figure was lowered below its mapped size


def parse_status_rss(text: str) -> Resident:
    """'RssFile:\\t  1234 kB' and 'RssShmem:' lines of /proc/PID/status -> bytes."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if not sep or key not in ("RssFile", "RssShmem"):
            continue
        parts = rest.split()
        if (len(parts) == 2 and parts[1] == "kB" and parts[0].isascii() and parts[0].isdigit()
                and len(parts[0]) <= 16):  # kB of a 64-bit address space: 16 digits at most
            values[key] = int(parts[0]) * 1024
    return Resident(values.get("RssFile"), values.get("RssShmem"))


def read_resident(pid: int, proc_root: str = "/proc") -> Resident | None:
    """The process's resident file and shmem bytes; None when its status cannot be read."""
    try:
        fd = os.open(os.path.join(proc_root, str(pid), "status"), READ_FLAGS)
    except OSError:
        return None
    try:
        return parse_status_rss(read_to_end(fd).decode("ascii", errors="replace"))
    except OSError:
        return None
    finally:
        os.close(fd)


def cap_estimate(pinned_bytes: int, write_combined_bytes: int, resident: Resident | None,
                 mem_total_bytes: int | None) -> Capped:
    """The maps estimate, lowered to what the process has resident and to RAM.

    Unknown resident figures (a status without the lines, a process gone) leave only the RAM cap.
    """
    pinned, wc, capped = pinned_bytes, write_combined_bytes, False
    if resident is not None and resident.shmem_bytes is not None:
        if pinned > resident.shmem_bytes + CAP_SLACK_BYTES:
            pinned, capped = resident.shmem_bytes, True
        if resident.file_bytes is not None:
            room = max(0, resident.file_bytes + resident.shmem_bytes - pinned)
            if wc > room + CAP_SLACK_BYTES:
                wc, capped = room, True
    if mem_total_bytes is not None:
        if pinned > mem_total_bytes:
            pinned, capped = mem_total_bytes, True
        if wc > mem_total_bytes - pinned:
            wc, capped = mem_total_bytes - pinned, True
    return Capped(pinned, wc, capped)


# Said wherever a total is capped by ``capped_totals``.
CAPPED_TOTAL_NOTICE = ("the per-process pinned figures add up to more than RAM (processes share buffers),"
                       " so the total is capped at RAM")


def capped_totals(pinned: Iterable[int | None], write_combined: Iterable[int | None],
                  mem_total_bytes: int | None) -> tuple[int, int, bool]:
    """(pinned total, write-combined total, capped?): the sums of the rows, together at most RAM.

    Processes that share one buffer (a fork, a CUDA IPC handle) each count it, so the sum of
    sound per-process figures can still exceed the machine.
    """
    p = sum(v or 0 for v in pinned)
    w = sum(v or 0 for v in write_combined)
    if mem_total_bytes is None:
        return p, w, False
    capped = False
    if p > mem_total_bytes:
        p, capped = mem_total_bytes, True
    if w > mem_total_bytes - p:
        w, capped = mem_total_bytes - p, True
    return p, w, capped
