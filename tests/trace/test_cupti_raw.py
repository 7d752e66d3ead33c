"""The CUPTI fast record path: layouts from dtypes, a buffer walked and read, figures as the slow path's.

The dtypes below repeat the offsets and sizes of cupti-python 13.0.1's ``activity_memcpy6_dtype``,
``activity_memory4_dtype``, ``activity_context3_dtype`` and ``activity_api_dtype`` (the C structs of
CUPTI 13.0) for the fields pinmon reads; a buffer is those records packed one after another, as CUPTI writes them.
"""
from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest

from pinmon.trace import cupti_raw
from pinmon.trace.cupti_figures import CuptiFigures, parse_objects
from pinmon.trace.cupti_raw import (
    KIND_CONTEXT,
    KIND_DRIVER,
    KIND_MEMCPY,
    KIND_MEMORY2,
    KIND_RUNTIME,
    BufferParser,
    Layout,
    LayoutError,
    RawCallbacks,
    layouts_of,
)

from . import cupti_records as rec


def _dtype(fields: dict, itemsize: int):
    names = list(fields)
    return np.dtype({"names": names, "formats": [fields[n][0] for n in names],
                     "offsets": [fields[n][1] for n in names], "itemsize": itemsize})


MEMCPY6 = _dtype({"kind": ("<i4", 0), "copy_kind": ("u1", 4), "src_kind": ("u1", 5), "dst_kind": ("u1", 6),
                  "flags_": ("u1", 7), "bytes": ("<u8", 8), "start": ("<u8", 16), "end": ("<u8", 24),
                  "device_id": ("<u4", 32), "context_id": ("<u4", 36), "stream_id": ("<u4", 40),
                  "correlation_id": ("<u4", 44), "copy_count": ("<u8", 88)}, 96)
MEMORY4 = _dtype({"kind": ("<i4", 0), "memory_operation_type": ("<i4", 4), "memory_kind": ("<i4", 8),
                  "correlation_id": ("<u4", 12), "address": ("<u8", 16), "bytes": ("<u8", 24),
                  "timestamp": ("<u8", 32), "process_id": ("<u4", 48)}, 128)
CONTEXT3 = _dtype({"kind": ("<i4", 0), "context_id": ("<u4", 4), "device_id": ("<u4", 8),
                   "null_stream_id": ("<u2", 14)}, 32)
API = _dtype({"kind": ("<i4", 0), "cbid": ("<u4", 4), "start": ("<u8", 8), "end": ("<u8", 16),
              "process_id": ("<u4", 24), "thread_id": ("<u4", 28), "correlation_id": ("<u4", 32),
              "return_value": ("<u4", 36)}, 40)
FAKE_CUPTI = SimpleNamespace(activity_memcpy5_dtype=np.dtype([("kind", "<i4")]), activity_memcpy6_dtype=MEMCPY6,
                             activity_memory4_dtype=MEMORY4, activity_context3_dtype=CONTEXT3,
                             activity_memory_dtype=np.dtype([("kind", "<i4")]), activity_api_dtype=API)
DTYPES = {"ActivityMemcpy6": MEMCPY6, "ActivityMemory4": MEMORY4, "ActivityContext3": CONTEXT3, "ActivityAPI": API}
BY_KIND = {KIND_MEMCPY: MEMCPY6, KIND_MEMORY2: MEMORY4, KIND_CONTEXT: CONTEXT3, KIND_DRIVER: API, KIND_RUNTIME: API}


def pack(records) -> bytearray:
    """Record objects (tests/trace/cupti_records) as CUPTI lays them out in a buffer."""
    out = bytearray()
    for r in records:
        dt = BY_KIND[int(r.kind)]
        a = np.zeros(1, dtype=dt)
        for name in dt.names:
            a[name] = getattr(r, name, 0) or 0
        out += a.tobytes()
    return out


def copy_tuples(parsed) -> list:
    """Every copy record of ``parsed`` as a tuple of MEMCPY_FIELDS, runs included, in order."""
    runs = [tuple(int(r[f]) for f in cupti_raw.MEMCPY_FIELDS) for run in parsed.memcpy_runs for r in run]
    return parsed.memcpy + runs


def parse_bytes(data: bytearray, parser=None):
    buf = (ctypes.c_char * max(len(data), 1)).from_buffer(data) if data else None
    parser = parser or BufferParser(layouts_of(FAKE_CUPTI))
    return parser.parse(ctypes.addressof(buf) if buf is not None else 0, len(data)), buf


def sample_records():
    return [rec.context(context_id=1, null_stream_id=7),
            rec.memory(op=1, memory_kind=2, nbytes=4 << 20, timestamp=10),
            rec.memcpy(copy_kind=1, src_kind=2, nbytes=1 << 20, start=100, dur_ns=20_000, stream_id=7,
                       context_id=1, device_id=0),
            rec.memcpy(copy_kind=2, src_kind=3, dst_kind=1, nbytes=64 << 20, start=30_000, dur_ns=5_000_000),
            rec.memory(op=2, memory_kind=2, nbytes=4 << 20, timestamp=6_000_000)]


def test_layouts_take_the_newest_record_version_and_read_fields_in_offset_order():
    layouts = layouts_of(FAKE_CUPTI)
    assert layouts[KIND_MEMCPY].size == 96 and layouts[KIND_MEMORY2].size == 128
    assert layouts[KIND_CONTEXT].struct.format == "<iI6xH"
    # API records: one unversioned struct for both kinds (activity_api_dtype), the call's id and its
    # correlation id read; MEMORY2's (memory4, not the first version) with correlation id and address.
    assert layouts[KIND_RUNTIME].size == layouts[KIND_DRIVER].size == 40
    assert layouts[KIND_RUNTIME].struct.format == "<iI24xII"
    assert layouts[KIND_MEMORY2].struct.format == "<iiiIQQQ"


@pytest.mark.parametrize("fields", [("bytes", "kind"), ("kind", "nope")])
def test_a_layout_that_does_not_fit_is_refused(fields):
    with pytest.raises(LayoutError):
        Layout(MEMCPY6, fields)


def test_a_buffer_reads_as_the_record_objects_do():
    records = sample_records()
    parsed, _ = parse_bytes(pack(records))
    slow = parse_objects(records)
    assert copy_tuples(parsed) == slow.memcpy and parsed.memory == slow.memory and parsed.context == slow.context
    assert copy_tuples(parsed)[0][4] == 1 << 20 and parsed.unknown == 0 and len(parsed.memcpy_runs) == 1


def test_api_records_read_between_the_others():
    """A register call's API record (runtime or driver) is read, and the walk goes on past it."""
    records = [rec.memory(op=1, memory_kind=2, nbytes=32 << 20, correlation_id=7, address=0x7F0000000000),
               rec.api(cbid=152, correlation_id=7), rec.api(kind=4, cbid=379, correlation_id=8, return_value=1),
               *sample_records()]
    parsed, _ = parse_bytes(pack(records))
    slow = parse_objects(records)
    assert parsed.api == slow.api == [(5, 152, 7, 0), (4, 379, 8, 1)]
    assert parsed.memory == slow.memory and parsed.memory[0] == (49, 1, 2, 7, 0x7F0000000000, 32 << 20, 0)
    assert parsed.copies == 2 and parsed.unknown == 0 and parsed.records == len(records)


def test_raw_and_object_paths_give_the_same_figures_on_recorded_records():
    records = rec.load(rec.H200)
    fast, slow = CuptiFigures(started_ns=0), CuptiFigures(started_ns=0)
    parsed, _ = parse_bytes(pack([r for r in records if int(r.kind) in (KIND_MEMCPY, KIND_MEMORY2, KIND_CONTEXT)]))
    fast.consume_parsed(parsed)
    slow.consume(records)
    assert fast.report(10**18) == slow.report(10**18)
    assert fast.records > 0


def test_an_unknown_kind_ends_the_walk_and_is_counted():
    data = pack(sample_records()[:3]) + np.array([77], dtype="<i4").tobytes() + bytes(60) \
        + pack(sample_records()[3:])
    parsed, _ = parse_bytes(data)
    assert parsed.copies == 1 and parsed.unknown == 1  # what follows has no known place


def test_a_walk_that_disagrees_with_cuptis_iterator_gives_way_to_it():
    records = sample_records()
    data = pack(records)
    truth_offsets = []

    def iterator(address, valid):  # CUPTI's own, had it padded records: not where the walk stepped
        truth_offsets.append(True)
        return [0, 32]

    parser = BufferParser(layouts_of(FAKE_CUPTI), iterator)
    parsed, _ = parse_bytes(data, parser)
    assert parser.use_iterator and parser.walk_mismatches == 1 and truth_offsets
    assert len(parsed.context) == 1 and len(parsed.memory) == 1 and not parsed.copies  # its offsets won
    # Where it agrees (context 32, memory 128, memcpy 96 bytes each) the walk stays trusted.
    parser = BufferParser(layouts_of(FAKE_CUPTI), lambda a, v: [0, 32, 160, 256, 352])
    parsed, _ = parse_bytes(data, parser)
    assert not parser.use_iterator and parsed.copies == 2


def test_the_walk_is_checked_on_the_first_buffers_only():
    calls = []
    data = pack(sample_records())

    def iterator(address, valid):
        calls.append(1)
        return [0, 32, 160, 256, 352]

    parser = BufferParser(layouts_of(FAKE_CUPTI), iterator)
    for _ in range(cupti_raw.CHECKED_BUFFERS + 3):
        parsed, _ = parse_bytes(data, parser)
        assert parsed.copies == 2
    assert len(calls) == cupti_raw.CHECKED_BUFFERS and not parser.use_iterator


class FakeLib:
    """libcupti's two entry points the raw path calls, as ctypes would call them."""

    def __init__(self):
        def register(request, complete):
            self.request, self.complete = request, complete
            return 0

        def next_record(*args):  # never called: the walk needs no check in these tests
            raise AssertionError

        # Plain functions, as ctypes' are: the raw path sets their argtypes and restype.
        self.cuptiActivityRegisterCallbacks = register
        self.cuptiActivityGetNextRecord = next_record
        self.request = self.complete = None


def test_kinds_and_api_calls_switched_through_libcupti_itself():
    """For kinds cupti-python 12.8 will not enable: libcupti's own switches, a status other than
    success raised, a library without them an AttributeError."""
    lib, asked = FakeLib(), []

    def entry(name, status=0):
        def call(*args):
            asked.append((name, *args))
            return status
        return call

    for name in ("cuptiActivityEnable", "cuptiActivityDisable", "cuptiActivityEnableRuntimeApi"):
        setattr(lib, name, entry(name))
    lib.cuptiActivityEnableDriverApi = entry("cuptiActivityEnableDriverApi", status=1)  # INVALID_PARAMETER
    cb = RawCallbacks(lib, layouts_of(FAKE_CUPTI), lambda: 0, lambda parsed: None)
    cb.enable_kind(5)
    cb.switch_api_call(5, 152, 1)
    cb.disable_kind(5)
    assert asked == [("cuptiActivityEnable", 5), ("cuptiActivityEnableRuntimeApi", 152, 1),
                     ("cuptiActivityDisable", 5)]
    assert lib.cuptiActivityEnableRuntimeApi.argtypes == [ctypes.c_uint32, ctypes.c_uint8]
    with pytest.raises(OSError, match="cuptiActivityEnableDriverApi returned 1"):
        cb.switch_api_call(4, 276, 0)
    del lib.cuptiActivityEnable
    with pytest.raises(AttributeError):
        cb.enable_kind(4)


def test_callbacks_hand_out_aligned_buffers_and_feed_parsed_records():
    lib, got = FakeLib(), []
    budget = [2]

    def request_bytes():
        budget[0] -= 1
        return 1 << 16 if budget[0] >= 0 else 0

    cb = RawCallbacks(lib, layouts_of(FAKE_CUPTI), request_bytes, got.append)
    cb.parser.next_record = None
    cb.register()
    ptr, size, maxn = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t(99)
    lib.request(ctypes.pointer(ptr), ctypes.pointer(size), ctypes.pointer(maxn))
    assert ptr.value % 8 == 0 and size.value == 1 << 16 and maxn.value == 0 and cb.outstanding == 1
    data = pack(sample_records())
    ctypes.memmove(ptr.value, bytes(data), len(data))
    lib.complete(None, 0, ptr.value, size.value, len(data))
    assert cb.outstanding == 0 and len(got) == 1 and got[0].copies == 2
    lib.request(ctypes.pointer(ptr), ctypes.pointer(size), ctypes.pointer(maxn))
    lib.request(ctypes.pointer(ptr), ctypes.pointer(size), ctypes.pointer(maxn))  # over budget: none
    assert not ptr.value and size.value == 0


def test_a_callback_that_raises_never_reaches_cupti():
    lib = FakeLib()

    def boom(parsed):
        raise RuntimeError("consumer broke")

    cb = RawCallbacks(lib, layouts_of(FAKE_CUPTI), lambda: 4096, boom)
    cb.register()
    ptr, size, maxn = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
    lib.request(ctypes.pointer(ptr), ctypes.pointer(size), ctypes.pointer(maxn))
    lib.complete(None, 0, ptr.value, size.value, 0)
    assert cb.callback_errors == 1 and cb.outstanding == 0


def test_the_loaded_library_is_found_in_the_maps(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/libc.so.6\n"
                    "7f20-7f30 r-xp 00000000 08:01 13 /opt/x/nvidia/cu13/lib/libcupti.so.13\n")
    assert cupti_raw.loaded_libcupti(str(maps)) == "/opt/x/nvidia/cu13/lib/libcupti.so.13"
    maps.write_text("7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/libc.so.6\n")
    assert cupti_raw.loaded_libcupti(str(maps)) is None


def random_records(seed: int, n: int = 3000, alloc_share: float = 0.03, max_step_ns: int = 400_000_000):
    """A busy buffer's worth of records: runs of copies of every kind and size, with allocations
    (``alloc_share`` of the records: they end the runs), contexts and the odd device-to-device copy
    between them; each record starts up to ``max_step_ns`` after the one before."""
    import random

    rng = random.Random(seed)
    out = [rec.context(context_id=1, null_stream_id=7), rec.context(context_id=2, null_stream_id=9)]
    t = 1_000_000
    for _ in range(n):
        r = rng.random()
        if r < alloc_share:
            out.append(rec.memory(op=rng.choice((1, 2)), memory_kind=rng.choice((2, 3, 5)),
                                  nbytes=rng.choice((4096, 1 << 20, 3 << 20)), timestamp=t))
            continue
        size = rng.choice((4096, 100_000, 1 << 20, 5 << 20, 64 << 20))
        copy_kind = rng.choice((1, 1, 2, 2, 8))
        host = rng.choice((1, 2, 2, 5, 4))
        dur = rng.choice((0, rng.randrange(1_000, 3_000_000)))
        out.append(rec.memcpy(copy_kind=copy_kind, src_kind=host if copy_kind == 1 else 3,
                              dst_kind=host if copy_kind == 2 else 3, nbytes=size, start=t, dur_ns=dur,
                              copy_count=rng.choice((1, 1, 1, 4)), device_id=rng.choice((0, 1)),
                              context_id=rng.choice((1, 2)), stream_id=rng.choice((7, 9, 13))))
        t += rng.randrange(1_000, max_step_ns)
    return out


@pytest.mark.parametrize("seed, alloc_share, max_step_ns", [
    (1, 0.03, 400_000_000), (2, 0.03, 400_000_000), (3, 0.03, 400_000_000),  # short runs, many bins
    (4, 0.002, 400_000_000),  # long runs spanning many bins
    (5, 0.002, 100_000),      # long runs, each inside a bin or two
])
def test_copy_runs_summed_as_arrays_match_record_by_record(seed, alloc_share, max_step_ns):
    from pinmon.trace.cupti_figures import SMALL_RUN

    records = random_records(seed, alloc_share=alloc_share, max_step_ns=max_step_ns)
    fast, slow = CuptiFigures(started_ns=0), CuptiFigures(started_ns=0)
    parsed, _ = parse_bytes(pack(records))
    assert parsed.memcpy_runs and sum(len(r) for r in parsed.memcpy_runs) > 2000
    if alloc_share < 0.01:  # the array path runs, not only the record-by-record one
        assert any(len(r) >= SMALL_RUN for r in parsed.memcpy_runs)
    fast.consume_parsed(parsed)
    slow.consume(records)
    assert fast.report(10**19) == slow.report(10**19)
    assert fast.records == slow.records == len(records) and fast.errors == 0


def test_without_numpy_the_tuples_path_gives_the_same_figures():
    records = random_records(4, 500)
    parser = BufferParser(layouts_of(FAKE_CUPTI), use_numpy=False)
    parsed, _ = parse_bytes(pack(records), parser)
    assert not parsed.memcpy_runs and parsed.memcpy
    a, b = CuptiFigures(started_ns=0), CuptiFigures(started_ns=0)
    a.consume_parsed(parsed)
    b.consume(records)
    assert a.report(10**19) == b.report(10**19)
