"""mlock()ed memory of CUDA processes: ``VmLck`` from ``/proc/PID/status``.

Locked is not pinned: ``mlock()`` keeps pages resident but the CUDA driver does not know them, so
its copies from them go through its pageable path. CUDA's own pinning does not show in ``VmLck``
(measured on the H200 box), so a large ``VmLck`` in a CUDA process is memory that was meant to be
fast and is not. The file is short and built without the process's mmap lock; it is read for the
CUDA process rows only.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Iterable, Optional

from ..model import ProcessPinned
from .rawfile import read_bytes

_KEY = b"\nVmLck:"


def parse_vm_locked(data: bytes) -> Optional[int]:
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


def read_vm_locked(pid: int, proc_root: str = "/proc") -> Optional[int]:
    try:
        return parse_vm_locked(read_bytes(os.path.join(proc_root, str(pid), "status")))
    except (OSError, ValueError):
        return None


def annotate_locked(rows: Iterable[ProcessPinned], proc_root: str = "/proc") -> list[ProcessPinned]:
    """The rows with ``vm_locked_bytes`` filled in where /proc tells it."""
    out = []
    for r in rows:
        locked = read_vm_locked(r.pid, proc_root)
        out.append(dataclasses.replace(r, vm_locked_bytes=locked) if locked is not None else r)
    return out
