"""CUPTI records to figures: sums per direction, host memory kind and size class, achieved rates and
their percentiles, the GPU-time window, bulk pinned copies per device and on the default stream, and
pinned memory from MEMORY2. Records are shaped like cupti-python 13.0.1's (see cupti_records)."""
import gc
import weakref

import pytest

from pinmon.trace.cupti_figures import BIN_NS, KEEP_BINS, CuptiFigures, percentile, rate_bucket

from . import cupti_records as R

MIB = 1 << 20
KIB = 1 << 10
T0 = 1_700_000_000_000_000_000


def figures_of(records, started=T0, now=None):
    f = CuptiFigures(started_ns=started)
    f.consume(records)
    return f, f.report(now)


def test_constructed_records_sum_by_direction_host_kind_and_size_class():
    records = R.load()
    assert all(hasattr(r, "copy_count") for r in records if r.kind == 1)  # the 13.0.1 layout
    _, rep = figures_of(records)
    h2d, d2h = rep["copies"]["h2d"], rep["copies"]["d2h"]
    # Two 1 MiB pinned copies, then one record of a 4-copy batch of 256 KiB each (copy_count 4).
    assert h2d["pinned"]["count"] == 6 and h2d["pinned"]["bytes"] == 3 * MIB
    assert h2d["pinned"]["size_classes"]["1m_16m"]["count"] == 2
    assert h2d["pinned"]["size_classes"]["64k_1m"] == pytest.approx(
        {"count": 4, "bytes": MIB, "gpu_s": 20e-6, "achieved_bytes_per_s": MIB / 20e-6,
         "rate_p50": pytest.approx(MIB / 20e-6, rel=0.2), "rate_p10": pytest.approx(MIB / 20e-6, rel=0.2)})
    assert h2d["pinned"]["gpu_s"] == pytest.approx(60e-6)
    assert h2d["pageable"]["bytes"] == 64 * MIB
    assert h2d["pageable"]["achieved_bytes_per_s"] == pytest.approx(64 * MIB / 6.710886e-3)
    assert h2d["managed"]["bytes"] == 4 * MIB and h2d["other"]["bytes"] == 0
    assert d2h["pinned"]["count"] == 2 and d2h["pinned"]["achieved_bytes_per_s"] == pytest.approx(MIB / 21e-6)
    assert rep["other_copies"] == {"d2d": {"count": 1, "bytes": 8 * MIB, "gpu_s": pytest.approx(10e-6)}}
    assert rep["records"] == len(records) and rep["record_errors"] == 0


def test_memory2_pinned_held_peak_rates_median_and_other_kinds():
    _, rep = figures_of(R.load())
    p = rep["pinned"]
    # 1 MiB (cupy), 1 MiB + 8 KiB (write-combined, then released), 2 MiB (torch's caching allocator)
    assert p["bytes"] == 3 * MIB
    assert p["peak_bytes"] == 3 * MIB
    assert (p["allocs"], p["frees"]) == (3, 1)
    assert p["alloc_bytes"] == 4 * MIB + 8 * KIB and p["free_bytes"] == MIB + 8 * KIB
    assert p["median_alloc_bytes"] == MIB + 8 * KIB
    assert p["histogram"] == {str(MIB): 2, str(2 * MIB): 1}
    assert rep["managed_bytes"] == 4 * MIB and rep["device_bytes"] == 512 * MIB
    assert rep["write_combined_bytes"] is None  # MEMORY2 cannot tell write-combined apart


def test_window_bulk_pinned_copies_per_device_and_default_stream_share():
    records = R.load()
    last = max(getattr(r, "end", 0) for r in records)
    _, rep = figures_of(records, now=last + 1_000_000)
    w = rep["window"]
    assert 0 < w["s"] <= 5.0
    bulk = w["pinned_bulk"]
    # Only the 1 MiB copies count as bulk (the batch's copies are 256 KiB each); all on null stream 7.
    assert bulk["h2d"]["0"]["bytes"] == 2 * MIB and bulk["h2d"]["0"]["default_stream_bytes"] == 2 * MIB
    assert bulk["h2d"]["0"]["achieved_bytes_per_s"] == pytest.approx(MIB / 20e-6)
    assert bulk["d2h"]["0"]["count"] == 2
    wc = w["copies"]["h2d"]["pageable"]
    assert wc["bytes"] == 64 * MIB and wc["bytes_per_s"] == pytest.approx(64 * MIB / w["s"])
    assert w["pinned_allocs_per_s"] == pytest.approx(3 / w["s"])


def test_copies_on_another_stream_are_not_default_stream_bytes():
    recs = [R.context(context_id=3, null_stream_id=11),
            R.memcpy(nbytes=4 * MIB, start=T0, context_id=3, stream_id=12),
            R.memcpy(nbytes=4 * MIB, start=T0 + 1000, context_id=3, stream_id=11)]
    _, rep = figures_of(recs)
    assert rep["window"]["pinned_bulk"]["h2d"]["0"]["default_stream_bytes"] == 4 * MIB
    # Without CONTEXT records the null stream is unknown: None, not 0.
    _, rep = figures_of(recs[1:])
    assert rep["window"]["pinned_bulk"]["h2d"]["0"]["default_stream_bytes"] is None


def test_rate_percentiles_come_from_the_per_copy_rates():
    fast, slow = MIB / 20e-6, MIB / 200e-6  # ~52 GB/s and ~5 GB/s
    recs = [R.memcpy(start=T0 + i * 1000, dur_ns=20_000) for i in range(89)]
    recs += [R.memcpy(start=T0 + (100 + i) * 1000, dur_ns=200_000) for i in range(11)]
    _, rep = figures_of(recs)
    row = rep["copies"]["h2d"]["pinned"]
    assert row["rate_p50"] == pytest.approx(fast, rel=0.2)
    assert row["rate_p10"] == pytest.approx(slow, rel=0.2)
    # The achieved rate is bytes over summed GPU time, dominated by the slow copies' time.
    assert row["achieved_bytes_per_s"] == pytest.approx(100 * MIB / (89 * 20e-6 + 11 * 200e-6))


def test_percentile_of_an_empty_histogram_is_unknown():
    assert percentile({}, 0.5) is None
    assert percentile({rate_bucket(1e9): 3}, 0.1) == pytest.approx(1e9, rel=0.2)


def test_the_window_keeps_the_last_seconds_of_gpu_time_only():
    recs = [R.memcpy(nbytes=8 * MIB, start=T0), R.memcpy(nbytes=2 * MIB, start=T0 + 10 * 10**9)]
    _, rep = figures_of(recs, now=T0 + 10 * 10**9 + 10**8)
    w = rep["window"]
    assert w["s"] == pytest.approx(5.1)  # whole bins: from the start of the bin that holds now - 5 s
    assert w["copies"]["h2d"]["pinned"]["bytes"] == 2 * MIB
    assert w["copies"]["h2d"]["pinned"]["bytes_per_s"] == pytest.approx(2 * MIB / 5.1)
    assert rep["copies"]["h2d"]["pinned"]["bytes"] == 10 * MIB  # lifetime keeps both


def test_the_window_starts_when_collection_started():
    _, rep = figures_of([R.memcpy(start=T0 + 10**9)], started=T0, now=T0 + 2 * 10**9)
    assert rep["window"]["s"] == pytest.approx(2.0)
    _, rep = figures_of([R.memcpy(start=T0 + 10**9)], started=T0 + 3 * 10**8, now=T0 + 2 * 10**9)
    assert rep["window"]["s"] == pytest.approx(1.7)  # mid-bin: from that moment, not its bin's start


PACE_S = 0.04        # 25 rounds a second
PACED_BYTES = 8 * MIB
PACED_RATE = PACED_BYTES / PACE_S  # 209.7 MB/s per stream
# (direction, host memory kind): streams per round; two pinned host-to-device streams, as a job with
# torch's pinned copies and JAX's pinned staging side by side.
STREAMS = {("h2d", "pinned"): 2, ("h2d", "pageable"): 1, ("d2h", "pinned"): 1, ("d2h", "pageable"): 1}


def paced_records(offset_ns: int, seconds: float):
    """Steady paced traffic: every 40 ms, 8 MiB per stream (1 ms of GPU time each) and one pinned
    allocation and release, from T0 + offset_ns on."""
    out = []
    for i in range(int(seconds / PACE_S)):
        t = T0 + offset_ns + int(i * PACE_S * 1e9)
        for (d, mem), n in STREAMS.items():
            kind = 2 if mem == "pinned" else 1
            for j in range(n):
                src, dst = (kind, 3) if d == "h2d" else (3, kind)
                out.append(R.memcpy(copy_kind=1 if d == "h2d" else 2, src_kind=src, dst_kind=dst,
                                    nbytes=PACED_BYTES, start=t + j * 2_000_000, dur_ns=1_000_000))
        out.append(R.memory(op=1, nbytes=MIB, timestamp=t + 5_000_000))
        out.append(R.memory(op=2, nbytes=MIB, timestamp=t + 6_000_000))
    return out


def _end(record) -> int:
    return record.end if hasattr(record, "end") else record.timestamp


@pytest.mark.parametrize("offset_ms", [0, 7, 130, 260, 499])
def test_window_rates_of_steady_paced_traffic_are_true_at_every_phase_of_the_bins(offset_ms):
    f = CuptiFigures(started_ns=T0)
    records = paced_records(offset_ms * 10**6, 14.0)
    # Report times at every 25 ms of a half-second bin, well after the window filled; a report has
    # every record that ended before its time.
    for step in range(20):
        now = T0 + 9 * 10**9 + step * 25_000_000
        f.consume([r for r in records if _end(r) <= now])
        records = [r for r in records if _end(r) > now]
        w = f.report(now)["window"]
        for (d, mem), n in STREAMS.items():
            rate = w["copies"][d][mem]["bytes_per_s"]
            assert rate == pytest.approx(n * PACED_RATE, rel=0.02), (d, mem, step, w["s"])
        assert w["pinned_allocs_per_s"] == pytest.approx(1 / PACE_S, rel=0.02)
        assert w["pinned_frees_per_s"] == pytest.approx(1 / PACE_S, rel=0.02)


def test_bins_are_bounded():
    f = CuptiFigures(started_ns=T0)
    f.consume(R.memcpy(start=T0 + i * BIN_NS) for i in range(10 * KEEP_BINS))
    assert len(f.bins) == KEEP_BINS


def test_a_malformed_record_is_counted_and_the_rest_summed():
    good = R.memcpy()
    bad = R.memcpy()
    del bad.bytes
    f = CuptiFigures(started_ns=T0)
    f.consume([bad, good, object()])
    rep = f.report()
    assert rep["record_errors"] == 2 and rep["copies"]["h2d"]["pinned"]["count"] == 1


def test_unknown_kinds_and_memory_kinds_are_skipped():
    rec = R.memory(memory_kind=4)  # ARRAY
    other = R.memcpy(kind=2)       # a MEMSET-kind record is not a copy
    _, rep = figures_of([rec, other])
    assert rep["pinned"]["allocs"] == 0 and rep["copies"]["h2d"]["pinned"]["count"] == 0


def test_no_record_object_is_kept():
    rec = R.memcpy()
    ref = weakref.ref(rec)
    f = CuptiFigures(started_ns=T0)
    f.consume([rec])
    del rec
    gc.collect()
    assert ref() is None  # a cupti-python record kept alive would pin its whole buffer


@pytest.mark.parametrize("nbytes, dur_ns", [(MIB, 20_000), (4096, 3_000), (64 * MIB, 1_300_000), (1, 7),
                                            (3 * MIB, 1_000_003), (1000, 1_000_000_000)])
def test_the_loops_rate_bucket_is_floor_of_four_log2(nbytes, dur_ns):
    f, _ = figures_of([R.memcpy(nbytes=nbytes, start=T0, dur_ns=dur_ns)])
    (bucket,) = [b for hist in f.rate_hist for b in hist]
    assert bucket == rate_bucket(nbytes / (dur_ns * 1e-9))


def test_every_slot_is_reached_once():
    recs = []
    for ck, host_field in ((1, "src_kind"), (2, "dst_kind")):
        for host in (2, 1, 5, 4):
            for nbytes in (4096, 256 * KIB, 4 * MIB, 32 * MIB):
                over = {"src_kind": 3, "dst_kind": 3, host_field: host}
                recs.append(R.memcpy(copy_kind=ck, nbytes=nbytes, start=T0, **{k: v for k, v in over.items()}))
    f, rep = figures_of(recs)
    assert all(s[0] == 1 for s in f.slots)
    for d in ("h2d", "d2h"):
        for mem in ("pinned", "pageable", "managed", "other"):
            assert {c: v["count"] for c, v in rep["copies"][d][mem]["size_classes"].items()} == \
                {"lt_64k": 1, "64k_1m": 1, "1m_16m": 1, "ge_16m": 1}
