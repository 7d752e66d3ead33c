"""The tracer's hot paths: per-thread copy tallies, the host-address shortcut, the call-site caches."""
import threading

import numpy

from pinmon.trace import callsite
from pinmon.trace.hooks_cupy import _host_ptr
from pinmon.trace.state import PINNED, WRITE_COMBINED, TracerState

MIB = 1 << 20


def test_copies_from_many_threads_are_all_counted_and_ended_threads_fold():
    st = TracerState()
    st.record_alloc(0x10000, MIB, site="x.py:1")

    def copier():
        for _ in range(1000):
            st.record_copy("h2d", 4096, PINNED)

    threads = [threading.Thread(target=copier) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    st.record_copy("d2h", 2 * MIB, PINNED)  # this thread's own tally
    del threads, t
    r = st.report()
    h2d = r["copies"]["h2d"]["pinned"]
    assert h2d["count"] == 8000 and h2d["bytes"] == 8000 * 4096
    assert h2d["size_classes"]["lt_64k"]["bytes"] == 8000 * 4096
    assert r["copies"]["d2h"]["pinned"]["size_classes"]["1m_16m"]["bytes"] == 2 * MIB
    assert len(st._tallies) == 1  # the ended threads' tallies were folded into one sum
    assert st.report()["copies"]["h2d"]["pinned"]["count"] == 8000  # and still counted


def _pageable_copy(st, nbytes):  # one call site for every thread
    st.record_copy("h2d", nbytes, None)


def _wc_readback(st, nbytes):
    st.record_copy("d2h", nbytes, WRITE_COMBINED)


def test_copy_call_sites_from_many_threads_live_and_ended():
    st = TracerState()
    started, release = threading.Barrier(5), threading.Event()

    def copier():
        for _ in range(500):
            _pageable_copy(st, 4096)
        _wc_readback(st, MIB)
        started.wait()
        release.wait()  # alive while the first report is taken

    threads = [threading.Thread(target=copier) for _ in range(4)]
    for t in threads:
        t.start()
    started.wait()
    for _ in range(100):
        _pageable_copy(st, MIB)  # this thread: the same site, bigger copies
    live = st.report()["call_sites"]
    release.set()
    for t in threads:
        t.join()
    del threads, t
    ended = st.report()["call_sites"]
    for sites in (live, ended):
        (top,) = sites["pageable_copy"]
        assert top["site"].endswith(f"test_hot_paths.py:{_pageable_copy.__code__.co_firstlineno + 1}")
        assert top["count"] == 4 * 500 + 100 and top["bytes"] == 4 * 500 * 4096 + 100 * MIB
        (wc,) = sites["wc_readback"]
        assert wc["count"] == 4 and wc["bytes"] == 4 * MIB
    assert len(st._tallies) == 1  # the ended threads' sites were folded into the kept table
    assert st.report()["call_sites"] == ended  # and still counted, once


def test_a_thread_keeps_at_most_max_sites_copy_call_sites(monkeypatch):
    import pinmon.trace.state as state

    st = TracerState()
    monkeypatch.setattr(state, "MAX_SITES", 3)
    sites = iter(f"gen.py:{i}" for i in range(10))
    monkeypatch.setattr(state, "call_site", lambda depth: next(sites))
    for _ in range(10):
        st.record_copy("h2d", 1, None)
    assert len(st.report()["call_sites"]["pageable_copy"]) == 3
    assert st.report()["copies"]["h2d"]["pageable"]["count"] == 10  # the bytes still count


def test_size_class_bounds_and_write_combined_slots():
    st = TracerState()
    for n in (0, 64 * 1024 - 1, 64 * 1024, MIB - 1, MIB, 16 * MIB - 1, 16 * MIB):
        st.record_copy("h2d", n, PINNED)
    st.record_copy("h2d", MIB, WRITE_COMBINED)
    st.record_copy("d2h", MIB, WRITE_COMBINED)
    r = st.report()
    classes = r["copies"]["h2d"]["pinned"]["size_classes"]
    assert [classes[k]["bytes"] for k in ("lt_64k", "64k_1m", "1m_16m", "ge_16m")] == [
        64 * 1024 - 1, 64 * 1024 + MIB - 1, MIB + 16 * MIB - 1 + MIB, 16 * MIB]
    assert r["wc"] == {"readbacks": 1, "d2h_copies": 1, "h2d_copies": 1}
    assert st.counters["copy.h2d.wc.bytes"] == 0  # copy counters live in the tallies, not here


def test_host_address_matches_the_array_interface_for_every_layout():
    base = numpy.arange(4096, dtype=numpy.uint8)
    readonly = base.copy()
    readonly.flags.writeable = False
    cases = [base, base[10:], base[::2], base[::-1], readonly, base[:0],
             numpy.asfortranarray(numpy.ones((8, 8)))]
    for arr in cases:
        assert _host_ptr(arr) == arr.__array_interface__["data"][0]


def test_call_site_cache_follows_the_skip_list(tmp_path):
    here = callsite.call_site(1)
    assert here.startswith("tests/trace/test_hot_paths.py:")
    assert callsite.call_site(1) != here  # another line, another site

    class Module:
        __file__ = __file__

    saved_skip, saved_files = callsite._skip, callsite._files
    try:
        callsite.skip_package(Module)  # this test directory is now "library" code
        site = callsite.call_site(1)  # the first frame outside it (pytest's), if any
        assert site is None or not site.startswith("tests/trace/test_hot_paths.py:")
    finally:
        callsite._skip, callsite._files = saved_skip, saved_files
