"""Sums of CUPTI activity records: the figures of the ``cupti`` part of a ``pinmon.trace/1`` report.

``CuptiFigures.consume(records)`` is the body of CUPTI's buffer-completed callback: it reads each
record's fields and adds them to counters, keeping no record (a ``cupti-python`` record object holds
its whole buffer alive). ``report(now_ns)`` turns the counters into the report's dict. Records are
anything with the attributes of ``cupti.ActivityMemcpy6`` (MEMCPY), ``cupti.ActivityMemory4``
(MEMORY2), ``cupti.ActivityContext3`` (CONTEXT) and ``cupti.ActivityAPI`` (DRIVER, RUNTIME); the enum
values below are CUPTI's C ABI.

Figures, per process:
- copies by direction (h2d, d2h), host memory kind (pinned, pageable, managed, other) and size
  class: bytes, copies, summed GPU time, achieved rate (bytes over summed GPU time), and the median
  and 10th percentile of per-copy rates from a log histogram (quarter-octave buckets, ~19% wide);
- the same over a window of the last ``WINDOW_S`` to ``WINDOW_S`` + 0.5 seconds of GPU time: whole
  half-second bins (stamped with each copy's end) over the time they span (``window_span``), with the copies of at least ``BULK_BYTES`` from pinned memory per device and the share of
  them on a context's legacy default (null) stream;
- pinned host memory from MEMORY2: bytes held, peak, allocations and releases with their rates,
  the median of recent allocation sizes and a power-of-two histogram; managed and device bytes held;
- of the pinned bytes, those registered (``cudaHostRegister``), where the engine selected the API
  records of the register calls (``cupti_registrations``).
"""
from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .cupti_raw import (
    API_FIELDS,
    CONTEXT_FIELDS,
    KIND_CONTEXT,
    KIND_DRIVER,
    KIND_MEMCPY,
    KIND_MEMORY2,
    KIND_RUNTIME,
    MEMCPY_FIELDS,
    MEMORY_FIELDS,
    Parsed,
)
from .cupti_registrations import Registrations

if TYPE_CHECKING:  # NumPy is imported where a run of copy records is summed
    import numpy

    from .cupti_raw import Fields
    from .cupti_types import Record

Sums = list[int]         # [copies, bytes, gpu_ns]
RateHist = dict[int, int]  # rate bucket -> copies

# CUPTI enum values (cupti_activity.h; the same in cupti-python's IntEnums).
COPY_HTOD, COPY_DTOH = 1, 2
COPY_KIND_NAMES = {0: "unknown", 1: "h2d", 2: "d2h", 3: "h2a", 4: "a2h", 5: "a2a", 6: "a2d", 7: "d2a",
                   8: "d2d", 9: "h2h", 10: "p2p"}
MEM_PAGEABLE, MEM_PINNED, MEM_DEVICE, MEM_ARRAY, MEM_MANAGED = 1, 2, 3, 4, 5
OP_ALLOCATION, OP_RELEASE = 1, 2
FLAG_MEMCPY_ASYNC = 1

HOST_KINDS = ("pinned", "pageable", "managed", "other")
_HOST_KIND = {MEM_PINNED: 0, MEM_PAGEABLE: 1, MEM_MANAGED: 2}  # anything else: "other"
DIRECTIONS = ("h2d", "d2h")
SIZE_CLASSES = ("lt_64k", "64k_1m", "1m_16m", "ge_16m")  # as the hooks' (state.SIZE_CLASSES)
BULK_BYTES = 1 << 20
WINDOW_S = 5.0
BIN_NS = 500_000_000
KEEP_BINS = 32                # 16 s of bins
RATE_BUCKETS_PER_OCTAVE = 4
RECENT_ALLOCS = 4096
MAX_DEVICES = 64
# Shorter runs of copies are summed record by record: NumPy's set-up of a run costs ~0.15 ms, a record
# summed in Python ~1 us (tests/trace/test_cupti_raw.py compares the two paths' figures).
SMALL_RUN = 128

# Slot layout of the lifetime copy table: (direction, host kind, size class) -> [copies, bytes, gpu_ns]
_N_SLOTS = len(DIRECTIONS) * len(HOST_KINDS) * len(SIZE_CLASSES)
assert len(HOST_KINDS) == len(SIZE_CLASSES) == 4  # the hot loop shifts by 2 bits for each


def _slot(d: int, h: int, c: int) -> int:
    return (d * len(HOST_KINDS) + h) * len(SIZE_CLASSES) + c


def size_class_index(n: int) -> int:
    if n < 1 << 20:
        return 0 if n < 64 << 10 else 1
    return 2 if n < 16 << 20 else 3


def rate_bucket(bytes_per_s: float) -> int:
    return math.floor(math.log2(bytes_per_s) * RATE_BUCKETS_PER_OCTAVE)


def bucket_rate(bucket: int) -> float:
    """The geometric middle of a rate bucket, bytes/s."""
    return math.pow(2.0, (bucket + 0.5) / RATE_BUCKETS_PER_OCTAVE)


def percentile(hist: dict, q: float) -> float | None:
    """The ``q`` quantile (0..1) of a rate histogram {bucket: count}, or None when empty."""
    total = sum(hist.values())
    if total <= 0:
        return None
    rank = q * (total - 1)
    seen = 0
    for b in sorted(hist):
        seen += hist[b]
        if seen > rank:
            return bucket_rate(b)
    return bucket_rate(max(hist))


class _Bin:
    """Half a second of GPU time: copy sums per (direction, host kind), bulk pinned ones per device,
    allocation counts."""

    __slots__ = ("alloc_bytes", "allocs", "bulk", "copies", "frees")

    def __init__(self) -> None:
        self.copies: list[Sums] = [[0, 0, 0] for _ in range(_N_SLOTS)]  # per lifetime slot
        # (direction, device) -> [bytes, gpu_ns, null-stream bytes, copies]
        self.bulk: dict[tuple[int, int], list[int]] = {}
        self.allocs = 0
        self.frees = 0
        self.alloc_bytes = 0


class CuptiFigures:
    """Thread-safe sums of MEMCPY/MEMORY2/CONTEXT records. ``consume`` never raises."""

    def __init__(self, started_ns: int | None = None):
        self.lock = threading.Lock()
        self.started_ns = started_ns  # CUPTI time the activities were enabled: the window starts there
        self.records = 0
        self.errors = 0
        self.slots: list[Sums] = [[0, 0, 0] for _ in range(_N_SLOTS)]
        self.rate_hist: list[RateHist] = [{} for _ in range(_N_SLOTS)]
        self.other: dict[str, Sums] = {}  # copy kind name (d2d, h2h, p2p, arrays) -> sums
        self.bins: dict[int, _Bin] = {}
        self.null_stream: dict[int, int] = {}  # context id -> its legacy default stream id
        self.devices: set[int] = set()
        self.latest_ns = 0
        # MEMORY2
        self.held = {MEM_PINNED: 0, MEM_MANAGED: 0, MEM_DEVICE: 0}
        self.pinned_peak = 0
        self.pinned_allocs = 0
        self.pinned_alloc_bytes = 0
        self.pinned_frees = 0
        self.pinned_free_bytes = 0
        self.recent_sizes: deque[int] = deque(maxlen=RECENT_ALLOCS)
        self.size_hist: dict[int, int] = {}
        self.registrations = Registrations()

    def track_registrations(self, register_calls: frozenset[tuple[int, int]]) -> None:
        """Tell registered ranges apart from now on: API records of ``register_calls`` ((activity
        kind, cbid) of the calls that register host memory) come with the MEMORY2 records."""
        with self.lock:
            self.registrations.register_calls = frozenset(register_calls)

    # --- records -------------------------------------------------------------------------

    def consume(self, records: Iterable[Record]) -> None:
        """Add every record of one completed buffer given as record objects (``cupti-python``'s, or
        anything with their attributes). A record that does not read is counted in ``errors``."""
        self.consume_parsed(parse_objects(records, self))

    def consume_parsed(self, parsed: Parsed) -> None:
        """Add one buffer's records read as tuples (``cupti_raw``; fields as in its *_FIELDS)."""
        with self.lock:
            self.errors += parsed.unknown
            for rec in parsed.context:
                self.null_stream[rec[1]] = rec[2]
            registrations = self.registrations
            for api in parsed.api:  # before the buffer's MEMORY2 records: a call's record claims its allocation
                try:
                    registrations.api_call(api[0], api[1], api[2], api[3])
                except Exception:
                    self.errors += 1
            for rec in parsed.memory:
                try:
                    self._memory(rec)
                except Exception:
                    self.errors += 1
            try:
                self._add_copies(parsed.memcpy)
            except Exception:
                self.errors += 1
            for run in parsed.memcpy_runs:
                try:
                    self._add_copy_run(run)
                except Exception:
                    self.errors += len(run)
            self.records += parsed.records

    def _add_copies(self, memcpys: list[Fields]) -> None:
        # The hot loop of the tracer (every copy of the process): locals, tuples, no calls but for
        # the rare records. Fields: kind, copy_kind, src_kind, dst_kind, bytes, start, end,
        # device_id, context_id, stream_id, copy_count.
        slots, hists, bins = self.slots, self.rate_hist, self.bins
        frexp = math.frexp
        latest = self.latest_ns
        last_key: int | None = None
        last_bin: _Bin  # set by the first record: its key is never None
        try:
            for a in memcpys:
                ck = a[1]
                if ck == COPY_HTOD:
                    d, host = 0, a[2]
                elif ck == COPY_DTOH:
                    d, host = 1, a[3]
                else:
                    self._other(a, ck)
                    continue
                nbytes, start, end = a[4], a[5], a[6]
                dur = end - start if end > start else 0
                copies = a[10] or 1
                per = nbytes // copies if copies != 1 else nbytes
                h = 0 if host == MEM_PINNED else 1 if host == MEM_PAGEABLE else 2 if host == MEM_MANAGED else 3
                if per < 1 << 20:  # noqa: SIM108  (two levels of size classes)
                    cls = 0 if per < 64 << 10 else 1
                else:
                    cls = 2 if per < 16 << 20 else 3
                i = ((d << 2) + h << 2) + cls  # _slot(d, h, cls) with 4 host kinds and 4 classes
                s = slots[i]
                s[0] += copies
                s[1] += nbytes
                s[2] += dur
                if dur > 0 and nbytes > 0:
                    # floor(log2(rate) * 4) from the float's exponent and mantissa (m in [0.5, 1)).
                    m, e = frexp(nbytes * 1e9 / dur)
                    rb = ((e - 1) << 2) + (m >= 0.5946035575013605) + (m >= 0.7071067811865476) \
                        + (m >= 0.8408964152537145)
                    hist = hists[i]
                    hist[rb] = hist.get(rb, 0) + copies
                if end > latest:
                    latest = end
                key = end // BIN_NS
                if key != last_key:
                    last_bin = bins.get(key) or self._new_bin(key)
                    last_key = key
                c = last_bin.copies[i]
                c[0] += copies
                c[1] += nbytes
                c[2] += dur
                if h == 0 and per >= BULK_BYTES:
                    self._bulk(last_bin, d, a, nbytes, dur, copies)
        finally:
            if latest > self.latest_ns:
                self.latest_ns = latest

    def _add_copy_run(self, run: numpy.ndarray) -> None:
        """A run of copy records as a NumPy record array: the same sums as ``_add_copies``, in a
        few array operations for the whole run instead of Python steps for each record."""
        import numpy as np

        if len(run) < SMALL_RUN:
            # One conversion of the run to tuples of Python ints, in MEMCPY_FIELDS order.
            self._add_copies(run[list(MEMCPY_FIELDS)].tolist())
            return
        ck = run["copy_kind"].astype(np.int64)
        dtoh = ck == COPY_DTOH
        sel = (ck == COPY_HTOD) | dtoh
        if not sel.all():
            for j in np.flatnonzero(~sel):
                r = run[int(j)]
                self._other(tuple(int(r[f]) for f in MEMCPY_FIELDS), int(r["copy_kind"]))
            run, dtoh = run[sel], dtoh[sel]
            if not len(run):
                return
        d = dtoh.astype(np.int64)
        host = np.where(dtoh, run["dst_kind"], run["src_kind"]).astype(np.int64)
        h = np.select([host == MEM_PINNED, host == MEM_PAGEABLE, host == MEM_MANAGED], [0, 1, 2], 3)
        nbytes = run["bytes"].astype(np.int64)
        start, end = run["start"].astype(np.int64), run["end"].astype(np.int64)
        dur = np.where(end > start, end - start, 0)
        copies = run["copy_count"].astype(np.int64)
        copies = np.where(copies == 0, 1, copies)
        per = nbytes // copies
        cls = np.searchsorted(np.array([64 << 10, 1 << 20, 16 << 20]), per, side="right")
        i = ((d << 2) + h << 2) + cls
        totals = _grouped(i, copies, nbytes, dur)
        for slot, (n, nb, t) in totals.items():
            s = self.slots[slot]
            s[0] += n
            s[1] += nb
            s[2] += t
        timed = (dur > 0) & (nbytes > 0)
        if timed.any():
            m, e = np.frexp(nbytes[timed] * 1e9 / dur[timed])
            rb = ((e.astype(np.int64) - 1) << 2) + (m >= 0.5946035575013605) + (m >= 0.7071067811865476) \
                + (m >= 0.8408964152537145)
            key = i[timed] * 4096 + rb
            keys, inv = np.unique(key, return_inverse=True)
            counts = np.bincount(inv, weights=copies[timed])
            for kk, count in zip(keys.tolist(), counts.tolist()):
                hist = self.rate_hist[kk // 4096]
                hist[kk % 4096] = hist.get(kk % 4096, 0) + int(count)
        latest = int(end.max())
        if latest > self.latest_ns:
            self.latest_ns = latest
        binkey = end // BIN_NS
        first_bin, last_bin = int(binkey.min()), int(binkey.max())
        for bk in ([first_bin] if first_bin == last_bin else np.unique(binkey).tolist()):
            inbin = binkey == bk
            b = self.bins.get(bk) or self._new_bin(bk)
            # A run inside one bin (most: a bin is 0.5 s) sums per bin as it did in all.
            grouped = (totals if first_bin == last_bin
                       else _grouped(i[inbin], copies[inbin], nbytes[inbin], dur[inbin]))
            for slot, (n, nb, t) in grouped.items():
                c = b.copies[slot]
                c[0] += n
                c[1] += nb
                c[2] += t
            bulk = inbin & (h == 0) & (per >= BULK_BYTES)
            if bulk.any():
                dev, ctx, stream = run["device_id"][bulk], run["context_id"][bulk], run["stream_id"][bulk]
                for dd, dv in set(zip(d[bulk].tolist(), dev.tolist())):
                    g = (d[bulk] == dd) & (dev == dv)
                    if len(self.devices) < MAX_DEVICES:
                        self.devices.add(dv)
                    acc = b.bulk.get((dd, dv))
                    if acc is None:
                        acc = b.bulk[(dd, dv)] = [0, 0, 0, 0]
                    acc[0] += int(nbytes[bulk][g].sum())
                    acc[1] += int(dur[bulk][g].sum())
                    acc[3] += int(copies[bulk][g].sum())
                    ctx_g = ctx[g]
                    null = np.full(len(ctx_g), -1, dtype=np.int64)
                    for ctx_id in np.unique(ctx_g).tolist():
                        null[ctx_g == ctx_id] = self.null_stream.get(ctx_id, -1)
                    acc[2] += int(nbytes[bulk][g][stream[g].astype(np.int64) == null].sum())

    def _new_bin(self, key: int) -> _Bin:
        b = self.bins[key] = _Bin()
        if len(self.bins) > KEEP_BINS:
            for old in sorted(self.bins)[:-KEEP_BINS]:
                del self.bins[old]
        return b

    def _bin(self, t_ns: int) -> _Bin:
        return self.bins.get(t_ns // BIN_NS) or self._new_bin(t_ns // BIN_NS)

    def _other(self, a: Fields, ck: int) -> None:
        """A copy that is neither host-to-device nor device-to-host (d2d, h2h, p2p, arrays)."""
        name = COPY_KIND_NAMES.get(ck, str(ck))
        o = self.other.get(name)
        if o is None:
            o = self.other[name] = [0, 0, 0]
        o[0] += a[10] or 1
        o[1] += a[4]
        o[2] += max(a[6] - a[5], 0)

    def _bulk(self, b: _Bin, d: int, a: Fields, nbytes: int, dur: int, copies: int) -> None:
        dev = a[7]
        if len(self.devices) < MAX_DEVICES:
            self.devices.add(dev)
        k = b.bulk.get((d, dev))
        if k is None:
            k = b.bulk[(d, dev)] = [0, 0, 0, 0]
        k[0] += nbytes
        k[1] += dur
        k[3] += copies
        null = self.null_stream.get(a[8])
        if null is not None and a[9] == null:
            k[2] += nbytes

    def _memory(self, a: Fields) -> None:
        """One MEMORY2 tuple: kind, memory_operation_type, memory_kind, correlation_id, address, bytes,
        timestamp."""
        mk = a[2]
        if mk not in self.held:
            return
        op = a[1]
        nbytes = int(a[5])
        if op == OP_ALLOCATION:
            self.held[mk] += nbytes
            if mk == MEM_PINNED:
                self.pinned_allocs += 1
                self.pinned_alloc_bytes += nbytes
                self.recent_sizes.append(nbytes)
                b2 = 1 << (nbytes.bit_length() - 1) if nbytes > 0 else 0
                self.size_hist[b2] = self.size_hist.get(b2, 0) + 1
                if self.held[mk] > self.pinned_peak:
                    self.pinned_peak = self.held[mk]
                self.registrations.allocated(int(a[3]), int(a[4]), nbytes)
        elif op == OP_RELEASE:
            self.held[mk] -= nbytes
            if mk == MEM_PINNED:
                self.pinned_frees += 1
                self.pinned_free_bytes += nbytes
                self.registrations.released(int(a[4]))
        else:
            return
        if mk == MEM_PINNED:
            t = int(a[6])
            if t > self.latest_ns:
                self.latest_ns = t
            b = self._bin(t)
            if op == OP_ALLOCATION:
                b.allocs += 1
                b.alloc_bytes += nbytes
            else:
                b.frees += 1

    # --- the report ------------------------------------------------------------------------

    def report(self, now_ns: int | None = None) -> dict:
        """The ``cupti`` figures. ``now_ns``: the current CUPTI timestamp (window end); default the
        latest record's."""
        with self.lock:
            now = now_ns if now_ns is not None else self.latest_ns
            return {
                "records": self.records, "record_errors": self.errors,
                "copies": self._copies(),
                "other_copies": {k: {"count": v[0], "bytes": v[1], "gpu_s": v[2] * 1e-9}
                                 for k, v in sorted(self.other.items())},
                "window": self._window(now),
                "pinned": self._pinned(),
                "managed_bytes": max(self.held[MEM_MANAGED], 0),
                "device_bytes": max(self.held[MEM_DEVICE], 0),
                # MEMORY2 has no flags: a write-combined cudaHostAlloc is PINNED like any other.
                "write_combined_bytes": None,
            }

    def _copies(self) -> dict:
        out: dict[str, dict[str, dict]] = {}
        for d, dname in enumerate(DIRECTIONS):
            per = out[dname] = {}
            for h, hname in enumerate(HOST_KINDS):
                total: Sums = [0, 0, 0]
                hist_all: RateHist = {}
                classes: dict[str, dict] = {}
                for c, cname in enumerate(SIZE_CLASSES):
                    i = _slot(d, h, c)
                    s, hist = self.slots[i], self.rate_hist[i]
                    for j in range(3):
                        total[j] += s[j]
                    for b, n in hist.items():
                        hist_all[b] = hist_all.get(b, 0) + n
                    classes[cname] = _figures(s, hist)
                row = _figures(total, hist_all)
                row["size_classes"] = classes
                per[hname] = row
        return out

    def window_span(self, now_ns: int) -> tuple[int, int]:
        """(first bin key, start ns) of the window that ends at ``now_ns``.

        The window is made of whole bins, so its start is the start of its first bin: the bin that
        holds ``now_ns - WINDOW_S`` (the window spans WINDOW_S to WINDOW_S + one bin), or the moment
        collection started where that is later. Sums over whole bins divided by the time those bins
        span are unbiased at every phase of the bins (a bin that straddles the start, counted whole but
        divided by only its part inside the window, reads up to one bin's worth high: x1.1 at most)."""
        k0 = (now_ns - int(WINDOW_S * 1e9)) // BIN_NS
        lo_ns = k0 * BIN_NS
        first = self.started_ns
        if first is None and self.bins:
            first = min(self.bins) * BIN_NS  # collection's start unknown: its first bin's
        if first is not None and first > lo_ns:
            lo_ns = first
            k0 = first // BIN_NS
        return k0, lo_ns

    def _window(self, now_ns: int) -> dict:
        k0, lo_ns = self.window_span(now_ns)
        keys = [k for k in self.bins if k0 <= k and k * BIN_NS <= now_ns]
        span_s = max(now_ns - lo_ns, 0) * 1e-9
        slots: list[Sums] = [[0, 0, 0] for _ in range(_N_SLOTS)]
        bulk: dict[tuple[str, int], list[int]] = {}
        allocs = frees = alloc_bytes = 0
        for k in keys:
            b = self.bins[k]
            for i, src in enumerate(b.copies):
                dst = slots[i]
                for j in range(3):
                    dst[j] += src[j]
            for (d, dev), v in b.bulk.items():
                acc = bulk.setdefault((DIRECTIONS[d], dev), [0, 0, 0, 0])
                for j in range(4):
                    acc[j] += v[j]
            allocs += b.allocs
            frees += b.frees
            alloc_bytes += b.alloc_bytes

        def rate(n: int) -> float | None:
            return n / span_s if span_s > 0 else None

        out_copies: dict[str, dict[str, dict]] = {}
        for d, dname in enumerate(DIRECTIONS):
            out_copies[dname] = {}
            for h, hname in enumerate(HOST_KINDS):
                total: Sums = [0, 0, 0]
                classes: dict[str, dict] = {}
                for c, cname in enumerate(SIZE_CLASSES):
                    s = slots[_slot(d, h, c)]
                    for j in range(3):
                        total[j] += s[j]
                    classes[cname] = _window_figures(s, rate)
                row = _window_figures(total, rate)
                row["size_classes"] = classes
                out_copies[dname][hname] = row
        out_bulk: dict[str, dict[str, dict]] = {}
        for (dname, dev), (nbytes, ns, null_bytes, n) in sorted(bulk.items()):
            out_bulk.setdefault(dname, {})[str(dev)] = {
                "count": n, "bytes": nbytes, "gpu_s": ns * 1e-9,
                "achieved_bytes_per_s": nbytes / (ns * 1e-9) if ns > 0 else None,
                "default_stream_bytes": null_bytes if self.null_stream else None}
        return {"s": span_s, "copies": out_copies, "pinned_bulk": out_bulk,
                "bulk_min_bytes": BULK_BYTES,
                "pinned_allocs_per_s": rate(allocs), "pinned_frees_per_s": rate(frees),
                "pinned_alloc_bytes_per_s": rate(alloc_bytes)}

    def _pinned(self) -> dict:
        sizes = sorted(self.recent_sizes)
        return {"bytes": max(self.held[MEM_PINNED], 0), "peak_bytes": self.pinned_peak,
                "allocs": self.pinned_allocs, "alloc_bytes": self.pinned_alloc_bytes,
                "frees": self.pinned_frees, "free_bytes": self.pinned_free_bytes,
                "median_alloc_bytes": sizes[len(sizes) // 2] if sizes else None,
                "histogram": {str(k): v for k, v in sorted(self.size_hist.items())},
                **self.registrations.report()}

    def device_ids(self) -> list[int]:
        with self.lock:
            return sorted(self.devices)


def _window_figures(s: Sums, rate: Callable[[int], float | None]) -> dict:
    n, nbytes, ns = s
    return {"count": n, "bytes": nbytes, "gpu_s": ns * 1e-9, "bytes_per_s": rate(nbytes),
            "achieved_bytes_per_s": nbytes / (ns * 1e-9) if ns > 0 else None}


def _figures(s: Sums, hist: RateHist) -> dict:
    n, nbytes, ns = s
    return {"count": n, "bytes": nbytes, "gpu_s": ns * 1e-9,
            "achieved_bytes_per_s": nbytes / (ns * 1e-9) if ns > 0 else None,
            "rate_p50": percentile(hist, 0.5), "rate_p10": percentile(hist, 0.1)}


def _grouped(index: numpy.ndarray, copies: numpy.ndarray, nbytes: numpy.ndarray,
             dur: numpy.ndarray) -> dict[int, tuple[int, int, int]]:
    """{slot: (copies, bytes, gpu_ns)} summed per value of ``index`` (exact integer sums)."""
    import numpy as np

    keys, inv = np.unique(index, return_inverse=True)
    out = {}
    for j, k in enumerate(keys.tolist()):
        m = inv == j
        out[k] = (int(copies[m].sum()), int(nbytes[m].sum()), int(dur[m].sum()))
    return out


def parse_objects(records: Iterable[Record], figures: CuptiFigures | None = None) -> Parsed:
    """Record objects (attributes named as CUPTI's fields) as ``Parsed`` tuples: the slow path,
    for ``cupti-python``'s own callbacks and for tests. A record that does not read is skipped and
    counted in ``unknown``."""
    p = Parsed()
    by_kind = {KIND_MEMCPY: (MEMCPY_FIELDS, p.memcpy), KIND_MEMORY2: (MEMORY_FIELDS, p.memory),
               KIND_CONTEXT: (CONTEXT_FIELDS, p.context), KIND_DRIVER: (API_FIELDS, p.api),
               KIND_RUNTIME: (API_FIELDS, p.api)}
    for a in records:
        try:
            entry = by_kind.get(int(a.kind))
            if entry is None:
                continue
            fields, out = entry
            out.append(tuple(int(getattr(a, f) or 0) if f != "copy_count" else int(getattr(a, f, 1) or 1)
                             for f in fields))
        except Exception:
            p.unknown += 1
    return p
