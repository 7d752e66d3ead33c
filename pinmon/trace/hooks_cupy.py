"""CuPy hooks: pinned allocations, registrations and host<->device copies made through CuPy's Python API.

Wrapped (each keeps the original's behaviour, results and exceptions exactly):
``cupy.cuda.runtime.hostAlloc/freeHost/hostRegister/hostUnregister/memcpy/memcpyAsync``,
``cupy.cuda.alloc_pinned_memory`` (which ``cupyx.empty_pinned/zeros_pinned`` call: the pinned
memory pool), ``cupy.asarray/array`` of a numpy array, ``cupy.asnumpy``, ``ndarray.get/set``.

Host memory is looked up in the tracer's own table of pinned ranges (hostAlloc, hostRegister, pool
blocks); an address not in it counts as pageable. ``cudaPointerGetAttributes`` is not called: from
the wrong thread it can create a CUDA context on another GPU. Not seen: calls CuPy makes inside its
compiled code (its ``cimport`` of the runtime bypasses these Python attributes), and CuPy's
``PinnedMemoryPool`` methods (an immutable extension type), so a ``free_all_blocks()`` is not seen.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import TYPE_CHECKING

from .state import PINNED, POOL, WRITE_COMBINED, TracerState
from .wrap import guard, patch

if TYPE_CHECKING:
    import numpy

    from .hooks_types import CuPy, PinnedMemoryPointer

HOST_TO_DEVICE, DEVICE_TO_HOST = 1, 2
WC_FLAG = 4  # cudaHostAllocWriteCombined (mapped = 2, portable = 1)

# What a copy wrapper records from: the original's result, and the call's arguments.
Recorder = Callable[[object, "tuple[object, ...]", "dict[str, object]"], None]
Wrapped = Callable[..., object]

_addressof = ctypes.addressof
if TYPE_CHECKING:
    # A numpy array has the buffer protocol; numpy's types say so from Python 3.12 only.
    def _from_buffer(source: numpy.ndarray) -> ctypes.c_char: ...
else:
    _from_buffer = ctypes.c_char.from_buffer


def _host_ptr(arr: numpy.ndarray) -> int:
    """The address of a numpy array's first byte.

    Through the buffer protocol first: ``__array_interface__`` builds a dictionary (shape, strides,
    descr) per call, several times the cost. The buffer protocol gives the same address for a
    writable C-contiguous array and refuses every other (read-only, strided, empty): those take
    the interface."""
    try:
        return _addressof(_from_buffer(arr))
    except Exception:
        return int(arr.__array_interface__["data"][0])


def hook(cupy: CuPy, state: TracerState) -> None:
    """Wrap CuPy's functions in place; records which hooks took in ``state.hooks``."""
    from .callsite import skip_package

    skip_package(cupy)
    try:
        import cupy_backends  # its frames are library frames too
        skip_package(cupy_backends)
    except Exception:
        pass
    import sys

    if "cupyx" in sys.modules:
        skip_package(sys.modules["cupyx"])
    else:
        from .importhook import when_imported
        when_imported("cupyx", skip_package)
    import numpy

    ndarray_np = numpy.ndarray
    ndarray_cp = cupy.ndarray
    rt = cupy.cuda.runtime
    st = state

    def make_host_alloc(orig: Callable[..., int]) -> Callable[..., int]:
        def hostAlloc(size: int, flags: int, *a: object, **k: object) -> int:
            ptr = orig(size, flags, *a, **k)
            try:
                st.record_alloc(int(ptr), int(size), WRITE_COMBINED if int(flags) & WC_FLAG else PINNED)
            except Exception:
                pass
            return ptr
        return hostAlloc

    def make_free_host(orig: Wrapped) -> Wrapped:
        def freeHost(ptr: int, *a: object, **k: object) -> object:
            result = orig(ptr, *a, **k)
            st.record_free(int(ptr))
            return result
        return freeHost

    def make_register(orig: Wrapped) -> Wrapped:
        def hostRegister(ptr: int, size: int, flags: int, *a: object, **k: object) -> object:
            result = orig(ptr, size, flags, *a, **k)
            try:
                st.record_register(int(ptr), int(size))
            except Exception:
                pass
            return result
        return hostRegister

    def make_unregister(orig: Wrapped) -> Wrapped:
        def hostUnregister(ptr: int, *a: object, **k: object) -> object:
            result = orig(ptr, *a, **k)
            st.record_unregister(int(ptr))
            return result
        return hostUnregister

    def record_memcpy(dst: int, src: int, size: int, kind: int) -> None:
        try:
            kind = int(kind)
            if kind == HOST_TO_DEVICE:
                st.record_copy("h2d", int(size), st.lookup(int(src)))
            elif kind == DEVICE_TO_HOST:
                st.record_copy("d2h", int(size), st.lookup(int(dst)))
        except Exception:
            pass

    def make_memcpy(orig: Wrapped) -> Wrapped:
        def memcpy(dst: int, src: int, size: int, kind: int, *a: object, **k: object) -> object:
            result = orig(dst, src, size, kind, *a, **k)
            record_memcpy(dst, src, size, kind)
            return result
        return memcpy

    def make_memcpy_async(orig: Wrapped) -> Wrapped:
        def memcpyAsync(dst: int, src: int, size: int, kind: int, *a: object, **k: object) -> object:
            result = orig(dst, src, size, kind, *a, **k)
            record_memcpy(dst, src, size, kind)
            return result
        return memcpyAsync

    def make_alloc_pinned(orig: Callable[..., PinnedMemoryPointer]) -> Callable[..., PinnedMemoryPointer]:
        def alloc_pinned_memory(size: int, *a: object, **k: object) -> PinnedMemoryPointer:
            if guard.on:
                return orig(size, *a, **k)
            mem = orig(size, *a, **k)
            try:
                ptr = int(mem.ptr)
                fresh = st.lookup(ptr) is None  # a pool block handed out again is not a new allocation
                try:
                    held = int(mem.mem.size)
                except Exception:
                    held = int(size)
                st.record_alloc(ptr, max(held, int(size)), POOL, requested=int(size), fresh=fresh)
            except Exception:
                pass
            return mem
        return alloc_pinned_memory

    def guarded(record: Recorder) -> Callable[[Wrapped], Wrapped]:
        """A copy wrapper: the original under the re-entry guard, then ``record``."""
        def make(orig: Wrapped) -> Wrapped:
            def wrapper(*a: object, **k: object) -> object:
                if guard.on:
                    return orig(*a, **k)
                guard.on = True
                try:
                    result = orig(*a, **k)
                finally:
                    guard.on = False
                try:
                    record(result, a, k)
                except Exception:
                    pass
                return result
            return wrapper
        return make

    lookup = st.lookup
    record_copy = st.record_copy  # bound once: these run on every copy

    def host_kind(arr: numpy.ndarray) -> str | None:
        """The pinned kind of numpy array ``arr``'s memory, or None; no address taken while no
        pinned range is known (the table is re-read per call: a fork resets it)."""
        return lookup(_host_ptr(arr)) if st._starts else None

    def rec_from_host(result: object, a: tuple[object, ...], k: dict[str, object]) -> None:  # asarray / array
        obj = a[0] if a else k.get("obj", k.get("a"))
        if isinstance(obj, ndarray_np):
            record_copy("h2d", obj.nbytes, host_kind(obj))

    def rec_asnumpy(result: object, a: tuple[object, ...], k: dict[str, object]) -> None:
        src = a[0] if a else k.get("a")
        if isinstance(src, ndarray_cp) and isinstance(result, ndarray_np):
            record_copy("d2h", src.nbytes, host_kind(result))

    def rec_get(result: object, a: tuple[object, ...], k: dict[str, object]) -> None:
        # ndarray.get(self, stream=None, order='C', out=None, blocking=True)
        out = k.get("out", a[3] if len(a) > 3 else None)
        host = out if out is not None else result
        array = a[0]
        if isinstance(array, ndarray_cp):
            record_copy("d2h", array.nbytes, host_kind(host) if isinstance(host, ndarray_np) else None)

    def rec_set(result: object, a: tuple[object, ...], k: dict[str, object]) -> None:
        # ndarray.set(self, arr, stream=None)
        arr = a[1] if len(a) > 1 else k.get("arr")
        if isinstance(arr, ndarray_np):
            record_copy("h2d", arr.nbytes, host_kind(arr))

    runtime_hooks: list[tuple[str, Callable[[Wrapped], Wrapped]]] = [
        ("freeHost", make_free_host), ("hostRegister", make_register), ("hostUnregister", make_unregister),
        ("memcpy", make_memcpy), ("memcpyAsync", make_memcpy_async)]
    st.record_hook(f"{_name_of(rt)}.hostAlloc", patch(rt, "hostAlloc", make_host_alloc))
    for name, make in runtime_hooks:
        st.record_hook(f"{_name_of(rt)}.{name}", patch(rt, name, make))
    st.record_hook(f"{_name_of(cupy.cuda)}.alloc_pinned_memory",
                   patch(cupy.cuda, "alloc_pinned_memory", make_alloc_pinned))
    copy_hooks: list[tuple[object, str, Recorder]] = [
        (cupy, "asarray", rec_from_host), (cupy, "array", rec_from_host), (cupy, "asnumpy", rec_asnumpy),
        (ndarray_cp, "get", rec_get), (ndarray_cp, "set", rec_set)]
    for owner, name, record in copy_hooks:
        st.record_hook(f"{_name_of(owner)}.{name}", patch(owner, name, guarded(record)))

    def pool_stats() -> dict:
        pool = cupy.get_default_pinned_memory_pool()
        return {"free_blocks": int(pool.n_free_blocks())}

    st.extra["cupy_pinned_pool"] = pool_stats


def _name_of(owner: object) -> str:
    """How a hook's owner is named in the report: a module's or a class's name."""
    name = getattr(owner, "__name__", None)
    return name if isinstance(name, str) else type(owner).__name__
