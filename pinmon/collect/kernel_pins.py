"""The kernel's own count of pinned pages: the FOLL_PIN counters, host-wide and per NUMA node.

``nr_foll_pin_acquired - nr_foll_pin_released`` in ``/proc/vmstat`` is the number of pages pinned
right now with ``pin_user_pages()`` (FOLL_PIN), system-wide, by anyone: ``cudaHostAlloc`` (default,
mapped, portable), ``cudaHostRegister``, ``torch.Tensor.pin_memory()``, RDMA memory registration, VFIO,
io_uring registered buffers. ``/sys/devices/system/node/nodeN/vmstat`` has the same two counters for
the pages of node N. The counters exist since Linux 5.6; without them every figure here is None.

Not in the count: ``cudaHostAllocWriteCombined`` memory (the driver's own pages, mapped through
``/dev/nvidiactl``) and ``mlock()`` (locked is not pinned). The kernel folds per-CPU deltas into these
counters about once a second (``vm.stat_interval``), so a reading can trail a change by that long
and be off by a few hundred pages per CPU until then.

``/proc/vmstat`` is not namespaced: inside a container it is the whole host's count.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Optional

from .numa import NODE_DIR, list_nodes, system_page_size
from .rawfile import read_bytes

ACQUIRED = b"nr_foll_pin_acquired"
RELEASED = b"nr_foll_pin_released"
# The node list is read again this often (node hotplug is rare; the read is cheap).
NODES_RECHECK_S = 60.0


def _counter(data: bytes, name: bytes) -> Optional[int]:
    """The value of the ``name value`` line of a vmstat file, or None."""
    at = 0 if data.startswith(name + b" ") else data.find(b"\n" + name + b" ")
    if at < 0:
        return None
    start = at + len(name) + (1 if at == 0 else 2)
    end = data.find(b"\n", start)
    try:
        value = int(data[start:end if end >= 0 else None])
    except ValueError:
        return None
    return value if value >= 0 else None


def parse_pinned_pages(data: bytes) -> Optional[int]:
    """Pages pinned now (acquired - released, never below 0) from the text of a vmstat file;
    None when either counter is missing or malformed."""
    acquired, released = _counter(data, ACQUIRED), _counter(data, RELEASED)
    if acquired is None or released is None:
        return None
    # Per-CPU deltas not yet folded in can leave the difference a few pages below zero.
    return max(0, acquired - released)


@dataclass(frozen=True)
class KernelPins:
    pinned_bytes: Optional[int] = None
    by_node: Optional[dict[str, int]] = None  # {"0": bytes, ...}
    nodes: Optional[tuple[int, ...]] = None


def read_pinned_bytes(path: str, page_size: int) -> Optional[int]:
    """The pinned bytes a vmstat file counts, or None (unreadable, or no FOLL_PIN counters)."""
    try:
        pages = parse_pinned_pages(read_bytes(path))
    except (OSError, ValueError):
        return None
    return None if pages is None else pages * page_size


class KernelPinsReader:
    """Reads the counts every snapshot: one small /proc file, plus one sysfs file per node."""

    def __init__(self, root: str = "/", page_size: Optional[int] = None,
                 clock: Callable[[], float] = time.monotonic):
        self.root = root
        self.page_size = page_size or system_page_size()
        self._clock = clock
        self._nodes: Optional[tuple[int, ...]] = None
        self._nodes_at: Optional[float] = None

    def nodes(self) -> Optional[tuple[int, ...]]:
        now = self._clock()
        if self._nodes_at is None or now - self._nodes_at >= NODES_RECHECK_S:
            self._nodes = list_nodes(self.root)
            self._nodes_at = now
        return self._nodes

    def read(self) -> KernelPins:
        nodes = self.nodes()
        total = read_pinned_bytes(os.path.join(self.root, "proc/vmstat"), self.page_size)
        by_node: Optional[dict[str, int]] = None
        if total is not None and nodes:
            by_node = {}
            for n in nodes:
                v = read_pinned_bytes(os.path.join(self.root, NODE_DIR, f"node{n}", "vmstat"), self.page_size)
                if v is None:  # a node without the counters: a partial split would mislead
                    by_node = None
                    break
                by_node[str(n)] = v
        return KernelPins(pinned_bytes=total, by_node=by_node, nodes=nodes)

