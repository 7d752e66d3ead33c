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

Only processes that map ``/dev/nvidia*`` are CUDA processes; a plain shared anonymous mmap there is
indistinguishable from a pinned buffer, so every figure here is an estimate.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

MIB = 1 << 20
# CUDA reserves its unified virtual-address range low in the address space (0x200000000 on x86-64);
# the kernel's mmap area sits near the top (0x7f...). Context mappings of nvidiactl live below this.
CUDA_RESERVED_VA_END = 1 << 40
WC_MIN_MAPPING_BYTES = 8 * MIB
PINNED_PATH = "/dev/zero (deleted)"
NVIDIACTL_PATH = "/dev/nvidiactl"


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    perms: str
    path: str

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
        # An address is at most 64 bits (16 hex digits): longer is not a maps line.
        if not sep or len(perms) != 4 or len(start_s) > 16 or len(end_s) > 16:
            continue
        try:
            start, end = int(start_s, 16), int(end_s, 16)
        except ValueError:
            continue
        if end < start:
            continue
        path = parts[5].strip() if len(parts) == 6 else ""
        out.append(Mapping(start, end, perms, path))
    return out


def is_cuda_mapping(m: Mapping) -> bool:
    return m.path.startswith("/dev/nvidia")


def is_pinned_mapping(m: Mapping) -> bool:
    return m.path == PINNED_PATH and m.perms[3] == "s" and m.perms[0] == "r"


def is_write_combined_mapping(m: Mapping) -> bool:
    return (m.path == NVIDIACTL_PATH and m.perms[3] == "s" and m.perms[:2] == "rw"
            and m.start >= CUDA_RESERVED_VA_END and m.size >= WC_MIN_MAPPING_BYTES)


def estimate_mappings(mappings: Iterable[Mapping]) -> PinnedEstimate:
    mappings = list(mappings)
    if not any(is_cuda_mapping(m) for m in mappings):
        return PinnedEstimate(False, 0, 0, 0, frozenset())
    pinned = [m for m in mappings if is_pinned_mapping(m)]
    wc = [m for m in mappings if is_write_combined_mapping(m)]
    return PinnedEstimate(
        is_cuda=True,
        pinned_bytes=sum(m.size for m in pinned),
        write_combined_bytes=sum(m.size for m in wc),
        pinned_mappings=len(pinned) + len(wc),
        ranges=frozenset((m.start, m.end) for m in pinned + wc),
    )


def estimate_pinned(maps_text: str) -> PinnedEstimate:
    """Estimate from the text of a /proc/PID/maps file (live or a saved copy)."""
    return estimate_mappings(parse_maps(maps_text))


def churn(previous: Optional[frozenset], current: frozenset) -> Optional[int]:
    """Pinned mappings that appeared or vanished between two scans; None on the first scan."""
    if previous is None:
        return None
    return len(previous ^ current)
