"""Host memory: /proc/meminfo, the cgroup memory limit, RLIMIT_MEMLOCK.

Inside a container /proc/meminfo (and psutil) report the host's RAM, while the cgroup limit is what
the OOM killer enforces; ``effective_mem_limit_bytes`` is the smaller of the two. Every reader takes
a ``root`` so tests can point it at a fake tree, and returns None for what it cannot read.

The cgroup limit is that of pinmon's own cgroup (``/proc/self/cgroup``), read by the one limit
walker, ``collect/cgroups/limits.py``: the hierarchy that holds the memory controller found from
mountinfo, the tightest limit from the cgroup up to the mount's root, ``0`` a limit of zero bytes
on both versions. The live collector reads this every second through ``HostMemoryReader``, which
reads /proc/self/cgroup again once per ``CGROUP_RECHECK_S``; the walker itself keeps limits for its
own recheck time and reads the cgroup's usage each time.
"""
from __future__ import annotations

import os
import resource
import socket
import time
from collections.abc import Callable

from ..cgroups.limits import CgroupMemory, CgroupMemoryReader
from ..cgroups.ownership import CgroupPaths, parse_proc_cgroup
from ..rawfile import read_bytes

# How long the live reader keeps pinmon's own cgroup before reading /proc/self/cgroup again.
CGROUP_RECHECK_S = 10.0


# The /proc/meminfo fields pinmon shows; the other fifty lines are not parsed every second.
MEMINFO_KEYS = frozenset({"MemTotal", "MemAvailable", "SwapTotal", "SwapFree", "Shmem", "Mlocked"})


def parse_meminfo(text: str, keys: frozenset | None = None) -> dict[str, int]:
    """'MemTotal:  131072 kB' lines -> {'MemTotal': 134217728, ...} in bytes; bad lines skipped.
    With ``keys``, only those fields."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        if keys is not None and key not in keys:
            continue
        parts = rest.split()
        if not parts or len(parts[0]) > 20:  # past 64 bits: not a figure the kernel writes
            continue
        try:
            value = int(parts[0])
        except ValueError:
            continue
        if value < 0:
            continue
        unit = parts[1].lower() if len(parts) > 1 else ""
        out[key] = value * 1024 if unit == "kb" else value
    return out


def _read(path: str) -> str | None:
    try:
        return read_bytes(path).decode("utf-8", errors="replace")
    except (OSError, ValueError):  # ValueError: a NUL byte in a path built from /proc/self/cgroup
        return None


def own_cgroup(root: str = "/") -> CgroupPaths:
    """pinmon's own cgroup in each hierarchy that may hold the memory controller."""
    v2, v1_memory, _others = parse_proc_cgroup(_read(os.path.join(root, "proc/self/cgroup")) or "")
    return CgroupPaths(v2, v1_memory)


def cgroup_memory_limit(root: str = "/") -> int | None:
    """The tightest memory limit on this process's cgroup and its ancestors, bytes; None: none."""
    with CgroupMemoryReader(root=root) as reader:
        return reader.read_one(own_cgroup(root)).limit_bytes


def memlock_limit() -> tuple[int | None, bool | None]:
    """(soft RLIMIT_MEMLOCK bytes or None, unlimited?) for this process."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    except (OSError, ValueError, AttributeError):
        return None, None
    if soft == resource.RLIM_INFINITY:
        return None, True
    return int(soft), False


def read_host_memory(root: str = "/") -> tuple[dict, list[str]]:
    """Host memory fields for ``HostMemory`` (pinned estimate excluded) and notices."""
    with CgroupMemoryReader(root=root) as reader:
        own = reader.read_one(own_cgroup(root))
        return _host_memory(root, own, limit_usage(reader, own))


def limit_usage(reader: CgroupMemoryReader, cgroup: CgroupMemory, now: float | None = None) -> int | None:
    """The usage of the cgroup that sets ``cgroup``'s limit (itself, or an ancestor whose usage
    counts every cgroup below it), bytes; None where unknown."""
    if cgroup.limit_path is None:
        return None
    if cgroup.limit_path == cgroup.path:
        return cgroup.current_bytes
    paths = CgroupPaths(cgroup.limit_path, None) if cgroup.version == 2 else CgroupPaths(None, cgroup.limit_path)
    return reader.read_one(paths, now).current_bytes


class HostMemoryReader:
    """``read_host_memory`` for a reader that runs every second: /proc/self/cgroup is read again only
    after ``CGROUP_RECHECK_S``; ``memory`` (the live collector's group reader, shared) keeps the
    limit walk for its own recheck time and reads the usage each time."""

    def __init__(self, root: str = "/", clock: Callable[[], float] = time.monotonic,
                 memory: CgroupMemoryReader | None = None):
        self.root = root
        self._clock = clock
        self._own_reader = memory is None
        self.memory = memory if memory is not None else CgroupMemoryReader(root=root, clock=clock)
        self._own: CgroupPaths | None = None
        self._read_at: float | None = None

    def read(self) -> tuple[dict, list[str]]:
        now = self._clock()
        if self._own is None or self._read_at is None or now - self._read_at >= CGROUP_RECHECK_S:
            self._own = own_cgroup(self.root)
            self._read_at = now
        own = self.memory.read_one(self._own, now)
        return _host_memory(self.root, own, limit_usage(self.memory, own, now))

    def close(self) -> None:
        if self._own_reader:
            self.memory.close()


def _host_memory(root: str, cgroup: CgroupMemory, usage: int | None) -> tuple[dict, list[str]]:
    notices: list[str] = []
    meminfo_text = _read(os.path.join(root, "proc/meminfo"))
    if meminfo_text is None:
        notices.append("host memory: /proc/meminfo is not readable")
    info = parse_meminfo(meminfo_text or "", MEMINFO_KEYS)
    total = info.get("MemTotal")
    available = info.get("MemAvailable")
    swap_used = None
    if "SwapTotal" in info and "SwapFree" in info:
        swap_used = max(0, info["SwapTotal"] - info["SwapFree"])
    cg = cgroup.limit_bytes
    candidates = [v for v in (total, cg) if v is not None]
    effective = min(candidates) if candidates else None
    if cg is not None and available is not None and usage is not None:
        # MemAvailable is host-wide; inside a tight cgroup the room left is bounded by the limit,
        # less what the cgroup that sets it uses (its usage counts every cgroup below it).
        available = min(available, max(0, cg - usage))
    lock, unlimited = memlock_limit()
    fields = {
        "hostname": socket.gethostname(),
        "mem_total_bytes": total,
        "mem_available_bytes": available,
        "effective_mem_limit_bytes": effective,
        "cgroup_limit_bytes": cg,
        "swap_used_bytes": swap_used,
        "shmem_bytes": info.get("Shmem"),
        "mlocked_bytes": info.get("Mlocked"),
        "memlock_limit_bytes": lock,
        "memlock_unlimited": unlimited,
    }
    return fields, notices
