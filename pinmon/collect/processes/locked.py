"""mlock()ed and kernel-pinned memory of the process rows: ``VmLck`` and ``VmPin`` from ``/proc/PID/status``.

Locked is not pinned: ``mlock()`` keeps pages resident but the CUDA driver does not know them, so
its copies from them go through its pageable path. CUDA's own pinning does not show in ``VmLck``
(measured on the H200 box), so a large ``VmLck`` in a CUDA process is memory that was meant to be
fast and is not. ``VmPin`` (``cgroups/vmpin.py``) is what the kernel's own accounting pinned for it:
io_uring registered buffers, RDMA memory regions. The file is short and built without the
process's mmap lock; it is read for the rows only, and again for each only every ``LOCKED_TTL_S``.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

from ...model import ProcessPinned
from ...model.serial import evolve
from ..cgroups.vmpin import parse_vmpin
from ..rawfile import read_bytes

_KEY = b"\nVmLck:"
# A process's VmLck is read again after this many seconds.
LOCKED_TTL_S = 10.0


def parse_vm_locked(data: bytes) -> int | None:
    """Bytes of the ``VmLck:   123 kB`` line of a status file; None when absent or malformed."""
    at = data.find(_KEY)
    if at < 0:
        return None
    end = data.find(b"\n", at + 1)
    parts = data[at + len(_KEY):end if end >= 0 else None].split()
    if not parts:
        return None
    try:
        value = int(parts[0])
    except ValueError:
        return None
    if value < 0:
        return None
    unit = parts[1].lower() if len(parts) > 1 else b"kb"
    return value * 1024 if unit == b"kb" else value


def read_vm_locked(pid: int, proc_root: str = "/proc") -> int | None:
    return read_locked_and_pinned(pid, proc_root)[0]


def read_locked_and_pinned(pid: int, proc_root: str = "/proc") -> tuple[int | None, int | None]:
    """(VmLck, VmPin) of a process in bytes; None for what its status does not say."""
    try:
        data = read_bytes(os.path.join(proc_root, str(pid), "status"))
    except (OSError, ValueError):
        return None, None
    return parse_vm_locked(data), parse_vmpin(data)


class LockedReader:
    """``VmLck`` and ``VmPin`` of the process rows, each read again after ``LOCKED_TTL_S``: mlock()ed
    and registered memory are slow habits, not spikes, and the read costs as much as a
    /proc/meminfo read per process. A row that already carries its ``VmPin`` (the full scan's) keeps it."""

    def __init__(self, proc_root: str = "/proc", clock: Callable[[], float] = time.monotonic):
        self.proc_root = proc_root
        self._clock = clock
        self._cache: dict[tuple, tuple[float, tuple[int | None, int | None]]] = {}

    def annotate(self, rows: Iterable[ProcessPinned]) -> list[ProcessPinned]:
        """The rows with ``held.vm_locked_bytes`` and ``held.vm_pinned_bytes`` filled in where /proc tells them."""
        now = self._clock()
        cache: dict[tuple, tuple[float, tuple[int | None, int | None]]] = {}
        out = []
        for r in rows:
            key = (r.pid, r.identity.name)  # a pid reused by another program is read anew
            hit = self._cache.get(key)
            if hit is None or now - hit[0] >= LOCKED_TTL_S:
                hit = (now, read_locked_and_pinned(r.pid, self.proc_root))
            cache[key] = hit
            locked, pinned = hit[1]
            held = r.held
            vm_locked = locked if locked is not None else held.vm_locked_bytes
            vm_pinned = held.vm_pinned_bytes if held.vm_pinned_bytes is not None else pinned
            if (vm_locked, vm_pinned) != (held.vm_locked_bytes, held.vm_pinned_bytes):
                r = evolve(r, held=evolve(held, vm_locked_bytes=vm_locked, vm_pinned_bytes=vm_pinned))
            out.append(r)
        self._cache = cache  # pids no longer listed are forgotten
        return out
