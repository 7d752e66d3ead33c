"""The CuPy hooks against a CuPy stand-in: what each hooked call records, and that the original
behaviour (results, exceptions) is untouched."""
import numpy
import pytest

from pinmon.trace.state import POOL, WRITE_COMBINED

MIB = 1 << 20


def next_line() -> str:
    """``test_hooks_cupy.py:N`` of the line after the caller's."""
    import sys

    return f"test_hooks_cupy.py:{sys._getframe(1).f_lineno + 1}"


def test_host_alloc_and_free_are_counted_with_their_call_site(fake_cupy):
    cupy, st = fake_cupy
    rt = cupy.cuda.runtime
    site_here = next_line()
    ptrs = [rt.hostAlloc(4096, 0) for _ in range(10)]
    r = st.report()
    assert r["allocs"]["count"] == 10 and r["pinned"]["bytes"] == 10 * 4096
    assert r["allocs"]["median_bytes"] == 4096 and r["allocs"]["histogram"] == {"4096": 10}
    site = r["call_sites"]["alloc"][0]
    assert site["site"].endswith(site_here) and site["count"] == 10
    for p in ptrs:
        rt.freeHost(p)
    r = st.report()
    assert r["pinned"]["bytes"] == 0 and r["allocs"]["frees"] == 10
    assert r["pinned"]["peak_bytes"] == 10 * 4096


def test_original_exceptions_pass_through_and_nothing_is_recorded(fake_cupy):
    cupy, st = fake_cupy
    rt = cupy.cuda.runtime
    rt.fail_next.add("hostAlloc")
    with pytest.raises(rt.CUDARuntimeError, match="cudaErrorMemoryAllocation"):
        rt.hostAlloc(MIB, 0)
    with pytest.raises(rt.CUDARuntimeError, match="invalid argument"):
        rt.freeHost(12345)
    assert st.report()["allocs"]["count"] == 0
    assert st.internal_errors == 0


def test_results_are_the_originals(fake_cupy):
    cupy, _st = fake_cupy
    a = numpy.arange(1000, dtype=numpy.float32)
    d = cupy.asarray(a)
    assert isinstance(d, cupy.ndarray)
    back = cupy.asnumpy(d)
    assert (back == a).all()
    assert cupy.asnumpy.__name__ == "asnumpy" and cupy.ndarray.get.__name__ == "get"


def test_write_combined_memory_and_d2h_readbacks(fake_cupy):
    cupy, st = fake_cupy
    rt = cupy.cuda.runtime
    wc = rt.hostAlloc(8 * MIB, rt.hostAllocWriteCombined)
    dev = rt.malloc(8 * MIB)
    rt.memcpy(dev, wc, 8 * MIB, rt.memcpyHostToDevice)  # upload from WC: its intended use
    assert st.report()["wc"]["readbacks"] == 0
    site_here = next_line()
    rt.memcpyAsync(wc, dev, 8 * MIB, rt.memcpyDeviceToHost, 0)  # download into WC: the CPU reads it
    r = st.report()
    assert r["pinned"]["write_combined_bytes"] == 8 * MIB
    assert r["pinned"]["bytes"] == 0  # WC is reported apart from ordinary pinned memory
    assert r["wc"] == {"readbacks": 1, "d2h_copies": 1, "h2d_copies": 1}
    assert r["copies"]["d2h"]["pinned"]["bytes"] == 8 * MIB  # WC memory is pinned: a fast copy
    assert r["call_sites"]["wc_readback"][0]["site"].endswith(site_here)
    assert st.lookup(wc) == WRITE_COMBINED and st.lookup(wc + 8 * MIB) is None


def test_memcpy_pinned_vs_pageable(fake_cupy):
    cupy, st = fake_cupy
    rt = cupy.cuda.runtime
    pinned = rt.hostAlloc(2 * MIB, 0)
    pageable = numpy.zeros(2 * MIB, numpy.uint8)
    dev = rt.malloc(2 * MIB)
    rt.memcpy(dev, pinned + 4096, MIB, rt.memcpyHostToDevice)  # inside the pinned range
    rt.memcpy(dev, pageable.ctypes.data, 2 * MIB, rt.memcpyHostToDevice)
    rt.memcpy(pageable.ctypes.data, dev, 2 * MIB, rt.memcpyDeviceToHost)
    rt.memcpy(dev, dev, 16, rt.memcpyDeviceToDevice)  # not a host copy: not counted
    c = st.report()["copies"]
    assert c["h2d"]["pinned"]["bytes"] == MIB and c["h2d"]["pinned"]["size_classes"]["1m_16m"]["bytes"] == MIB
    assert c["h2d"]["pageable"]["bytes"] == 2 * MIB and c["d2h"]["pageable"]["count"] == 1
    assert st.report()["call_sites"]["pageable_copy"][0]["bytes"] == 2 * MIB


def test_array_get_set_and_asnumpy_count_once(fake_cupy):
    cupy, st = fake_cupy
    a = numpy.ones(MIB // 8)  # 1 MiB of float64, pageable
    d = cupy.asarray(a)
    d2 = cupy.array(a)
    d.set(a)
    cupy.asnumpy(d)  # calls ndarray.get inside: one copy, not two
    d2.get()
    c = st.report()["copies"]
    assert c["h2d"]["pageable"]["count"] == 3 and c["h2d"]["pageable"]["bytes"] == 3 * MIB
    assert c["d2h"]["pageable"]["count"] == 2
    assert st.report()["pageable_copy_bytes_per_s"] > 0


def test_pinned_pool_numpy_arrays_are_pinned_hosts(fake_cupy):
    cupy, st = fake_cupy
    import cupyx

    h = cupyx.empty_pinned((MIB,), dtype=numpy.uint8)
    h[:] = 1
    d = cupy.asarray(h)
    out = cupyx.zeros_pinned((MIB,), dtype=numpy.uint8)
    d.get(out=out)
    cupy.asnumpy(d, out=out)
    r = st.report()
    assert r["copies"]["h2d"]["pinned"]["count"] == 1 and r["copies"]["h2d"]["pageable"]["count"] == 0
    assert r["copies"]["d2h"]["pinned"]["count"] == 2
    assert r["pinned"]["by_kind"][POOL] == 2 * MIB and r["allocs"]["count"] == 2


def test_pool_block_reuse_is_not_a_new_allocation(fake_cupy):
    cupy, st = fake_cupy
    for _ in range(5):
        mem = cupy.cuda.alloc_pinned_memory(MIB)
        del mem  # back to the pool; the next call gets the same block
    r = st.report()
    assert r["allocs"]["calls"] == 5 and r["allocs"]["count"] == 1
    assert r["pinned"]["bytes"] == MIB  # the pool keeps the block pinned
    assert r["extra"]["cupy_pinned_pool"]["free_blocks"] == 1


def test_register_and_unregister(fake_cupy):
    cupy, st = fake_cupy
    rt = cupy.cuda.runtime
    buf = numpy.zeros(4 * MIB, numpy.uint8)
    rt.hostRegister(buf.ctypes.data, buf.nbytes, 0)
    assert st.report()["pinned"]["registered_bytes"] == 4 * MIB
    d = cupy.asarray(buf)
    assert st.report()["copies"]["h2d"]["pinned"]["count"] == 1
    rt.hostUnregister(buf.ctypes.data)
    assert st.report()["pinned"]["registered_bytes"] == 0
    d.set(buf)
    assert st.report()["copies"]["h2d"]["pageable"]["count"] == 1


def test_bookkeeping_errors_never_reach_the_program(fake_cupy, monkeypatch):
    cupy, st = fake_cupy

    def broken(*a, **k):
        raise RuntimeError("bookkeeping bug")

    monkeypatch.setattr(st, "_add_range", broken)
    ptr = cupy.cuda.runtime.hostAlloc(4096, 0)  # still returns the pointer
    assert ptr and st.internal_errors == 1
    assert st.report()["internal_errors"] == 1


def test_hooking_twice_wraps_once(fake_cupy):
    from pinmon.trace import hooks_cupy

    cupy, st = fake_cupy
    hooks_cupy.hook(cupy, st)
    cupy.cuda.runtime.hostAlloc(4096, 0)
    assert st.report()["allocs"]["count"] == 1
    assert all(st.hooks.values()), st.missing
