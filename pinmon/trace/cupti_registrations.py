"""Which of CUPTI's pinned allocations are registered ranges (``cudaHostRegister``), not allocations.

A MEMORY2 record has no flags: a ``cudaHostRegister``ed range and a ``cudaHostAlloc`` are both PINNED.
What tells them apart is the call that made the record: its ``correlation_id`` is that of the API
record of the call (``cudaHostRegister`` in the runtime, ``cuMemHostRegister`` in the driver), and the
engine asks CUPTI for API records of those calls only (``engine_cupti``). The two records of one call
may come in either order, in one buffer or in two, so each side waits for the other in a bounded
table. A registered range ends with the RELEASE record at its address (``cudaHostUnregister``).

Bounded memory: at most ``MAX_PENDING`` allocations and register calls waiting for their other half
(the oldest forgotten first: the two halves of one call are delivered at most a flush apart), and at
most ``MAX_RANGES`` registered ranges held (past that, a registration is counted but its bytes are
not, and ``untracked`` says how many).
"""
from __future__ import annotations

from collections import OrderedDict

MAX_PENDING = 4096
MAX_RANGES = 65536


class Registrations:
    """Registered bytes held, from API and MEMORY2 records. Not thread-safe: ``CuptiFigures`` calls it
    under its lock."""

    def __init__(self, register_calls: frozenset[tuple[int, int]] = frozenset()):
        # (activity kind, cbid) of the calls that register host memory; empty: not tracked (the
        # engine could not select API records), and the report says None.
        self.register_calls = register_calls
        self.ranges: dict[int, int] = {}      # address -> bytes of each registered range held
        self.held_bytes = 0
        self.peak_bytes = 0
        self.registrations = 0
        self.unregistrations = 0
        self.untracked = 0
        self._calls: OrderedDict[int, None] = OrderedDict()  # register calls' correlation ids, no record yet
        self._allocs: OrderedDict[int, tuple[int, int]] = OrderedDict()  # correlation id -> (address, bytes)
        self._alloc_at: dict[int, int] = {}   # address -> correlation id of a waiting allocation

    @property
    def tracked(self) -> bool:
        return bool(self.register_calls)

    def api_call(self, kind: int, cbid: int, correlation_id: int, return_value: int) -> None:
        """A driver or runtime API record: a successful register call claims its allocation."""
        if return_value != 0 or (kind, cbid) not in self.register_calls:
            return
        alloc = self._allocs.pop(correlation_id, None)
        if alloc is not None:
            self._alloc_at.pop(alloc[0], None)
            self._register(*alloc)
            return
        self._calls[correlation_id] = None
        if len(self._calls) > MAX_PENDING:
            self._calls.popitem(last=False)

    def allocated(self, correlation_id: int, address: int, nbytes: int) -> None:
        """A pinned ALLOCATION record: a registration when its call's API record claims it."""
        if not self.tracked:
            return
        if correlation_id in self._calls:
            del self._calls[correlation_id]
            self._register(address, nbytes)
            return
        old = self._alloc_at.pop(address, None)
        if old is not None:
            self._allocs.pop(old, None)
        self._allocs[correlation_id] = (address, nbytes)
        self._alloc_at[address] = correlation_id
        if len(self._allocs) > MAX_PENDING:
            _, (addr, _n) = self._allocs.popitem(last=False)
            self._alloc_at.pop(addr, None)

    def released(self, address: int) -> None:
        """A pinned RELEASE record: the end of a registered range at ``address``, if it is one."""
        nbytes = self.ranges.pop(address, None)
        if nbytes is not None:
            self.held_bytes -= nbytes
            self.unregistrations += 1
            return
        corr = self._alloc_at.pop(address, None)  # released before any call claimed it
        if corr is not None:
            self._allocs.pop(corr, None)

    def _register(self, address: int, nbytes: int) -> None:
        self.registrations += 1
        if address in self.ranges:  # a second record for a range already held: count its bytes once
            self.held_bytes -= self.ranges.pop(address)
        if len(self.ranges) >= MAX_RANGES:
            self.untracked += 1
            return
        self.ranges[address] = nbytes
        self.held_bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self.held_bytes)

    def report(self) -> dict[str, int | None]:
        """``registered_bytes`` (None where registrations are not told apart), its peak, the counts."""
        if not self.tracked:
            return {"registered_bytes": None, "registered_peak_bytes": None, "registrations": None,
                    "unregistrations": None, "registrations_untracked": None}
        return {"registered_bytes": max(self.held_bytes, 0), "registered_peak_bytes": self.peak_bytes,
                "registrations": self.registrations, "unregistrations": self.unregistrations,
                "registrations_untracked": self.untracked}
