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
from collections.abc import Callable
from dataclasses import dataclass

from ..rawfile import READ_CHUNK, READ_FLAGS, read_bytes
from .numa import NODE_DIR, list_nodes, system_page_size

ACQUIRED = b"nr_foll_pin_acquired"
RELEASED = b"nr_foll_pin_released"
# The node list is read again this often (node hotplug is rare; the read is cheap).
NODES_RECHECK_S = 60.0
# The kernel folds per-CPU deltas into the counters about once a second, so a reading trails the
# truth by up to that much anyway: one younger than this is reused rather than paying for the file
# again (at a 1 s refresh the file is read every other snapshot: on the H200 box the read is ~0.15 ms
# of a ~2.6 ms snapshot, bench/kernel_pins_h200.py).
MIN_READ_INTERVAL_S = 1.9  # a monitor's default; a one-shot reading (``check``) passes 0


def _counter(data: bytes, name: bytes) -> int | None:
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


def parse_pinned_pages(data: bytes) -> int | None:
    """Pages pinned now (acquired - released, never below 0) from the text of a vmstat file;
    None when either counter is missing or malformed."""
    acquired, released = _counter(data, ACQUIRED), _counter(data, RELEASED)
    if acquired is None or released is None:
        return None
    # Per-CPU deltas not yet folded in can leave the difference a few pages below zero.
    return max(0, acquired - released)


@dataclass(frozen=True)
class KernelPins:
    pinned_bytes: int | None = None
    by_node: dict[str, int] | None = None  # {"0": bytes, ...}
    nodes: tuple[int, ...] | None = None


def read_pinned_bytes(path: str, page_size: int) -> int | None:
    """The pinned bytes a vmstat file counts, or None (unreadable, or no FOLL_PIN counters)."""
    try:
        pages = parse_pinned_pages(read_bytes(path))
    except (OSError, ValueError):
        return None
    return None if pages is None else pages * page_size


class KeptFile:
    """A /proc or sysfs file kept open and read again from offset 0 with ``pread``: the kernel builds
    the text anew on each read, and the open (a path walk) is a third of the cost of a read."""

    def __init__(self, path: str):
        self.path = path
        self._fd: int | None = None

    def read(self) -> bytes:
        """The whole text now; OSError when the file cannot be opened or read."""
        if self._fd is None:
            self._fd = os.open(self.path, READ_FLAGS)
        try:
            chunks, offset = [], 0
            while True:
                chunk = os.pread(self._fd, READ_CHUNK, offset)
                chunks.append(chunk)
                # A short read is the end: asking again at an offset makes a seq_file build the
                # whole text a second time to find it.
                if len(chunk) < READ_CHUNK:
                    return b"".join(chunks)
                offset += len(chunk)
        except OSError:
            self.close()  # opened again at the next read
            raise

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


class KernelPinsReader:
    """The kernel's count for each snapshot, read at most every ``min_interval_s``.

    One file per snapshot where it can: on a one-node host /proc/vmstat alone (the node holds every
    page, so its count is the host's); on a multi-node host the per-node files, whose sum is the
    host's count (the kernel folds each per-CPU delta into the node and the host total together)."""

    def __init__(self, root: str = "/", page_size: int | None = None,
                 clock: Callable[[], float] = time.monotonic, min_interval_s: float = MIN_READ_INTERVAL_S):
        self.root = root
        self.min_interval_s = min_interval_s
        self.page_size = page_size or system_page_size()
        self._clock = clock
        self._nodes: tuple[int, ...] | None = None
        self._nodes_at: float | None = None
        self._files: dict[str, KeptFile] = {}
        self._last: KernelPins | None = None
        self._read_at: float | None = None

    def nodes(self) -> tuple[int, ...] | None:
        now = self._clock()
        if self._nodes_at is None or now - self._nodes_at >= NODES_RECHECK_S:
            self._nodes = list_nodes(self.root)
            self._nodes_at = now
        return self._nodes

    def _pinned(self, rel: str) -> int | None:
        f = self._files.get(rel)
        if f is None:
            f = self._files[rel] = KeptFile(os.path.join(self.root, rel))
        try:
            pages = parse_pinned_pages(f.read())
        except (OSError, ValueError):
            return None
        return None if pages is None else pages * self.page_size

    def read(self) -> KernelPins:
        now = self._clock()
        if self._last is not None and self._read_at is not None and now - self._read_at < self.min_interval_s:
            return self._last
        nodes = self.nodes()
        total: int | None = None
        by_node: dict[str, int] | None = None
        if nodes and len(nodes) > 1:
            by_node = {}
            for n in nodes:
                v = self._pinned(f"{NODE_DIR}/node{n}/vmstat")
                if v is None:  # a node without the counters: a partial split would mislead
                    by_node = None
                    break
                by_node[str(n)] = v
            if by_node is not None:
                total = sum(by_node.values())
        if total is None:
            total = self._pinned("proc/vmstat")
            if total is not None and nodes and len(nodes) == 1:
                by_node = {str(nodes[0]): total}
        self._last = KernelPins(pinned_bytes=total, by_node=by_node, nodes=nodes)
        self._read_at = now
        return self._last

    def close(self) -> None:
        files, self._files = self._files, {}
        for f in files.values():
            f.close()
