"""What a tracer's report may put in a process row: each figure held to what the kernel shows.

A report is a file its process's user wrote (``reader.py`` checks whose it is, not whether it is
true), and root reads it. So a report only ever fills in its own process's row, never a host total,
and each figure it adds is bounded by the kernel's own view:

- write-combined bytes: at most the process's ``/dev/nvidiactl`` mappings in the mmap area, those
  the live scan accepted as the real control device (``collect/processes/kernel_objects.py``); a process with none
  has none;
- pinned bytes beyond the process's ``/dev/zero`` mappings (``cudaHostRegister``ed memory, which
  maps show nowhere): summed over every traced process, at most the kernel's pinned pages that no
  mapping explains. Without the kernel's count they are left as the report says (its resident set
  already caps each, ``report_checks.py``), shown in the row and in no total;
- registered and requested bytes: at most the pinned bytes they are part of.

The host's totals and ``unattributed`` come from the maps and the kernel alone (``collect/host/pinned_total.py``),
so a report can neither raise a total nor hide pinned memory that nothing explains.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple, Optional

from ...model import ProcessPinned
from ...model.serial import evolve


class Backing(NamedTuple):
    """What the kernel shows of one process: its maps estimate (capped to resident) and its
    accepted control-device mappings in the mmap area, in bytes."""

    pinned_bytes: int
    nvidiactl_bytes: int


def _min(value: Optional[int], limit: int) -> Optional[int]:
    return None if value is None else min(value, limit)


def bound_reports(rows: Iterable[ProcessPinned], backing: dict[int, Backing],
                  unexplained_bytes: Optional[int]) -> tuple[list[ProcessPinned], list[int]]:
    """(rows with every traced row's figures bounded, pids whose figures were lowered)."""
    rows = list(rows)
    traced = [i for i, r in enumerate(rows) if r.source == "traced"]
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
    return rows, lowered


def bounded_notice(pids: list[int], shown: int = 5) -> Optional[str]:
    """One line naming the traced processes whose reported figures were lowered, or None."""
    if not pids:
        return None
    more = len(pids) - shown
    names = ", ".join(str(p) for p in pids[:shown]) + (f" and {more} more" if more > 0 else "")
    return (f"trace reports: the figures of pid {names} were lowered to what the kernel shows"
            " (their mappings, and the kernel's pinned pages that no mapping explains)")
