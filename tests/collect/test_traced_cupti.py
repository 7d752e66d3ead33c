"""A traced process's CUPTI figures into its snapshot row: the fields only CUPTI has, from a report
built the way the tracer builds it, and nothing but None from odd or hostile values."""
import copy
import math

import pytest

from pinmon.collect.traced.cupti_fields import cupti_fields
from pinmon.collect.traced.reader import TracedProcess
from pinmon.model import ProcessPinned
from pinmon.trace.cupti_figures import CuptiFigures
from pinmon.trace.merge import merged
from pinmon.trace.state import TracerState

from ..trace import cupti_records as R

MIB = 1 << 20
T0 = 1_700_000_000_000_000_000
S = 10**9


def report():
    f = CuptiFigures(started_ns=T0)
    recs = [R.context(context_id=1, null_stream_id=7)]
    # GPU 1: 3 s of 64 MiB pinned H2D copies at 20 GB/s, two thirds on the null stream; GPU 0: less.
    for i in range(3):
        t = T0 + i * S
        recs.append(R.memcpy(nbytes=40 * 10**9 // 3, start=t, dur_ns=2 * S // 3, device_id=1,
                             stream_id=7 if i < 2 else 9))
    recs.append(R.memcpy(nbytes=64 * MIB, start=T0, dur_ns=S // 100, device_id=0))
    recs.append(R.memcpy(copy_kind=2, src_kind=3, dst_kind=2, nbytes=4 * MIB, start=T0, dur_ns=S // 1000,
                         device_id=1, stream_id=9))
    recs.append(R.memcpy(src_kind=1, nbytes=8 * MIB, start=T0 + S, dur_ns=S // 100, device_id=1))
    f.consume(recs)
    c = f.report(T0 + 4 * S)
    c["devices"] = {"0": {"pci_bus_id": "0000:41:00.0"}, "1": {"pci_bus_id": "0000:42:00.0"}}
    body = merged(TracerState().report(now=0.0), c, "armed")
    return {"schema": "pinmon.trace/1", "pid": 4242, **body}


def test_cupti_fields_of_a_tracer_report():
    out = cupti_fields(report())
    assert out["trace_engine"] == "cupti"
    assert out["copy_gpu_pci_bus_id"] == "0000:42:00.0"  # the GPU with the most bulk pinned bytes
    assert out["h2d_pinned_bulk_bytes_per_s"] == pytest.approx(20e9)
    assert out["h2d_pinned_bulk_busy_s"] == pytest.approx(2.0)
    assert out["d2h_pinned_bulk_bytes_per_s"] == pytest.approx(4 * MIB / 1e-3)
    # 26.7 GB of the 40 GB H2D bulk bytes went on the null stream, none of the 4 MiB D2H.
    assert out["pinned_bulk_default_stream_share"] == pytest.approx((2 * 40e9 / 3) / (40e9 + 4 * MIB))
    window_s = 4.0
    assert out["h2d_copy_bytes_per_s"] == pytest.approx((40e9 + 64 * MIB + 8 * MIB) / window_s, rel=1e-6)
    assert out["d2h_copy_bytes_per_s"] == pytest.approx(4 * MIB / window_s)


def test_the_row_gets_them_beside_the_hooks_figures():
    figs = TracedProcess(pid=4242, report=report()).figures()
    row = ProcessPinned(pid=4242, **figs)
    assert row.source == "traced" and row.trace_engine == "cupti"
    assert row.h2d_pinned_bulk_bytes_per_s == pytest.approx(20e9)
    assert row.pageable_copy_bytes_per_s == pytest.approx(8 * MIB / 4.0)  # CUPTI's, through the merge
    assert ProcessPinned.from_dict(row.to_dict()) == row


def test_a_hooks_report_says_hooks_and_nothing_more():
    body = merged(TracerState().report(now=0.0), None)
    assert cupti_fields(body) == {"trace_engine": "hooks"}
    assert cupti_fields({"pinned": {}}) == {"trace_engine": "hooks"}  # an older report


@pytest.mark.parametrize("path, value", [
    (("engine",), "gpu"),
    (("cupti", "window"), "x"),
    (("cupti", "window", "copies", "h2d"), [1, 2]),
    (("cupti", "window", "pinned_bulk", "h2d", "1", "bytes"), -5),
    (("cupti", "window", "pinned_bulk", "h2d", "1", "gpu_s"), float("nan")),
    (("cupti", "window", "pinned_bulk", "h2d", "1", "gpu_s"), True),
    (("cupti", "window", "pinned_bulk"), {"h2d": {"../etc": {"bytes": 1}}}),
    (("cupti", "devices", "1", "pci_bus_id"), "0000:42:00.0\x1b[31m"),
    (("cupti", "devices", "1", "pci_bus_id"), 42),
])
def test_odd_values_become_unknown_never_an_error(path, value):
    rep = copy.deepcopy(report())
    d = rep
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value
    out = cupti_fields(rep)
    row = ProcessPinned(pid=1, **out)  # always valid row fields
    for name, v in out.items():
        assert v is None or isinstance(v, (str, float)), (name, v)
    assert row.copy_gpu_pci_bus_id in (None, "0000:42:00.0", "0000:41:00.0")


# --- transfers: per direction and host memory kind, for either engine -------------------------

def test_transfers_of_a_cupti_report():
    from pinmon.collect.traced.cupti_fields import transfer_fields

    t = transfer_fields(report())["transfers"]
    assert set(t) == {"h2d.pinned", "h2d.pageable", "d2h.pinned", "d2h.pageable"}
    h2d_bytes = 3 * (40 * 10**9 // 3) + 64 * MIB
    assert t["h2d.pinned"]["bytes_per_s"] == pytest.approx(h2d_bytes / 4.0)  # 4 s window of wall time
    assert t["h2d.pinned"]["achieved_bytes_per_s"] == pytest.approx(h2d_bytes / 2.01)  # over 2.01 s of GPU time
    assert t["h2d.pageable"]["achieved_bytes_per_s"] == pytest.approx(8 * MIB / 0.01)
    assert t["d2h.pinned"]["achieved_bytes_per_s"] == pytest.approx(4 * MIB / 1e-3)
    # Per-copy percentiles: a log histogram's buckets, within a bucket (~19%) of the copies' rates.
    assert t["h2d.pinned"]["rate_p50"] == pytest.approx(20e9, rel=0.2)
    assert t["d2h.pageable"] == {"bytes_per_s": 0.0, "achieved_bytes_per_s": None, "rate_p50": None,
                                 "rate_p10": None}  # no such copies: none per second, no rate


def test_transfers_of_a_hooks_report_have_rates_but_no_gpu_times():
    from pinmon.collect.traced.cupti_fields import transfer_fields
    from pinmon.trace.state import PINNED

    clock = iter([0.0, 2.0]).__next__
    st = TracerState(clock=clock)
    st.record_copy("h2d", 64 * MIB, PINNED)
    st.record_copy("d2h", 8 * MIB, None)
    body = merged(st.report(), None)
    t = transfer_fields({"schema": "pinmon.trace/1", **body})["transfers"]
    assert t["h2d.pinned"] == {"bytes_per_s": pytest.approx(64 * MIB / 2.0), "achieved_bytes_per_s": None,
                               "rate_p50": None, "rate_p10": None}
    assert t["d2h.pageable"]["bytes_per_s"] == pytest.approx(8 * MIB / 2.0)
    row = ProcessPinned(pid=1, **TracedProcess(pid=1, report={"schema": "pinmon.trace/1", **body}).figures())
    assert row.transfers == t and row.trace_engine == "hooks"
    assert ProcessPinned.from_dict(row.to_dict()) == row


@pytest.mark.parametrize("copies", [None, "x", [1], {"h2d": "x"}, {"h2d": {"pinned": [1]}},
                                    {"h2d": {"pinned": {"bytes_per_s": float("inf"), "rate_p50": -1,
                                                        "achieved_bytes_per_s": True, "rate_p10": "9"}}}])
def test_odd_transfer_values_become_unknown(copies):
    from pinmon.collect.traced.cupti_fields import transfer_fields

    t = transfer_fields({"copies": copies})["transfers"]
    if not isinstance(copies, dict):
        assert t is None
        return
    assert all(v is None for row in t.values() for v in row.values())
    ProcessPinned(pid=1, transfers=t)


@pytest.mark.parametrize("gpu_s, nbytes", [(1e-300, 1e9), (5e-324, 2**1023), (1e-7, 1e6), (0.5, 1e15)],
                         ids=["tiny-time", "overflow", "under-a-microsecond", "past-any-link"])
def test_a_forged_gpu_time_or_size_gives_no_rate(gpu_s, nbytes):
    rep = copy.deepcopy(report())
    bulk = rep["cupti"]["window"]["pinned_bulk"]["h2d"]
    del bulk["0"]  # GPU 1 is the one its figures come from
    bulk["1"]["gpu_s"], bulk["1"]["bytes"] = gpu_s, nbytes
    out = cupti_fields(rep)
    assert out["h2d_pinned_bulk_bytes_per_s"] is None
    assert all(v is None or isinstance(v, str) or math.isfinite(v) for v in out.values())


def test_a_plausible_rate_stays():
    rep = copy.deepcopy(report())
    bulk = rep["cupti"]["window"]["pinned_bulk"]["h2d"]
    del bulk["0"]
    bulk["1"]["gpu_s"], bulk["1"]["bytes"] = 1e-3, 50e6  # 50 GB/s over a millisecond
    assert cupti_fields(rep)["h2d_pinned_bulk_bytes_per_s"] == pytest.approx(50e9)


def test_rates_above_any_host_link_are_unknown():
    from pinmon.collect.traced.cupti_fields import MAX_BYTES_PER_S, transfer_fields

    rep = copy.deepcopy(report())
    rep["cupti"]["window"]["copies"]["h2d"]["pinned"]["bytes_per_s"] = 1e300
    assert cupti_fields(rep)["h2d_copy_bytes_per_s"] is None
    copies = {"h2d": {"pinned": {"bytes_per_s": 1e300, "achieved_bytes_per_s": 2 * MAX_BYTES_PER_S,
                                 "rate_p50": 55e9, "rate_p10": 10**400}}}
    t = transfer_fields({"copies": copies})["transfers"]["h2d.pinned"]
    assert t == {"bytes_per_s": None, "achieved_bytes_per_s": None, "rate_p50": 55e9, "rate_p10": None}
