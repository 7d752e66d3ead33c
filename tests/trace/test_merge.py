"""One report from both engines: CUPTI's figures replace the hooks' at the same keys, the hooks keep
what only they know, and a copy both saw is counted once."""
import pytest

from pinmon.trace.cupti_figures import CuptiFigures
from pinmon.trace.merge import merged
from pinmon.trace.state import PINNED, WRITE_COMBINED, TracerState

from . import cupti_records as R

MIB = 1 << 20
T0 = 1_700_000_000_000_000_000


def hooks_report():
    st = TracerState(clock=lambda: 100.0)
    st.record_alloc(0x1000, MIB, PINNED, site="a.py:1")
    st.record_alloc(0x9000000, 2 * MIB, WRITE_COMBINED, site="a.py:2")
    st.record_copy("h2d", MIB, PINNED)
    st.record_copy("h2d", 3 * MIB, None)
    return st.report(now=101.0)


def cupti_report():
    f = CuptiFigures(started_ns=T0)
    f.consume([R.memory(nbytes=MIB, timestamp=T0), R.memory(nbytes=2 * MIB, timestamp=T0 + 10),
               R.memory(nbytes=5 * MIB, timestamp=T0 + 20),  # another library's, unseen by the hooks
               R.memcpy(nbytes=MIB, start=T0 + 100),
               R.memcpy(src_kind=1, nbytes=3 * MIB, start=T0 + 200),
               R.memcpy(src_kind=1, nbytes=8 * MIB, start=T0 + 300)])  # e.g. JAX's, unseen by the hooks
    return f.report(T0 + 10**9)


def test_without_cupti_the_hooks_report_is_unchanged_but_for_the_engine():
    h = hooks_report()
    out = merged(h, None, None, "cupti-python is not installed (cupti)")
    assert out["engine"] == "hooks" and out["engine_notice"] == "cupti-python is not installed (cupti)"
    assert {k: v for k, v in out.items() if not k.startswith("engine")} == h


def test_cupti_figures_replace_the_hooks_and_nothing_is_counted_twice():
    h, c = hooks_report(), cupti_report()
    out = merged(h, c, "armed")
    assert out["engine"] == "cupti" and out["engine_notice"] is None and out["cupti"] is c
    h2d = out["copies"]["h2d"]
    assert h2d["pinned"]["count"] == 1 and h2d["pinned"]["bytes"] == MIB  # seen by both, counted once
    assert h2d["pageable"]["count"] == 2 and h2d["pageable"]["bytes"] == 11 * MIB
    assert h2d["pageable"]["bytes_per_s"] == pytest.approx(11 * MIB / 1.0)
    assert out["pageable_copy_bytes_per_s"] == pytest.approx(11 * MIB)
    assert out["hooks"]["copies"]["h2d"]["pageable"]["bytes"] == 3 * MIB
    # Pinned: CUPTI's 8 MiB less the 2 MiB the hooks know are write-combined (reported apart).
    assert out["pinned"]["bytes"] == 6 * MIB and out["pinned"]["bytes_from"] == "cupti"
    assert out["pinned"]["write_combined_bytes"] == 2 * MIB
    assert out["allocs"]["count"] == 3 and out["allocs"]["from"] == "cupti"
    assert out["allocs"]["calls"] == 2 and out["allocs"]["write_combined"] == 1  # the hooks' own
    assert out["allocs"]["per_s"] == pytest.approx(3.0)
    assert out["call_sites"] == h["call_sites"]


def test_a_failed_or_forked_engine_reports_hooks_figures():
    h, c = hooks_report(), cupti_report()
    out = merged(h, c, "failed", "CUPTI could not be re-armed after torch.profiler: x")
    assert out["engine"] == "hooks" and out["copies"] == h["copies"] and out["cupti"] is c
    assert out["engine_notice"].startswith("CUPTI could not be re-armed")


def test_a_paused_engine_still_gives_its_figures_with_a_notice():
    out = merged(hooks_report(), cupti_report(), "paused", "CUPTI paused while torch.profiler runs")
    assert out["engine"] == "cupti" and out["engine_notice"] == "CUPTI paused while torch.profiler runs"


def test_registered_bytes_are_cuptis_where_it_tells_them_apart_else_the_hooks():
    h = hooks_report()  # the hooks saw no registration (a ctypes or C++ cudaHostRegister)
    f = CuptiFigures(started_ns=T0)
    f.track_registrations(frozenset({(5, 152)}))
    f.consume([R.memory(nbytes=32 * MIB, correlation_id=7, address=0x7F0000000000, timestamp=T0),
               R.api(cbid=152, correlation_id=7), R.memory(nbytes=2 * MIB, correlation_id=8, timestamp=T0)])
    out = merged(h, f.report(T0 + 10**9), "armed")
    p = out["pinned"]
    assert p["registered_bytes"] == 32 * MIB and p["registered_from"] == "cupti"
    assert p["bytes"] == 32 * MIB  # 34 MiB pinned, less the hooks' 2 MiB write-combined
    assert out["allocs"]["registers"] == 1
    # Not told apart (no API records): the hooks' figure stays.
    st = TracerState(clock=lambda: 100.0)
    st.record_register(0x5000, 4 * MIB)
    out = merged(st.report(now=101.0), cupti_report(), "armed")
    assert out["pinned"]["registered_bytes"] == 4 * MIB and "registered_from" not in out["pinned"]
    assert out["allocs"]["registers"] == 1
