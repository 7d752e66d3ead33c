"""NUMA placement: the host's nodes and the node of each process's pinned pages.

A GPU's own node comes from sysfs in ``collect/nvml/sysfs.py`` (``sysfs_numa_node``). Here:

- ``list_nodes``: the online node ids, from ``/sys/devices/system/node/online`` ("0-1"), or those
  with memory (``has_memory``).
- ``parse_numa_maps``: pages per node of a process's pinned mappings, from ``/proc/PID/numa_maps``
  lines such as ``7fe3ac000000 default file=/dev/zero\\040(deleted) dirty=131072 active=0 N0=131072
  kernelpagesize_kB=4`` (count of pages of ``kernelpagesize_kB`` on each node ``N<id>``).
- ``PinnedPlacement``: keeps those figures per process. Reading ``numa_maps`` walks the process's page
  tables (hundreds of microseconds for a small process, milliseconds for a large one), so it is read
  only on hosts with more than one node, only for processes holding pinned memory, and only when their
  pinned mappings changed (or once a minute).

Pinned pages cannot be migrated while pinned, so a placement read once stays true while the
mappings stay the same. numa_maps has a line per mapping, so a buffer mapped many times would count
many times: a row's placement adds up to at most its pinned bytes (``within``).
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

from ...model import ProcessPinned
from ...model.serial import evolve
from ..rawfile import read_bytes

NODE_DIR = "sys/devices/system/node"
# numa_maps escapes the space in the path (seq_file escapes " " as \040).
PINNED_FILE_TOKEN = b"file=/dev/zero\\040(deleted)"
# A process's placement is read again at least this often even when its mappings look unchanged
# (a mapping replaced by another of the same address and size between two scans).
PLACEMENT_REFRESH_S = 60.0


def parse_node_list(text: str) -> tuple[int, ...] | None:
    """"0-1,3" -> (0, 1, 3); None for junk or an empty list."""
    nodes: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            return None
        if a < 0 or b < a or b - a > 4096:
            return None
        nodes.extend(range(a, b + 1))
    return tuple(sorted(set(nodes))) or None


def list_nodes(root: str = "/", which: str = "online") -> tuple[int, ...] | None:
    """The NUMA node ids of ``/sys/devices/system/node/<which>`` ("online", or "has_memory": the nodes
    pages can be placed on); None where the kernel has no NUMA sysfs (or it is unreadable)."""
    base = os.path.join(root, NODE_DIR)
    try:
        nodes = parse_node_list(read_bytes(os.path.join(base, which)).decode("ascii", "replace"))
    except (OSError, ValueError):
        nodes = None
    if nodes is not None:
        return nodes
    try:  # older kernels or a partial tree: the nodeN directories themselves
        found = sorted(int(n[4:]) for n in os.listdir(base) if n.startswith("node") and n[4:].isdigit())
    except OSError:
        return None
    return tuple(found) or None


def parse_numa_maps(data: bytes, page_size: int = 4096,
                    token: bytes | None = PINNED_FILE_TOKEN) -> dict[str, int]:
    """{"node": bytes} over the lines of ``/proc/PID/numa_maps`` that hold ``token`` (the pinned
    ``/dev/zero (deleted)`` mappings; None: every line). Malformed fields are skipped."""
    out: dict[str, int] = {}
    for line in data.split(b"\n"):
        if token is not None and token not in line:
            continue
        counts: list[tuple[str, int]] = []
        kib: int | None = None
        for field in line.split(b" ")[2:]:
            key, sep, value = field.partition(b"=")
            if not sep:
                continue
            if key.startswith(b"N") and key[1:].isdigit():
                try:
                    counts.append((key[1:].decode(), int(value)))
                except ValueError:
                    continue
            elif key == b"kernelpagesize_kB":
                try:
                    kib = int(value)
                except ValueError:
                    pass
        size = kib * 1024 if kib and kib > 0 else page_size
        for node, pages in counts:
            if pages > 0:
                node = str(int(node))  # "N01" never appears, but keys stay canonical
                out[node] = out.get(node, 0) + pages * size
    return out


def read_pinned_placement(pid: int, proc_root: str = "/proc", page_size: int = 4096) -> dict[str, int] | None:
    """{"node": bytes} of ``pid``'s pinned mappings, or None when numa_maps cannot be read."""
    try:
        data = read_bytes(os.path.join(proc_root, str(pid), "numa_maps"))
    except (OSError, ValueError):
        return None
    return parse_numa_maps(data, page_size)


class PinnedPlacement:
    """Fills ``Placement.pinned_bytes_by_node`` of the rows, reading numa_maps only when it can have changed."""

    def __init__(self, proc_root: str = "/proc", clock: Callable[[], float] = time.monotonic,
                 page_size: int | None = None,
                 reader: Callable[..., dict[str, int] | None] = read_pinned_placement):
        self.proc_root = proc_root
        self._clock = clock
        self._page_size = page_size or system_page_size()
        self._read = reader
        # pid -> (signature of its pinned mappings, when read, placement)
        self._cache: dict[int, tuple[tuple, float, dict[str, int] | None]] = {}
        self.reads = 0  # numa_maps reads so far (tests and benchmarks look at it)

    def annotate(self, rows: Iterable[ProcessPinned], nodes: tuple[int, ...] | None) -> list[ProcessPinned]:
        rows = list(rows)
        if nodes is None or len(nodes) < 2:
            self._cache.clear()  # one node: every page is on it, nothing to read
            return rows
        now = self._clock()
        cache: dict[int, tuple[tuple, float, dict[str, int] | None]] = {}
        out = []
        for r in rows:
            held = r.held
            if not held.pinned_bytes:
                out.append(r)
                continue
            sig = (r.identity.name, held.pinned_bytes, held.mappings)
            last = self._cache.get(r.pid)
            if (last is not None and last[0] == sig and not held.mappings_churn
                    and now - last[1] < PLACEMENT_REFRESH_S):
                cache[r.pid] = last
            else:
                self.reads += 1
                cache[r.pid] = (sig, now, self._read(r.pid, self.proc_root, self._page_size))
            placement = within(cache[r.pid][2], held.pinned_bytes)
            out.append(evolve(r, placement=evolve(r.placement, pinned_bytes_by_node=placement)) if placement else r)
        self._cache = cache  # pids no longer listed are forgotten
        return out


def within(placement: dict[str, int] | None, total_bytes: int) -> dict[str, int] | None:
    """``placement`` scaled down, node by node, to add up to at most ``total_bytes``."""
    if not placement:
        return placement
    found = sum(placement.values())
    if found <= total_bytes:
        return dict(placement)
    return {node: b * total_bytes // found for node, b in placement.items()}


def system_page_size() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return 4096
