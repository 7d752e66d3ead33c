"""Per process: what its probed calls added up to, in bounded memory.

Copies by (direction, host memory kind): count, bytes and a size histogram. Copies between devices
and peer copies are counted apart (they do not cross the host link), and so are copies whose both
sides are host memory. Batches: calls and the copies in them; bytes for the copies whose arguments
were fetched. Pinned allocations (count, sizes, flags), frees, registrations (count, bytes, sizes,
flags) and unregistrations.
"""
from __future__ import annotations

from collections import Counter

from . import catalog as c
from .classify import PAGEABLE, ProcessMemory
from .sizes import SizeHistogram

DIRECTIONS = ("h2d", "d2h")
MAX_FLAG_KINDS = 32


class Tally:
    __slots__ = ("bytes", "count", "sizes", "unknown_size")

    def __init__(self) -> None:
        self.count = 0
        self.bytes = 0
        self.sizes = SizeHistogram()
        self.unknown_size = 0   # calls whose size argument could not be read

    def add(self, size: int | None, times: int = 1) -> None:
        self.count += times
        if size is None:
            self.unknown_size += times
            return
        self.bytes += size * times
        self.sizes.add(size, times)


class ProcessTally:
    """The calls of one process during an attach."""

    def __init__(self, pid: int, memory: ProcessMemory) -> None:
        self.pid, self.memory = pid, memory
        self.copies: dict[tuple[str, str], Tally] = {}
        self.device_copies = Tally()
        self.peer_copies = Tally()
        self.host_copies = Tally()
        self.batch_calls = 0
        self.batch_copies = 0
        self.batch_copies_unmeasured = 0
        self.batch_op_count = 0
        self.allocations = Tally()
        self.alloc_flags: Counter = Counter()
        self.frees = 0
        self.registrations = Tally()
        self.register_flags: Counter = Counter()
        self.unregistrations = 0
        self.pageable_seen = False

    def _copy(self, direction: str, host_kind: str, size: int | None, times: int = 1) -> None:
        key = (direction, host_kind)
        t = self.copies.get(key)
        if t is None:
            t = self.copies[key] = Tally()
        t.add(size, times)
        if host_kind == PAGEABLE:
            self.pageable_seen = True

    # --- the calls (calls.apply) -------------------------------------------------------------------

    def copy(self, direction: str | None, host: int | None, size: int | None, times: int = 1) -> None:
        if direction in DIRECTIONS:
            self._copy(direction, self.memory.host_kind(host), size, times)

    def unified(self, dst: int | None, src: int | None, size: int | None, times: int = 1) -> None:
        dst_host, src_host = self.memory.is_host(dst), self.memory.is_host(src)
        if src_host and not dst_host:
            self._copy("h2d", self.memory.host_kind(src), size, times)
        elif dst_host and not src_host:
            self._copy("d2h", self.memory.host_kind(dst), size, times)
        elif dst_host:
            self.host_copies.add(size, times)
        else:
            self.device_copies.add(size, times)

    def described(self, src: tuple[str, int | None], dst: tuple[str, int | None], size: int | None,
                  peer: bool = False, times: int = 1) -> None:
        s_host = src[0] == "host" or (src[0] == "unified" and self.memory.is_host(src[1]))
        d_host = dst[0] == "host" or (dst[0] == "unified" and self.memory.is_host(dst[1]))
        if s_host and not d_host:
            self._copy("h2d", self.memory.host_kind(src[1]), size, times)
        elif d_host and not s_host:
            self._copy("d2h", self.memory.host_kind(dst[1]), size, times)
        elif d_host:
            self.host_copies.add(size, times)
        elif peer:
            self.peer_copies.add(size, times)
        else:
            self.device_copies.add(size, times)

    def device(self, size: int | None, times: int = 1) -> None:
        self.device_copies.add(size, times)

    def peer(self, size: int | None, times: int = 1) -> None:
        self.peer_copies.add(size, times)

    def batch(self, n: int | None, known: list, times: int = 1) -> None:
        self.batch_calls += times
        if n is None or n < 0:
            return
        n = min(n, 1 << 32)
        self.batch_copies += n * times
        for dst, src, size in known:
            self.unified(dst, src, size, times)
        self.batch_copies_unmeasured += (n - len(known)) * times

    def batch_ops(self, n: int | None, times: int = 1) -> None:
        self.batch_calls += times
        if n is not None and 0 <= n <= 1 << 32:
            self.batch_op_count += n * times

    def alloc(self, size: int | None, flags: int) -> None:
        self.allocations.add(size)
        for name in c.flag_names(flags, c.HOST_ALLOC_FLAGS):
            self._flag(self.alloc_flags, name)
        self.memory.allocated(size, bool(flags & c.WRITECOMBINED))

    def register(self, ptr: int | None, size: int | None, flags: int) -> None:
        self.registrations.add(size)
        for name in c.flag_names(flags, c.HOST_REGISTER_FLAGS):
            self._flag(self.register_flags, name)
        self.memory.registered(ptr, size)

    def unregister(self, ptr: int | None) -> None:
        self.unregistrations += 1
        self.memory.released(ptr)

    def free(self, ptr: int | None) -> None:
        self.frees += 1
        self.memory.released(ptr)

    @staticmethod
    def _flag(counter: Counter, name: str) -> None:
        if name in counter or len(counter) < MAX_FLAG_KINDS:
            counter[name] += 1
