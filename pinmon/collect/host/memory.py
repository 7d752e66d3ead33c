"""Host memory: /proc/meminfo, the cgroup memory limit, RLIMIT_MEMLOCK.

Inside a container /proc/meminfo (and psutil) report the host's RAM, while the cgroup limit is what
the OOM killer enforces; ``effective_mem_limit_bytes`` is the smaller of the two. Every reader takes
a ``root`` so tests can point it at a fake tree, and returns None for what it cannot read.

The live collector reads this every second through ``HostMemoryReader``, which finds the tightest
cgroup limit (a walk over the cgroup's ancestors, a file each) once per ``CGROUP_RECHECK_S`` and
reads only /proc/meminfo and that cgroup's usage in between: a changed limit shows within that time.
"""
from __future__ import annotations

import os
import resource
import socket
import time
from typing import Callable, Optional

from ..rawfile import read_bytes

# cgroup v1 reports "no limit" as a huge page-aligned number (e.g. 9223372036854771712).
_UNLIMITED_FLOOR = 1 << 60
# How long the live reader keeps the tightest cgroup limit it found before walking the cgroups again.
CGROUP_RECHECK_S = 10.0


# The /proc/meminfo fields pinmon shows; the other fifty lines are not parsed every second.
MEMINFO_KEYS = frozenset({"MemTotal", "MemAvailable", "SwapTotal", "SwapFree", "Shmem", "Mlocked"})


def parse_meminfo(text: str, keys: Optional[frozenset] = None) -> dict[str, int]:
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


def _read(path: str) -> Optional[str]:
    try:
        return read_bytes(path).decode("utf-8", errors="replace")
    except (OSError, ValueError):  # ValueError: a NUL byte in a path built from /proc/self/cgroup
        return None


def parse_cgroup_limit(text: Optional[str]) -> Optional[int]:
    """Contents of memory.max / memory.limit_in_bytes -> bytes, None for 'max', unlimited or junk."""
    if text is None:
        return None
    s = text.strip()
    if not s or s == "max":
        return None
    try:
        value = int(s)
    except ValueError:
        return None
    if value <= 0 or value >= _UNLIMITED_FLOOR:
        return None
    return value


def cgroup_memory_limit(root: str = "/") -> Optional[int]:
    """The tightest memory limit on this process's cgroup and its ancestors (v2, else v1)."""
    found = _tightest_cgroup(root)
    return found[0] if found else None


def _tightest_cgroup(root: str) -> Optional[tuple[int, str, str]]:
    """(limit bytes, cgroup dir, usage file name) of the tightest limit, or None."""
    cgroup = _read(os.path.join(root, "proc/self/cgroup")) or ""
    v2_path, v1_path = None, None
    for line in cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hier, controllers, path = parts
        if hier == "0" and controllers == "":
            v2_path = path
        elif "memory" in controllers.split(","):
            v1_path = path
    limits: list[tuple[int, str, str]] = []
    for base, rel, name, usage in (
            (os.path.join(root, "sys/fs/cgroup"), v2_path, "memory.max", "memory.current"),
            (os.path.join(root, "sys/fs/cgroup/memory"), v1_path, "memory.limit_in_bytes",
             "memory.usage_in_bytes")):
        if rel is None:
            continue
        # In a container the cgroup namespace makes our own cgroup look like "/", and the files
        # sit at the mount root; outside one, walk from our cgroup up to the root.
        rel = rel.strip().lstrip("/")
        seen = set()
        while True:
            d = os.path.normpath(os.path.join(base, rel)) if rel else base
            if d in seen:
                break
            seen.add(d)
            limit = parse_cgroup_limit(_read(os.path.join(d, name)))
            if limit is not None:
                limits.append((limit, d, usage))
            if not rel:
                break
            rel = os.path.dirname(rel)
        if limits:
            break
    return min(limits) if limits else None


def memlock_limit() -> tuple[Optional[int], Optional[bool]]:
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
    return _host_memory(root, _tightest_cgroup(root))


class HostMemoryReader:
    """``read_host_memory`` for a reader that runs every second: the cgroup walk is done again only
    after ``CGROUP_RECHECK_S``; the usage of the tightest cgroup is read each time."""

    def __init__(self, root: str = "/", clock: Callable[[], float] = time.monotonic):
        self.root = root
        self._clock = clock
        self._tight: Optional[tuple[int, str, str]] = None
        self._walked_at: Optional[float] = None

    def read(self) -> tuple[dict, list[str]]:
        now = self._clock()
        if self._walked_at is None or now - self._walked_at >= CGROUP_RECHECK_S:
            self._tight = _tightest_cgroup(self.root)
            self._walked_at = now
        return _host_memory(self.root, self._tight)


def _host_memory(root: str, tight: Optional[tuple[int, str, str]]) -> tuple[dict, list[str]]:
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
    cg = tight[0] if tight else None
    candidates = [v for v in (total, cg) if v is not None]
    effective = min(candidates) if candidates else None
    if tight is not None and available is not None:
        # MemAvailable is host-wide; inside a tight cgroup the room left is bounded by the limit.
        limit, cgroup_dir, usage_name = tight
        usage = _cgroup_usage(cgroup_dir, usage_name)
        if usage is not None:
            available = min(available, max(0, limit - usage))
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


def _cgroup_usage(cgroup_dir: str, name: str) -> Optional[int]:
    text = _read(os.path.join(cgroup_dir, name))
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None
