"""Bounds on a probe: how many pinned bytes it may hold, refusal when memory is short, a time budget,
one probe at a time per process.

Pinned pages cannot be swapped or reclaimed, so a probe on a box that is already short of memory
could push it into the OOM killer. The cap is therefore the smaller of the caller's
``--max-pinned`` (default 256 MiB) and 5% of the memory available now (and of the effective
cgroup limit when the caller knows it). Below 1 MiB a probe measures nothing useful and is refused
with a reason instead.

``PinnedLedger`` is the enforcement: every pinned or registered buffer reserves its bytes before it
is allocated, and a reservation that would cross the cap raises before any CUDA call is made.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..units import MIB, fmt_bytes

DEFAULT_MAX_PINNED_BYTES = 256 * MIB
MAX_AVAILABLE_FRACTION = 0.05
MIN_PROBE_BYTES = 1 * MIB
_PAGE_BYTES = 4096

# Held by a running probe (any kind): a second one in the same process is refused, not queued, so
# two probes never share the pinned cap or the link.
PROBE_LOCK = threading.Lock()


@dataclass(frozen=True)
class PinnedCap:
    """The decision: ``cap_bytes`` a probe may pin at once, or a refusal with its ``reason``."""

    cap_bytes: int
    refused: bool = False
    reason: str | None = None
    notes: tuple[str, ...] = ()
    available_bytes: int | None = None  # the basis the 5% was taken of; None if unknown


def available_memory_bytes() -> int | None:
    """Memory available to new allocations now (psutil, else /proc/meminfo MemAvailable); None if unknown."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # psutil missing or broken: fall back to the kernel's own estimate
        pass
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def pinned_cap(requested_bytes: int | None = None, *, available_bytes: int | None = None,
               effective_limit_bytes: int | None = None, read_available: bool = True) -> PinnedCap:
    """The pinned cap for one probe.

    ``requested_bytes``: the user's ``--max-pinned`` (None: 256 MiB). ``available_bytes``: memory
    available now (None: read it, unless ``read_available`` is False). ``effective_limit_bytes``:
    min(MemTotal, cgroup limit) when the caller knows it. The cap never exceeds 5% of the smaller of
    the two and is rounded down to whole pages.
    """
    if requested_bytes is not None and requested_bytes <= 0:
        return PinnedCap(0, refused=True, reason="probe disabled: --max-pinned is 0")
    want = DEFAULT_MAX_PINNED_BYTES if requested_bytes is None else int(requested_bytes)
    if available_bytes is None and read_available:
        available_bytes = available_memory_bytes()
    bases = [b for b in (available_bytes, effective_limit_bytes) if b is not None and b >= 0]
    notes: list[str] = []
    if not bases:
        cap = min(want, DEFAULT_MAX_PINNED_BYTES)
        notes.append(f"available memory unknown: pinned cap {fmt_bytes(cap)}")
        basis = None
    else:
        basis = min(bases)
        share = int(basis * MAX_AVAILABLE_FRACTION)
        cap = min(want, share)
        if share < want:
            what = "the effective memory limit" if basis == effective_limit_bytes and \
                basis != available_bytes else "available memory"
            notes.append(f"pinned cap lowered from {fmt_bytes(want)} to {fmt_bytes(cap)}:"
                         f" 5% of {fmt_bytes(basis)} of {what}")
    cap -= cap % _PAGE_BYTES
    if cap < MIN_PROBE_BYTES:
        if basis is not None and cap < want:
            reason = (f"probe refused: memory is short ({fmt_bytes(basis)} available; 5% of it,"
                      f" {fmt_bytes(cap)}, is below the {fmt_bytes(MIN_PROBE_BYTES)} a probe needs)")
        else:
            reason = (f"probe refused: --max-pinned {fmt_bytes(want)} is below the"
                      f" {fmt_bytes(MIN_PROBE_BYTES)} a probe needs")
        return PinnedCap(cap, refused=True, reason=reason, notes=tuple(notes), available_bytes=basis)
    return PinnedCap(cap, notes=tuple(notes), available_bytes=basis)


class CapExceeded(RuntimeError):
    """A reservation would have crossed the pinned cap (a plan bug; nothing was allocated)."""


class PinnedLedger:
    """Pinned bytes held now, checked against a cap. Thread-safe."""

    def __init__(self, cap_bytes: int):
        self.cap_bytes = int(cap_bytes)
        self.held_bytes = 0
        self._lock = threading.Lock()

    def reserve(self, nbytes: int) -> None:
        with self._lock:
            if self.held_bytes + nbytes > self.cap_bytes:
                raise CapExceeded(f"pinning {fmt_bytes(nbytes)} more would hold"
                                  f" {fmt_bytes(self.held_bytes + nbytes)}, over the cap of"
                                  f" {fmt_bytes(self.cap_bytes)}")
            self.held_bytes += nbytes

    def release(self, nbytes: int) -> None:
        with self._lock:
            self.held_bytes = max(0, self.held_bytes - nbytes)


class TimeBudget:
    """Seconds a probe may spend; checked between measurements, never in the middle of one."""

    def __init__(self, seconds: float | None, clock: Callable[[], float] = time.monotonic):
        self.seconds = None if seconds is None else float(seconds)
        self._clock = clock
        self._start = clock()

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self._start

    def expired(self) -> bool:
        return self.seconds is not None and self.elapsed_s >= self.seconds
