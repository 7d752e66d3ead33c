"""Estimate a process's CUDA pinned and write-combined host memory from ``/proc/PID/maps``.

CUDA pinned memory is not mlock'ed, so VmLck/VmPin/Mlocked do not show it. What does show, read on
an H200 with driver 580 (fixtures in tests/fixtures/maps/):

- ``cudaHostAlloc`` default/mapped/portable, CuPy's pinned pool and ``torch.pin_memory()``: a shared
  mapping ``rw-s ... /dev/zero (deleted)`` of the allocation's size; small allocations are carved
  from 2 MiB chunks, and a CUDA context keeps ~8 MiB of such chunks as its own staging buffers
  (counted: they are pinned RAM too).
- ``cudaHostAllocWriteCombined``: a shared mapping of ``/dev/nvidiactl`` of the allocation's size.
  The context maps ~70 MiB of ``/dev/nvidiactl`` for itself: one large piece inside CUDA's reserved
  virtual-address range (below 1 TiB) and 4 KiB..6 MiB pieces in the ordinary mmap area; only
  mappings in the mmap area of at least 8 MiB are counted as user write-combined buffers.
- ``cudaHostRegister``: no trace at all (the user's own anonymous mapping is pinned in place).

Only processes that map an NVIDIA device (``/dev/nvidia*``; on the live scan a real character device
of major 195, ``kernel_objects.py``) are CUDA processes; a plain shared anonymous mmap there is
indistinguishable from a pinned buffer, so every figure here is an estimate.

A mapping's path is whatever the process's mount namespace says: in a user namespace anyone can mount
a tmpfs on ``/dev``, make a ``nvidiactl`` file and a ``zero`` file (then deleted), and map one file
two hundred times. So the live scan passes an ``accept`` check (``kernel_objects.py``): a
``/dev/zero (deleted)`` mapping counts only on the kernel's own shmem mount, a ``/dev/nvidiactl``
mapping only if it is the host's control device. And each piece of a ``/dev/zero`` object is counted
once, however often it is mapped (``(device, inode, offset range)``); ``extents`` carries those
pieces so that the host's total counts a buffer that two processes share once too.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

MIB = 1 << 20
# CUDA reserves its unified virtual-address range low in the address space (0x200000000 on x86-64);
# the kernel's mmap area sits near the top (0x7f...). Context mappings of nvidiactl live below this.
CUDA_RESERVED_VA_END = 1 << 40
WC_MIN_MAPPING_BYTES = 8 * MIB
ADDRESS_HEX_DIGITS = 16
PINNED_PATH = "/dev/zero (deleted)"
NVIDIACTL_PATH = "/dev/nvidiactl"


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    perms: str
    path: str
    offset: int = 0
    dev: str = ""     # the mapped file's device, as maps prints it ("00:01")
    inode: int = 0

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class PinnedEstimate:
    is_cuda: bool
    pinned_bytes: int
    write_combined_bytes: int
    pinned_mappings: int
    # (start, end) of each pinned/WC mapping: the next scan diffs these to count churn.
    ranges: frozenset
    # (dev, inode, first byte, end byte) of the /dev/zero objects counted in ``pinned_bytes``: each
    # piece once, for a total over processes that counts a shared buffer once.
    extents: frozenset = frozenset()
    # Bytes of accepted /dev/nvidiactl mappings in the mmap area, of any size: the most a tracer's
    # report may claim as this process's write-combined memory.
    nvidiactl_mmap_bytes: int = 0


def parse_maps(text: str) -> list[Mapping]:
    """Lines of /proc/PID/maps -> Mappings; malformed lines are skipped, never raised on."""
    out: list[Mapping] = []
    for line in text.splitlines():
        # address perms offset dev inode [path]; the path may hold spaces (" (deleted)").
        parts = line.split(None, 5)
        if len(parts) < 5:
            continue
        addr, perms = parts[0], parts[1]
        start_s, sep, end_s = addr.partition("-")
        # An address is at most 64 bits: longer "addresses" only come from a forged file.
        if not sep or len(perms) != 4 or len(start_s) > ADDRESS_HEX_DIGITS or len(end_s) > ADDRESS_HEX_DIGITS:
            continue
        try:
            start, end = int(start_s, 16), int(end_s, 16)
        except ValueError:
            continue
        if end < start:
            continue
        path = parts[5].strip() if len(parts) == 6 else ""
        offset_s, dev, inode_s = parts[2], parts[3], parts[4]
        if len(offset_s) > ADDRESS_HEX_DIGITS or len(inode_s) > 20:
            continue
        try:
            offset, inode = int(offset_s, 16), int(inode_s)
        except ValueError:
            continue
        out.append(Mapping(start, end, perms, path, offset, dev, inode))
    return out


def is_cuda_mapping(m: Mapping) -> bool:
    return m.path.startswith("/dev/nvidia")


def is_pinned_mapping(m: Mapping) -> bool:
    return m.path == PINNED_PATH and m.perms[3] == "s" and m.perms[0] == "r"


def is_write_combined_mapping(m: Mapping) -> bool:
    return is_nvidiactl_mmap_area(m) and m.size >= WC_MIN_MAPPING_BYTES


def is_nvidiactl_mmap_area(m: Mapping) -> bool:
    """A shared, writable /dev/nvidiactl mapping outside CUDA's reserved range, of any size."""
    return (m.path == NVIDIACTL_PATH and m.perms[3] == "s" and m.perms[:2] == "rw"
            and m.start >= CUDA_RESERVED_VA_END)


def extent(m: Mapping) -> tuple[str, int, int, int]:
    """The piece of its file a mapping shows: (device, inode, first byte, end byte)."""
    return (m.dev, m.inode, m.offset, m.offset + m.size)


def extents_bytes(extents: Iterable[tuple[str, int, int, int]]) -> int:
    """Bytes covered by ``extents``, each byte of each (device, inode) once however often mapped."""
    by_file: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for dev, ino, lo, hi in extents:
        by_file.setdefault((dev, ino), []).append((lo, hi))
    total = 0
    for spans in by_file.values():
        spans.sort()
        cur_lo, cur_hi = spans[0]
        for lo, hi in spans[1:]:
            if lo > cur_hi:
                total += cur_hi - cur_lo
                cur_lo, cur_hi = lo, hi
            elif hi > cur_hi:
                cur_hi = hi
        total += cur_hi - cur_lo
    return total


def estimate_mappings(mappings: Iterable[Mapping],
                      accept: Callable[[Mapping], bool] | None = None,
                      is_device: Callable[[Mapping], bool] | None = None) -> PinnedEstimate:
    """The estimate over one process's mappings. ``accept`` (live scans): whether a pinned- or
    write-combined-looking mapping is backed by the kernel object its path names; ``is_device`` (live
    scans): whether a ``/dev/nvidia*`` mapping is a real NVIDIA device, which makes a CUDA process.
    None (a saved maps file, which names no live object) takes every one as its path says."""
    mappings = list(mappings)
    devices = [m for m in mappings if is_cuda_mapping(m)]
    if not devices or (is_device is not None and not any(is_device(m) for m in devices)):
        return PinnedEstimate(False, 0, 0, 0, frozenset())
    if accept is None:
        accept = _any_mapping
    pinned = [m for m in mappings if is_pinned_mapping(m) and accept(m)]
    ctl = [m for m in mappings if is_nvidiactl_mmap_area(m) and accept(m)]
    wc = [m for m in ctl if is_write_combined_mapping(m)]
    extents = frozenset(extent(m) for m in pinned)
    return PinnedEstimate(
        is_cuda=True,
        pinned_bytes=extents_bytes(extents),
        write_combined_bytes=sum(m.size for m in wc),
        pinned_mappings=len(pinned) + len(wc),
        ranges=frozenset((m.start, m.end) for m in pinned + wc),
        extents=extents,
        nvidiactl_mmap_bytes=sum(m.size for m in ctl),
    )


def _any_mapping(m: Mapping) -> bool:
    return True


def estimate_pinned(maps_text: str, accept: Callable[[Mapping], bool] | None = None,
                    is_device: Callable[[Mapping], bool] | None = None) -> PinnedEstimate:
    """Estimate from the text of a /proc/PID/maps file (live or a saved copy)."""
    return estimate_mappings(parse_maps(maps_text), accept, is_device)


def churn(previous: frozenset | None, current: frozenset) -> int | None:
    """Pinned mappings that appeared or vanished between two scans; None on the first scan."""
    if previous is None:
        return None
    return len(previous ^ current)
