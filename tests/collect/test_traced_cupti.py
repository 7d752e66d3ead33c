"""A traced process's copies and allocations into its snapshot row: the records from a report built the
way the tracer builds it (CUPTI's figures, the hooks'), and nothing but None from odd or hostile values."""
import copy
import math

import pytest

from pinmon.collect.traced.cupti_fields import MAX_BYTES_PER_S, allocations_of, copies_of
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


def test_the_copies_of_a_cupti_report():
    c = copies_of(report())
    assert c.instrument == "cupti" and c.window_s == pytest.approx(4.0)
    assert c.gpu_pci_bus_id == "0000:42:00.0"  # the GPU with the most bulk pinned bytes
    assert c.bulk_of("h2d").achieved_bytes_per_s == pytest.approx(20e9)
    assert c.bulk_of("h2d").busy_s == pytest.approx(2.0)
    assert c.bulk_of("d2h").achieved_bytes_per_s == pytest.approx(4 * MIB / 1e-3)
    # 26.7 GB of the 40 GB H2D bulk bytes went on the null stream, none of the 4 MiB D2H.
    assert c.default_stream_share == pytest.approx((2 * 40e9 / 3) / (40e9 + 4 * MIB))
    window_s = 4.0
    assert c.bytes_per_s("h2d") == pytest.approx((40e9 + 64 * MIB + 8 * MIB) / window_s, rel=1e-6)
    assert c.bytes_per_s("d2h") == pytest.approx(4 * MIB / window_s)
    h2d_bytes = 3 * (40 * 10**9 // 3) + 64 * MIB
    pinned = c.get("h2d", "pinned")
    assert pinned.bytes_per_s == pytest.approx(h2d_bytes / 4.0)  # 4 s window of wall time
    assert (pinned.bytes, pinned.count) == (h2d_bytes, 4)  # since the tracer started
    assert pinned.achieved_bytes_per_s == pytest.approx(h2d_bytes / 2.01)  # over 2.01 s of GPU time
    assert c.get("h2d", "pageable").achieved_bytes_per_s == pytest.approx(8 * MIB / 0.01)
    assert c.get("d2h", "pinned").achieved_bytes_per_s == pytest.approx(4 * MIB / 1e-3)
    # Per-copy percentiles: a log histogram's buckets, within a bucket (~19%) of the copies' rates.
    assert pinned.rate_p50_bytes_per_s == pytest.approx(20e9, rel=0.2)
    none = c.get("d2h", "pageable")
    assert (none.bytes_per_s, none.count, none.achieved_bytes_per_s, none.rate_p50_bytes_per_s) == (0.0, 0, None, None)
    # Managed and other host memory only where the process copied from or to it; no such copies here.
    assert {(s.direction, s.memory) for s in c.stats} == {
        ("h2d", "pinned"), ("h2d", "pageable"), ("d2h", "pinned"), ("d2h", "pageable"), ("d2h", "write_combined")}
    assert c.wc_readbacks == 0


def test_managed_copies_join_their_directions_total():
    rep = copy.deepcopy(report())
    rep["copies"]["h2d"]["managed"].update(bytes=10, count=1, bytes_per_s=2.5)
    c = copies_of(rep)
    assert c.get("h2d", "managed").bytes_per_s == 2.5 and c.get("d2h", "managed") is None
    assert c.bytes_per_s("h2d") == pytest.approx(copies_of(report()).bytes_per_s("h2d") + 2.5)


def test_the_row_gets_them_beside_the_hooks_figures():
    row = TracedProcess(pid=4242, report=report()).apply(ProcessPinned(pid=4242))
    assert row.source == "traced" and row.instrument == "cupti"
    assert row.copies.bulk_of("h2d").achieved_bytes_per_s == pytest.approx(20e9)
    assert row.copies.pageable_bytes_per_s == pytest.approx(8 * MIB / 4.0)  # CUPTI's, through the merge
    assert row.allocations.instrument == "cupti"
    assert ProcessPinned.from_dict(row.to_dict()) == row


def test_a_report_keeps_what_the_scan_saw_of_its_process():
    from pinmon.model import HeldMemory

    est = ProcessPinned(pid=4242, held=HeldMemory(pinned_bytes=1, mappings=3, vm_pinned_bytes=7, capped=True))
    row = TracedProcess(pid=4242, report=report()).apply(est)
    assert (row.held.mappings, row.held.vm_pinned_bytes, row.held.capped) == (3, 7, True)
    assert row.held.pinned_bytes != 1


def test_a_hooks_report_says_hooks_and_nothing_more():
    body = merged(TracerState().report(now=0.0), None)
    c = copies_of(body)
    assert c.instrument == "hooks" and c.bulk == () and c.gpu_pci_bus_id is None and c.default_stream_share is None
    assert copies_of({"pinned": {}}) is None and allocations_of({"pinned": {}}) is None  # an older report
    assert allocations_of(body).instrument == "hooks"


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
    (("allocs", "median_bytes"), 2**62),
    (("allocs", "per_s"), "fast"),
    (("wc", "readbacks"), -1),
])
def test_odd_values_become_unknown_never_an_error(path, value):
    rep = copy.deepcopy(report())
    d = rep
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value
    row = TracedProcess(pid=1, report=rep).apply(ProcessPinned(pid=1))
    assert ProcessPinned.from_dict(row.to_dict()) == row  # always a row the schema takes
    assert row.copies.gpu_pci_bus_id in (None, "0000:42:00.0", "0000:41:00.0")


# --- copies per direction and host memory kind, for either engine ------------------------------

def test_copies_of_a_hooks_report_have_rates_but_no_gpu_times():
    from pinmon.trace.state import PINNED

    clock = iter([0.0, 2.0]).__next__
    st = TracerState(clock=clock)
    st.record_copy("h2d", 64 * MIB, PINNED)
    st.record_copy("d2h", 8 * MIB, None)
    body = merged(st.report(), None)
    c = copies_of({"schema": "pinmon.trace/1", **body})
    h2d = c.get("h2d", "pinned")
    assert (h2d.bytes_per_s, h2d.bytes, h2d.count) == (pytest.approx(64 * MIB / 2.0), 64 * MIB, 1)
    assert (h2d.achieved_bytes_per_s, h2d.rate_p50_bytes_per_s, h2d.rate_p10_bytes_per_s) == (None, None, None)
    assert c.get("d2h", "pageable").bytes_per_s == pytest.approx(8 * MIB / 2.0)
    assert c.window_s == pytest.approx(2.0) and c.pageable_bytes_per_s == pytest.approx(8 * MIB / 2.0)
    row = TracedProcess(pid=1, report={"schema": "pinmon.trace/1", **body}).apply(ProcessPinned(pid=1))
    assert row.copies == c and row.instrument == "hooks"
    assert ProcessPinned.from_dict(row.to_dict()) == row


@pytest.mark.parametrize("copies", [None, "x", [1], {"h2d": "x"}, {"h2d": {"pinned": [1]}},
                                    {"h2d": {"pinned": {"bytes_per_s": float("inf"), "rate_p50": -1,
                                                        "achieved_bytes_per_s": True, "rate_p10": "9",
                                                        "bytes": 2**64, "count": 1.5e300}}}])
def test_odd_copy_values_become_unknown(copies):
    c = copies_of({"copies": copies})
    if not isinstance(copies, dict):
        assert c is None
        return
    assert all(v is None for s in c.stats for k, v in s.__dict__.items() if k not in ("direction", "memory"))
    ProcessPinned(pid=1, copies=c)


@pytest.mark.parametrize("gpu_s, nbytes", [(1e-300, 1e9), (5e-324, 2**1023), (1e-7, 1e6), (0.5, 1e15)],
                         ids=["tiny-time", "overflow", "under-a-microsecond", "past-any-link"])
def test_a_forged_gpu_time_or_size_gives_no_rate(gpu_s, nbytes):
    rep = copy.deepcopy(report())
    bulk = rep["cupti"]["window"]["pinned_bulk"]["h2d"]
    del bulk["0"]  # GPU 1 is the one its figures come from
    bulk["1"]["gpu_s"], bulk["1"]["bytes"] = gpu_s, nbytes
    c = copies_of(rep)
    assert c.bulk_of("h2d").achieved_bytes_per_s is None
    assert all(v is None or math.isfinite(v) for b in c.bulk for v in (b.achieved_bytes_per_s, b.busy_s))


def test_a_plausible_rate_stays():
    rep = copy.deepcopy(report())
    bulk = rep["cupti"]["window"]["pinned_bulk"]["h2d"]
    del bulk["0"]
    bulk["1"]["gpu_s"], bulk["1"]["bytes"] = 1e-3, 50e6  # 50 GB/s over a millisecond
    assert copies_of(rep).bulk_of("h2d").achieved_bytes_per_s == pytest.approx(50e9)


def test_rates_above_any_host_link_are_unknown():
    rep = copy.deepcopy(report())
    rep["copies"]["h2d"]["pinned"]["bytes_per_s"] = 1e300
    c = copies_of(rep)
    # One kind's forged rate makes the direction's total unknown, not smaller; the other direction stays.
    assert c.bytes_per_s("h2d") is None and c.get("h2d", "pageable").bytes_per_s is None
    assert c.bytes_per_s("d2h") == pytest.approx(4 * MIB / 4.0)
    copies = {"h2d": {"pinned": {"bytes_per_s": 1e300, "achieved_bytes_per_s": 2 * MAX_BYTES_PER_S,
                                 "rate_p50": 55e9, "rate_p10": 10**400}}}
    s = copies_of({"copies": copies}).get("h2d", "pinned")
    assert (s.bytes_per_s, s.achieved_bytes_per_s, s.rate_p50_bytes_per_s, s.rate_p10_bytes_per_s) == \
        (None, None, 55e9, None)


def test_a_report_claiming_more_than_any_host_holds_cannot_make_its_row_unreadable():
    """Figures up to 2**63 - 1 pass a report's own check, a snapshot refuses byte figures over 1 EiB:
    a process whose resident set could not be read (no clamp) stays a row every reader takes."""
    from pinmon.limits import MAX_SIZE_BYTES
    from pinmon.model import HostMemory, Snapshot

    rep = copy.deepcopy(report())
    rep["pinned"].update(bytes=2**62, registered_bytes=2**63 - 1, write_combined_bytes=2**62)
    rep["allocs"]["median_bytes"] = 2**62
    row = TracedProcess(pid=1, report=rep).apply(ProcessPinned(pid=1))
    assert row.held.pinned_bytes == row.held.registered_bytes == MAX_SIZE_BYTES
    assert row.allocations.median_bytes is None  # no allocation is that large: unknown
    snap = Snapshot(time=1.0, host=HostMemory(hostname="h"), processes=(row,))
    assert Snapshot.from_dict(snap.to_dict()) == snap
