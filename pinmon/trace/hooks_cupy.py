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

from .state import PINNED, POOL, WRITE_COMBINED, TracerState
from .wrap import guard, patch

HOST_TO_DEVICE, DEVICE_TO_HOST = 1, 2
WC_FLAG = 4  # cudaHostAllocWriteCombined (mapped = 2, portable = 1)


_addressof = ctypes.addressof
_from_buffer = ctypes.c_char.from_buffer


def _host_ptr(arr) -> int:
    """The address of a numpy array's first byte.

    Through the buffer protocol first: ``__array_interface__`` builds a dictionary (shape, strides,
    descr) per call, several times the cost. The buffer protocol gives the same address for a
    writable C-contiguous array and refuses every other (read-only, strided, empty): those take
    the interface."""
    try:
        return _addressof(_from_buffer(arr))
    except Exception:
        return arr.__array_interface__["data"][0]


def hook(cupy, state: TracerState) -> None:
    """Wrap CuPy's functions in place; records which hooks took in ``state.hooks``."""
    from .callsite import skip_package

    skip_package(cupy)
    try:
        import cupy_backends  # noqa: F401  its frames are library frames too
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
    rt = cupy.cuda.runtime
    st = state

    def make_host_alloc(orig):
        def hostAlloc(size, flags, *a, **k):
            ptr = orig(size, flags, *a, **k)
            try:
                st.record_alloc(int(ptr), int(size), WRITE_COMBINED if int(flags) & WC_FLAG else PINNED)
            except Exception:
                pass
            return ptr
        return hostAlloc

    def make_free_host(orig):
        def freeHost(ptr, *a, **k):
            result = orig(ptr, *a, **k)
            st.record_free(int(ptr))
            return result
        return freeHost

    def make_register(orig):
        def hostRegister(ptr, size, flags, *a, **k):
            result = orig(ptr, size, flags, *a, **k)
            try:
                st.record_register(int(ptr), int(size))
            except Exception:
                pass
            return result
        return hostRegister

    def make_unregister(orig):
        def hostUnregister(ptr, *a, **k):
            result = orig(ptr, *a, **k)
            st.record_unregister(int(ptr))
            return result
        return hostUnregister

    def record_memcpy(dst, src, size, kind):
        try:
            kind = int(kind)
            if kind == HOST_TO_DEVICE:
                st.record_copy("h2d", int(size), st.lookup(int(src)))
            elif kind == DEVICE_TO_HOST:
                st.record_copy("d2h", int(size), st.lookup(int(dst)))
        except Exception:
            pass

    def make_memcpy(orig):
        def memcpy(dst, src, size, kind, *a, **k):
            result = orig(dst, src, size, kind, *a, **k)
            record_memcpy(dst, src, size, kind)
            return result
        return memcpy

    def make_memcpy_async(orig):
        def memcpyAsync(dst, src, size, kind, *a, **k):
            result = orig(dst, src, size, kind, *a, **k)
            record_memcpy(dst, src, size, kind)
            return result
        return memcpyAsync

    def make_alloc_pinned(orig):
        def alloc_pinned_memory(size, *a, **k):
            if getattr(guard, "on", False):
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

    def guarded(record):
        """A copy wrapper: the original under the re-entry guard, then ``record``."""
        def make(orig):
            def wrapper(*a, **k):
                if getattr(guard, "on", False):
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

    def host_kind(arr):
        """The pinned kind of numpy array ``arr``'s memory, or None; no address taken while no
        pinned range is known (the table is re-read per call: a fork resets it)."""
        return lookup(_host_ptr(arr)) if st._starts else None

    def rec_from_host(result, a, k):  # cupy.asarray / cupy.array
        obj = a[0] if a else k.get("obj", k.get("a"))
        if isinstance(obj, ndarray_np):
            record_copy("h2d", obj.nbytes, host_kind(obj))

    def rec_asnumpy(result, a, k):
        src = a[0] if a else k.get("a")
        if isinstance(src, cupy.ndarray) and isinstance(result, ndarray_np):
            record_copy("d2h", src.nbytes, host_kind(result))

    def rec_get(result, a, k):  # ndarray.get(self, stream=None, order='C', out=None, blocking=True)
        out = k.get("out", a[3] if len(a) > 3 else None)
        host = out if out is not None else result
        record_copy("d2h", a[0].nbytes, host_kind(host) if isinstance(host, ndarray_np) else None)

    def rec_set(result, a, k):  # ndarray.set(self, arr, stream=None)
        arr = a[1] if len(a) > 1 else k.get("arr")
        if isinstance(arr, ndarray_np):
            record_copy("h2d", arr.nbytes, host_kind(arr))

    hooks = [
        (rt, "hostAlloc", make_host_alloc), (rt, "freeHost", make_free_host),
        (rt, "hostRegister", make_register), (rt, "hostUnregister", make_unregister),
        (rt, "memcpy", make_memcpy), (rt, "memcpyAsync", make_memcpy_async),
        (cupy.cuda, "alloc_pinned_memory", make_alloc_pinned),
        (cupy, "asarray", guarded(rec_from_host)), (cupy, "array", guarded(rec_from_host)),
        (cupy, "asnumpy", guarded(rec_asnumpy)),
        (cupy.ndarray, "get", guarded(rec_get)), (cupy.ndarray, "set", guarded(rec_set)),
    ]
    for owner, name, make in hooks:
        label = f"{getattr(owner, '__name__', type(owner).__name__)}.{name}"
        st.record_hook(label, patch(owner, name, make))

    def pool_stats():
        pool = cupy.get_default_pinned_memory_pool()
        return {"free_blocks": int(pool.n_free_blocks())}

    st.extra["cupy_pinned_pool"] = pool_stats
