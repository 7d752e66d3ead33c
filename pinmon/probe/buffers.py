"""The buffers a probe holds, each owned by an object that frees it on the way out of a with block.

Every host buffer is a ``HostBuffer`` (a pointer, a size, a numpy view). ``PageableBuffer`` is
ordinary memory (numpy, page-aligned, every page touched); ``PinnedBuffer`` is ``cudaHostAlloc``'ed
with the flags of its memory kind (default, write-combined, mapped, portable); ``Registered``
page-locks existing memory in place with ``cudaHostRegister`` (``numa.NodeBuffer``, memory bound to
one NUMA node, is another host buffer). The two page-locked kinds share ``PageLocked``: their bytes
are reserved on the probe's ``PinnedLedger`` before CUDA is called (so the cap holds even if the call
would succeed), counted in ``held_pinned_bytes()`` while held, and the CUDA call each way is timed.
``DeviceBuffer`` is ``cudaMalloc``'ed device memory.

Freeing is ``close()`` (idempotent), run in a ``finally`` by the with block, also when opening was
interrupted half way. A Ctrl-C arriving between a CUDA call returning and its pointer being stored
(or cleared) is held back until then, so no interrupt leaks a buffer.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING, TypeVar

from .cuda import runtime
from .cupy_types import CudaRuntime, CudaStream
from .plan import PAGE_BYTES
from .safety import PinnedLedger

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    # An array of bytes over host memory: what ``view()`` hands out.
    ByteArray = npt.NDArray[np.uint8]

_Self = TypeVar("_Self", bound="Owned")

_HELD_LOCK = threading.Lock()
_held_pinned_bytes = 0


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold back a Ctrl-C for the few microseconds between a CUDA allocation returning and its
    pointer being stored (or a free and the pointer being cleared): a KeyboardInterrupt landing
    there would leak the buffer. Python runs signal handlers in the main thread only, so other
    threads need nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[tuple[int, FrameType | None]] = []
    try:
        old = signal.getsignal(signal.SIGINT)
        if old is None:  # a handler not installed from Python: cannot be restored, leave it
            yield
            return
        signal.signal(signal.SIGINT, lambda signum, frame: pending.append((signum, frame)))
    except (ValueError, OSError, TypeError, AttributeError):
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if pending:
            if callable(old):
                old(*pending[0])  # default_int_handler: raises KeyboardInterrupt here
            elif old == signal.SIG_DFL:
                os.kill(os.getpid(), signal.SIGINT)


def _track(delta: int) -> None:
    global _held_pinned_bytes
    with _HELD_LOCK:
        _held_pinned_bytes += delta


def held_pinned_bytes() -> int:
    """Pinned and registered bytes the probe holds now in this process (0 between probes)."""
    with _HELD_LOCK:
        return _held_pinned_bytes


def sync_quietly(stream: CudaStream | None) -> None:
    """Wait for ``stream`` before memory it may still be copying is freed; a failed wait must not
    stop the free."""
    if stream is None:
        return
    try:
        stream.synchronize()
    except Exception:
        pass


def host_view(ptr: int, nbytes: int) -> ByteArray:
    """A writable numpy uint8 array over ``nbytes`` of host memory at ``ptr`` (no copy)."""
    import numpy as np

    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr))


def pageable_array(nbytes: int, touch: bool = True) -> ByteArray:
    """An ordinary (pageable) numpy uint8 buffer, page-aligned so cudaHostRegister can take it,
    with every page touched so first-touch faults stay out of later timings."""
    import numpy as np

    raw = np.empty(nbytes + PAGE_BYTES, dtype=np.uint8)
    offset = (-raw.ctypes.data) % PAGE_BYTES
    arr = raw[offset:offset + nbytes]
    if touch:
        arr[::PAGE_BYTES] = 1
    return arr


class Owned:
    """A buffer owned by this object: ``open()``, ``close()`` (idempotent), and a with block that
    closes even when opening was interrupted half way. ``ptr`` is 0 while nothing is held."""

    ptr: int = 0

    def __enter__(self: _Self) -> _Self:
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> Owned:  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class HostBuffer(Owned):
    """``nbytes`` of host memory at ``ptr``."""

    nbytes: int = 0

    def view(self, nbytes: int | None = None) -> ByteArray:
        """A numpy uint8 array over the first ``nbytes`` (all by default); never use it after close()."""
        return host_view(self.ptr, self.nbytes if nbytes is None else nbytes)


class PageableBuffer(HostBuffer):
    """Ordinary memory from ``pageable_array``; freed when closed and no view is left."""

    def __init__(self, nbytes: int, touch: bool = True):
        self.nbytes = int(nbytes)
        self.touch = touch
        self.ptr = 0
        self._array: ByteArray | None = None

    def open(self) -> PageableBuffer:
        if self._array is None:
            self._array = pageable_array(self.nbytes, self.touch)
            self.ptr = self._array.ctypes.data
        return self

    def close(self) -> None:
        self._array = None
        self.ptr = 0

    def view(self, nbytes: int | None = None) -> ByteArray:
        # A slice of the array keeps the memory alive for as long as the view lives.
        if self._array is None:
            raise ValueError("view of a closed PageableBuffer")
        return self._array[:self.nbytes if nbytes is None else nbytes]


class PageLocked(HostBuffer):
    """Page-locked host memory: what ``PinnedBuffer`` and ``Registered`` share.

    Subclasses say how memory is locked (``_lock(rt)``, returning its pointer) and unlocked
    (``_unlock(rt, ptr)``). ``open_s`` and ``close_s`` are the seconds those CUDA calls took.
    """

    def __init__(self, nbytes: int, flags: int = 0, *, ledger: PinnedLedger | None = None,
                 stream: CudaStream | None = None):
        self.nbytes = int(nbytes)
        self.flags = int(flags)
        self.ledger = ledger
        self.stream = stream
        self.ptr = 0
        self.open_s: float | None = None
        self.close_s: float | None = None

    def call_seconds(self) -> tuple[float, float]:
        """(``open_s``, ``close_s``) of a buffer opened and closed; RuntimeError before that."""
        if self.open_s is None or self.close_s is None:
            raise RuntimeError("the CUDA calls of a buffer not yet opened and closed have no time")
        return self.open_s, self.close_s

    def _lock(self, rt: CudaRuntime) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def _unlock(self, rt: CudaRuntime, ptr: int) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def open(self) -> PageLocked:
        if self.ptr:
            return self
        rt = runtime()
        if self.ledger is not None:
            self.ledger.reserve(self.nbytes)
        try:
            with interrupts_deferred():
                t0 = time.perf_counter()
                ptr = self._lock(rt)
                self.open_s = time.perf_counter() - t0
                self.ptr = ptr
                _track(self.nbytes)
        except BaseException:
            if not self.ptr and self.ledger is not None:
                self.ledger.release(self.nbytes)
            raise
        return self

    def close(self) -> None:
        if not self.ptr:
            return
        sync_quietly(self.stream)
        rt = runtime()
        try:
            with interrupts_deferred():
                ptr, self.ptr = self.ptr, 0
                _track(-self.nbytes)
                t0 = time.perf_counter()
                self._unlock(rt, ptr)
                self.close_s = time.perf_counter() - t0
        finally:
            if self.ledger is not None:
                self.ledger.release(self.nbytes)


class PinnedBuffer(PageLocked):
    """One ``cudaHostAlloc`` of ``nbytes`` with ``flags``; ``cudaFreeHost`` on close."""

    def _lock(self, rt: CudaRuntime) -> int:
        return rt.hostAlloc(self.nbytes, self.flags)

    def _unlock(self, rt: CudaRuntime, ptr: int) -> None:
        rt.freeHost(ptr)


class Registered(PageLocked):
    """``cudaHostRegister`` of existing host memory (``ptr``, ``nbytes``); ``cudaHostUnregister`` on
    close. The caller keeps the memory alive for longer than this object."""

    def __init__(self, ptr: int, nbytes: int, flags: int = 0, *,
                 ledger: PinnedLedger | None = None, stream: CudaStream | None = None):
        super().__init__(nbytes, flags, ledger=ledger, stream=stream)
        self.host_ptr = int(ptr)

    def _lock(self, rt: CudaRuntime) -> int:
        rt.hostRegister(self.host_ptr, self.nbytes, self.flags)
        return self.host_ptr

    def _unlock(self, rt: CudaRuntime, ptr: int) -> None:
        rt.hostUnregister(ptr)


class DeviceBuffer(Owned):
    """``cudaMalloc`` of ``nbytes`` on the current device; ``cudaFree`` on close. Bypasses CuPy's
    memory pool so the memory is really returned when the probe ends."""

    def __init__(self, nbytes: int, *, stream: CudaStream | None = None):
        self.nbytes = int(nbytes)
        self.stream = stream
        self.ptr = 0

    def open(self) -> DeviceBuffer:
        if self.ptr:
            return self
        rt = runtime()
        with interrupts_deferred():
            self.ptr = rt.malloc(self.nbytes)
        return self

    def close(self) -> None:
        if not self.ptr:
            return
        sync_quietly(self.stream)
        rt = runtime()
        with interrupts_deferred():
            ptr, self.ptr = self.ptr, 0
            rt.free(ptr)
