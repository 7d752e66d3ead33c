"""What a tracer's report may put in a process row: each held figure kept between what the kernel shows.

A report is a file its process's user wrote (``reader.py`` checks whose it is, not whether it is
true), and root reads it. So a report only ever fills in its own process's row, never a host total,
and each figure it gives is held to the kernel's own view, from above and from below:

- never below what the kernel shows: a report may add precision (registered memory, what the program
  asked for), never hide memory. Its pinned bytes outside ``cudaHostRegister`` are raised to the
  process's ``/dev/zero`` mappings, its write-combined bytes to its write-combined mappings (the scan's
  estimate, capped to what is resident), and its registered bytes (which maps show nowhere) are on
  top. VmPin is the kernel's and a report never touches it. A report more than
  ``UNDERSTATED_SLACK_BYTES`` below the mappings flags the row (``held.report_understated``) and the
  notice names the pid;
- never above what the kernel can back: write-combined bytes at most the process's ``/dev/nvidiactl``
  mappings in the mmap area, those the live scan accepted as the real control device
  (``collect/processes/kernel_objects.py``); pinned bytes beyond the process's ``/dev/zero`` mappings
  (``cudaHostRegister``ed memory, which maps show nowhere), summed over every traced process, at most
  the kernel's pinned pages that no mapping explains. Without the kernel's count they are left as the
  report says (its resident set already caps each, ``report_checks.py``), shown in the row and in no
  total; registered and requested bytes at most the pinned bytes they are part of.

The host's totals and ``unattributed`` come from the maps and the kernel alone (``collect/host/pinned_total.py``),
so a report can neither raise a total nor hide pinned memory that nothing explains.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ...model import ProcessPinned
from ...model.serial import evolve

MIB = 1 << 20
# How far a truthful report may sit below the mappings: the maps count a CUDA context's own ~8 MiB of
# pinned staging buffers and whole 2 MiB chunks for small allocations, which a report does not. Past
# this a report says less than the kernel shows, and the row says so.
UNDERSTATED_SLACK_BYTES = 16 * MIB


class Backing(NamedTuple):
    """What the kernel shows of one process: its maps estimate of pinned and write-combined bytes
    (capped to resident) and its accepted control-device mappings in the mmap area, in bytes."""

    pinned_bytes: int
    nvidiactl_bytes: int
    write_combined_bytes: int = 0


class Bounded(NamedTuple):
    rows: list[ProcessPinned]
    lowered: list[int]      # pids whose reported figures were lowered to what the kernel backs
    understated: list[int]  # pids whose report counts less than their mappings show


def _min(value: int | None, limit: int) -> int | None:
    return None if value is None else min(value, limit)


def _raised(row: ProcessPinned, own: Backing) -> tuple[ProcessPinned, bool]:
    """``row`` with its reported figures raised to what its mappings show; whether the report sat
    more than ``UNDERSTATED_SLACK_BYTES`` below them."""
    held = row.held
    registered = min(held.registered_bytes or 0, held.pinned_bytes or 0)
    mapped_claim = (held.pinned_bytes or 0) - registered  # what the maps should show of the report's
    pinned = held.pinned_bytes
    if pinned is not None or own.pinned_bytes:
        pinned = max(mapped_claim, own.pinned_bytes) + registered
    wc = held.write_combined_bytes
    if wc is not None or own.write_combined_bytes:
        wc = max(wc or 0, own.write_combined_bytes)  # at most its control-device mappings: below
    understated = (own.pinned_bytes - mapped_claim > UNDERSTATED_SLACK_BYTES
                   or own.write_combined_bytes - (held.write_combined_bytes or 0) > UNDERSTATED_SLACK_BYTES)
    if pinned == held.pinned_bytes and wc == held.write_combined_bytes and not understated:
        return row, False
    return evolve(row, held=evolve(held, pinned_bytes=pinned, write_combined_bytes=wc,
                                   report_understated=held.report_understated or understated)), understated


def bound_reports(rows: Iterable[ProcessPinned], backing: dict[int, Backing],
                  unexplained_bytes: int | None) -> Bounded:
    """Every traced row's figures held between what the kernel shows and what it can back."""
    rows = list(rows)
    traced = [i for i, r in enumerate(rows) if r.source == "traced"]
    understated = []
    for i in traced:
        rows[i], low = _raised(rows[i], backing.get(rows[i].pid, Backing(0, 0)))
        if low:
            understated.append(rows[i].pid)
    excess: dict[int, int] = {}
    for i in traced:
        r = rows[i]
        own = backing.get(r.pid, Backing(0, 0))
        excess[i] = max(0, (r.held.pinned_bytes or 0) - own.pinned_bytes)
    total_excess = sum(excess.values())
    share = 1.0
    if unexplained_bytes is not None and total_excess > unexplained_bytes:
        share = unexplained_bytes / total_excess
    lowered = []
    for i in traced:
        r = rows[i]
        held = r.held
        own = backing.get(r.pid, Backing(0, 0))
        wc = _min(held.write_combined_bytes, own.nvidiactl_bytes)
        pinned = held.pinned_bytes
        if pinned is not None and share < 1.0 and excess[i]:
            pinned = min(pinned, own.pinned_bytes) + int(excess[i] * share)
        if pinned == held.pinned_bytes and wc == held.write_combined_bytes:
            continue
        limit = pinned or 0
        rows[i] = evolve(r, held=evolve(
            held, pinned_bytes=pinned, write_combined_bytes=wc,
            registered_bytes=_min(held.registered_bytes, limit),
            requested_bytes=_min(held.requested_bytes, limit),
            capped=True))
        lowered.append(r.pid)
    return Bounded(rows, lowered, understated)


def _pid_list(pids: list[int], shown: int) -> str:
    more = len(pids) - shown
    return ", ".join(str(p) for p in pids[:shown]) + (f" and {more} more" if more > 0 else "")


def bounded_notice(pids: list[int], shown: int = 5) -> str | None:
    """One line naming the traced processes whose reported figures were lowered, or None."""
    if not pids:
        return None
    return (f"trace reports: the figures of pid {_pid_list(pids, shown)} were lowered to what the kernel shows"
            " (their mappings, and the kernel's pinned pages that no mapping explains)")


def understated_notice(pids: list[int], shown: int = 5) -> str | None:
    """One line naming the traced processes whose reports count less than their mappings show, or None.

    An honest report can: PyTorch's caching host allocator reports the blocks it has handed out, not
    the freed ones it keeps pinned; so the line names both reasons and accuses no one."""
    if not pids:
        return None
    return (f"trace reports: the report of pid {_pid_list(pids, shown)} counts less pinned memory than its"
            " mappings show (blocks a pinned pool keeps cached, or a report that understates): the mappings'"
            " larger figure is shown")
