"""The tracer's reports joined to the process scan's rows: which reports are taken, and what each may say.

- A report is taken only for a CUDA process: one the scan found mapping a real NVIDIA device
  (``collect/processes/kernel_objects.py``). A report of any other process (a ``sleep`` on a box with
  no GPU, a program before its first CUDA call) is left unread into the snapshot; it counts once its
  process maps the device.
- Its held figures are kept between what the kernel shows and what it can back (``bounds.py``).
- Its rates are held to the host's GPU links and to what a driver can allocate (``rates.py``).

Each bound that changed a row is said in one notice naming the pids.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from ...model import Gpu, ProcessPinned
from .bounds import Backing, bound_reports, bounded_notice, understated_notice
from .rates import bound_rates, ceilings_of, rates_notice
from .reader import ReadResult, merge_traced


def join_reports(rows: list[ProcessPinned], traced: ReadResult, cuda_pids: Collection[int],
                 backing: dict[int, Backing], unexplained_bytes: int | None, gpus: Sequence[Gpu] = (),
                 describe: Callable | None = None,
                 only_pids: Collection[int] | None = None) -> tuple[list[ProcessPinned], list[str]]:
    """(the scan's ``rows`` with the reports of ``cuda_pids`` joined and bounded, notices).

    ``backing``: what the scan shows of each CUDA process; ``unexplained_bytes``: the kernel's pinned
    pages that no mapping or VmPin explains (None without the kernel's count); ``gpus``: the snapshot's."""
    taken = ReadResult(processes={pid: t for pid, t in traced.processes.items() if pid in cuda_pids})
    merged = merge_traced(rows, taken, describe, only_pids)
    bounded = bound_reports(merged, backing, unexplained_bytes)
    ceilings = ceilings_of(gpus)
    out, fast = bound_rates(bounded.rows, ceilings)
    notices = [n for n in (understated_notice(bounded.understated), bounded_notice(bounded.lowered),
                           rates_notice(fast, ceilings)) if n]
    return out, notices
