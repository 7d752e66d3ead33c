"""A host pointer's kind in one process: pinned, write-combined or pageable; and whether a pointer is
host memory at all (``cuMemcpy``'s way is only in its pointers).

From the process's mappings (``collect/processes/procmaps.py`` parses them, ``kernel_objects.py``
says whether a pinned-looking mapping is the kernel object its path names):

- **pinned**: a shared ``/dev/zero (deleted)`` mapping of a CUDA process (CUDA's pinned allocations),
  or a range allocated (its new mapping, looked for when the allocation's event is read) or registered
  during the attach;
- **write_combined**: an accepted ``/dev/nvidiactl`` mapping in the mmap area, or the new mapping of a
  write-combined allocation seen during the attach;
- **pageable**: anything else. Memory registered before the attach is pinned but looks pageable: the
  result says so (``pageable_may_be_registered``).

A process is a CUDA process when it maps a real NVIDIA device (character major 195, looked at through
``/proc/PID/map_files``): ``is_cuda`` is injectable for tests, where no such device exists.

For ``cuMemcpy``, a pointer is host memory when it lies in a readable mapping that is not an NVIDIA
device's (CUDA reserves device addresses as inaccessible mappings; managed memory maps
``/dev/nvidia-uvm``), or in a range registered or allocated during the attach.

The mappings are re-read when an allocation's event is read, after a free, or when a pointer falls
outside every known mapping (at most every ``MISS_REREAD_S``; while an allocation's mapping is still
looked for, once for each batch of events read: ``batch_read``), never per copy.

An allocation's mapping is found from its entry event alone (no probe on the return): events are read
about a tenth of a second after the calls, by which time the call has returned in practice, so the
re-read shows its mapping. One read while the call still runs (a large allocation takes ~0.1 s) leaves
the allocation pending: every later re-read looks for it again, for ``PENDING_S`` at most. Any copy
from the new buffer comes after the call returned, and so is read after it: a miss on it re-reads the
maps and finds the mapping. (An allocation that fails after its mapping was made is taken all the
same; the free that never comes leaves its range known as pinned for the rest of the attach.)
"""
from __future__ import annotations

import bisect
import os
import stat
import time
from collections.abc import Callable

from ..collect.processes.kernel_objects import NVIDIA_MAJOR, KernelObjects
from ..collect.processes.procmaps import (
    NVIDIACTL_PATH,
    PINNED_PATH,
    Mapping,
    is_nvidiactl_mmap_area,
    is_pinned_mapping,
    parse_maps,
)
from ..collect.rawfile import read_bytes
from ..limits import MAX_MAPS_BYTES

PINNED, WRITE_COMBINED, PAGEABLE = "pinned", "write_combined", "pageable"
MISS_REREAD_S = 0.2
MAX_RANGES = 65_536          # ranges registered or allocated during an attach, per process
PENDING_S = 2.0              # how long an allocation's mapping is looked for
MAX_PENDING = 64             # allocations whose mapping is looked for, per process
NVIDIA_PREFIX = "/dev/nvidia"
ALLOCATION_PATHS = (PINNED_PATH, NVIDIACTL_PATH)

IsCuda = Callable[[int, list], bool]


def maps_real_nvidia_device(pid: int, mappings: list, proc_root: str = "/proc",
                            stat_mapped: Callable[[str], os.stat_result] = os.stat) -> bool:
    """Whether one of ``/dev/nvidia*`` mappings is a character device of the NVIDIA driver's major
    (the kernel's answer through map_files, not the path a mount namespace shows)."""
    for m in mappings:
        if not m.path.startswith(NVIDIA_PREFIX):
            continue
        try:
            st = stat_mapped(os.path.join(proc_root, str(pid), "map_files", f"{m.start:x}-{m.end:x}"))
        except (OSError, ValueError):
            continue
        if stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == NVIDIA_MAJOR:
            return True
    return False


def read_process_maps(pid: int, proc_root: str = "/proc") -> list | None:
    """A process's mappings; None when it is gone or unreadable."""
    try:
        data = read_bytes(os.path.join(proc_root, str(pid), "maps"))
    except (OSError, ValueError):
        return None
    if len(data) > MAX_MAPS_BYTES:
        return None
    return parse_maps(data.decode("utf-8", "replace"))


class _Ranges:
    """Disjoint-enough [start, end) ranges with a kind, looked up by address."""

    def __init__(self) -> None:
        self.by_start: dict[int, tuple[int, str]] = {}
        self._starts: list[int] = []
        self._dirty = False

    def add(self, start: int, end: int, kind: str) -> bool:
        if len(self.by_start) >= MAX_RANGES and start not in self.by_start:
            return False
        self.by_start[start] = (end, kind)
        self._dirty = True
        return True

    def remove(self, start: int) -> tuple[int, str] | None:
        got = self.by_start.pop(start, None)
        if got is not None:
            self._dirty = True
        return got

    def find(self, ptr: int) -> str | None:
        if not self.by_start:
            return None
        if self._dirty:
            self._starts = sorted(self.by_start)
            self._dirty = False
        i = bisect.bisect_right(self._starts, ptr) - 1
        if i < 0:
            return None
        end, kind = self.by_start[self._starts[i]]
        return kind if ptr < end else None


class ProcessMemory:
    """One process's host memory as the attach knows it."""

    def __init__(self, pid: int, objects: KernelObjects, proc_root: str = "/proc",
                 is_cuda: IsCuda | None = None,
                 read_maps: Callable[[int], list | None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pid, self.proc_root, self.clock = pid, proc_root, clock
        self.objects = objects
        self._read = read_maps if read_maps is not None else (lambda p: read_process_maps(p, proc_root))
        self._is_cuda = is_cuda or (lambda p, ms: maps_real_nvidia_device(p, ms, proc_root))
        self.seen = _Ranges()          # allocated or registered during the attach
        # Allocations whose mapping is not found yet: (size, write-combined, when, token).
        self.pending: list[tuple[int, bool, float, int]] = []
        self._token = 0
        self._found: dict[int, tuple[int, int]] = {}   # token -> the range the last re-read gave it
        self.cuda = False
        self.rereads = 0
        self._starts: list[int] = []
        self._rows: list[tuple[int, str, bool]] = []   # (end, kind for a host pointer, is host memory)
        self._mappings: list[Mapping] = []
        self._last_read = -1e18
        self._batch_at = -1e18         # when the batch of events being applied was read
        self._initial: set | None = None
        self.refresh()
        # The mappings when the attach began: an allocation's mapping is one that was not among them.
        self._initial = {(m.start, m.end) for m in self._mappings} if self._mappings else None

    # --- the mappings --------------------------------------------------------------------------

    def refresh(self) -> bool:
        maps = self._read(self.pid)
        self._last_read = self.clock()
        if maps is None:
            return False
        self.rereads += 1
        self._mappings = sorted(maps, key=lambda m: m.start)
        self.cuda = bool(self._is_cuda(self.pid, self._mappings))
        accept = self.objects.accepter(self.pid, self.proc_root)
        self._starts, self._rows = [], []
        for m in self._mappings:
            kind = PAGEABLE
            if self.cuda and is_pinned_mapping(m) and accept(m):
                kind = PINNED
            elif is_nvidiactl_mmap_area(m) and accept(m):
                kind = WRITE_COMBINED
            host = m.perms[0] == "r" and not m.path.startswith(NVIDIA_PREFIX)
            self._starts.append(m.start)
            self._rows.append((m.end, kind, host))
        if self.pending:
            self._match_pending()
        return True

    def _lookup(self, ptr: int) -> tuple[int, str, bool] | None:
        i = bisect.bisect_right(self._starts, ptr) - 1
        if i >= 0:
            row = self._rows[i]
            if ptr < row[0]:
                return row
        return None

    def batch_read(self, at: float) -> None:
        """A batch of events was read at ``at``: every call in it had been made by then."""
        self._batch_at = at

    def _reread_on_miss(self) -> bool:
        """Re-read the maps for a pointer outside them: at most every ``MISS_REREAD_S``; while an
        allocation's mapping is looked for, also when the maps were read before the batch of events
        this pointer came in (the allocation had returned by then, so a re-read now shows it)."""
        now = self.clock()
        if now - self._last_read < MISS_REREAD_S and not (self.pending and self._last_read < self._batch_at):
            return False
        self.refresh()
        return True

    # --- what a pointer is ---------------------------------------------------------------------

    def host_kind(self, ptr: int | None) -> str:
        """pinned, write_combined or pageable, for a pointer a call says is host memory."""
        if ptr is None:
            return PAGEABLE
        kind = self.seen.find(ptr)
        if kind is not None:
            return kind
        row = self._lookup(ptr)
        if row is None and self._reread_on_miss():
            kind = self.seen.find(ptr)
            if kind is not None:
                return kind
            row = self._lookup(ptr)
        return row[1] if row is not None else PAGEABLE

    def is_host(self, ptr: int | None) -> bool:
        """Whether ``cuMemcpy``'s pointer is host memory (else the device's)."""
        if ptr is None:
            return False
        if self.seen.find(ptr) is not None:
            return True
        row = self._lookup(ptr)
        if row is None and self._reread_on_miss():
            if self.seen.find(ptr) is not None:
                return True
            row = self._lookup(ptr)
        return bool(row and row[2])

    # --- what the process did --------------------------------------------------------------------

    def allocated(self, size: int | None, write_combined: bool) -> tuple[int, int] | None:
        """An allocation's event: re-read the mappings and take, as its range, the smallest
        pinned-looking mapping (``/dev/zero (deleted)`` or ``/dev/nvidiactl``, shared) at least ``size``
        long that was not there when the attach began and no earlier allocation took (events are read
        a little after they happen: several allocations may have returned by the re-read). None while
        no such mapping is there: the allocation is then looked for again at each later re-read."""
        if not size:
            return None
        if len(self.pending) >= MAX_PENDING:
            self.pending.pop(0)
        self._token += 1
        token = self._token
        self.pending.append((size, write_combined, self.clock(), token))
        self.refresh()
        return self._found.pop(token, None)

    def _match_pending(self) -> None:
        """Each allocation still looked for, oldest first, takes its mapping where one is there now;
        one looked for longer than ``PENDING_S`` is given up."""
        if self._initial is None:
            return
        now = self.clock()
        left = []
        self._found.clear()
        for size, wc, since, token in self.pending:
            if now - since > PENDING_S:
                continue
            fresh = [m for m in self._mappings if m.perms[3] == "s" and m.path in ALLOCATION_PATHS
                     and m.size >= size and (m.start, m.end) not in self._initial
                     and self.seen.by_start.get(m.start, (None,))[0] != m.end]
            if not fresh:
                left.append((size, wc, since, token))
                continue
            m = min(fresh, key=lambda m: (m.size, m.start))
            self.seen.add(m.start, m.end, WRITE_COMBINED if wc else PINNED)
            self._found[token] = (m.start, m.end)
        self.pending = left

    def registered(self, ptr: int | None, size: int | None) -> None:
        if ptr is not None and size:
            self.seen.add(ptr, ptr + size, PINNED)

    def released(self, ptr: int | None) -> None:
        """An unregister or a free: the range that starts at ``ptr`` is no longer known as pinned."""
        if ptr is not None and self.seen.remove(ptr) is not None:
            self._last_read = -1e18   # its mapping may be gone: the next miss re-reads at once

