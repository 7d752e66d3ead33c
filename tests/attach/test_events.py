"""The readers' parsers: binary ring-buffer pages and format files (rawpages.py), and trace_pipe's
text lines (events.py). Hand-made input, real formats, and fuzzing: neither parser raises."""
import struct

from hypothesis import given
from hypothesis import strategies as st

from pinmon.attach.events import Event, Lost, parse_line
from pinmon.attach.rawpages import MISSED_EVENTS, MISSED_STORED, parse_format, parse_page

FORMAT = """name: cuMemcpyHtoD_v2_0
ID: 2327
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:u64 host;\toffset:16;\tsize:8;\tsigned:0;
\tfield:u32 small;\toffset:24;\tsize:4;\tsigned:0;
\tfield:u64 arr[];\toffset:28;\tsize:16;\tsigned:0;

print fmt: "(%lx) host=%Lu small=%u arr={%Lu,%Lu}", REC->__probe_ip, REC->host, REC->small, REC->arr[0], REC->arr[1]
"""

RET_FORMAT = """name: cuMemHostAlloc_0_ret
ID: 2328
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long __probe_func;\toffset:8;\tsize:8;\tsigned:0;
\tfield:unsigned long __probe_ret_ip;\toffset:16;\tsize:8;\tsigned:0;
\tfield:s32 rc;\toffset:24;\tsize:4;\tsigned:1;
"""


def record(event_id, tid, host, small, arr):
    return struct.pack("<HBBiQQIQQ", event_id, 0, 0, tid, 0xdead, host, small, *arr)


def page(events, ts=1_000_000_000, commit_flags=0, missed=None, size=4096):
    body = b""
    for kind, payload in events:
        if kind == "rec":
            rec, delta = payload
            rec = rec + b"\0" * (-len(rec) % 4)
            if len(rec) // 4 <= 28:
                body += struct.pack("<I", (len(rec) // 4) | (delta << 5)) + rec
            else:
                body += struct.pack("<II", 0 | (delta << 5), len(rec) + 4) + rec
        elif kind == "extend":
            body += struct.pack("<II", 30 | ((payload & ((1 << 27) - 1)) << 5), payload >> 27)
        elif kind == "pad":
            body += struct.pack("<I", 29)
    commit = len(body) | commit_flags
    out = struct.pack("<QQ", ts, commit) + body
    if missed is not None:
        out += struct.pack("<Q", missed)
    return out + b"\0" * (size - len(out))


def test_a_format_file_gives_the_fields_and_a_record_decodes():
    layout = parse_format(FORMAT)
    assert layout.id == 2327 and layout.name == "cuMemcpyHtoD_v2_0"
    assert layout.names == ("host", "small", "arr") and layout.counts == (1, 1, 2)
    tid, fields = layout.decode(record(2327, 4242, 1 << 40, 7, (1, 2)))
    assert tid == 4242 and fields == {"host": 1 << 40, "small": 7, "arr": (1, 2)}
    assert layout.decode(b"\0" * 10) is None
    ret = parse_format(RET_FORMAT)
    assert ret.names == ("rc",)
    assert ret.decode(struct.pack("<HBBiQQi", 2328, 0, 0, 9, 1, 2, -2)) == (9, {"rc": -2})


def test_unreadable_formats_are_none():
    assert parse_format("") is None
    assert parse_format(FORMAT.replace("offset:4;\tsize:4", "offset:6;\tsize:4")) is None  # common_pid moved
    assert parse_format(FORMAT.replace("u32 small", "u8 small[4]")).counts == (1, 4, 2)
    assert parse_format(FORMAT.replace("offset:24", "offset:20")) is None  # overlapping fields
    assert parse_format(FORMAT.replace("size:16", "size:12")) is None     # an array of a partial element


def test_a_page_with_records_a_time_extend_a_long_record_and_padding():
    r1 = record(2327, 1, 10, 1, (0, 0))
    r2 = record(2327, 2, 20, 2, (0, 0)) + b"\0" * 100   # over 112 bytes: a length word
    p = page([("rec", (r1, 5)), ("extend", 1 << 30), ("rec", (r2, 7)), ("pad", None)])
    got = parse_page(p)
    assert not got.bad and got.missed is None
    assert [(ts, eid) for ts, eid, _ in got.records] == [(1_000_000_005, 2327), (1_000_000_005 + (1 << 30) + 7, 2327)]
    assert got.records[1][2][:len(r2) - 100] == r2[:-100]


def test_lost_events_are_reported():
    got = parse_page(page([("rec", (record(1, 1, 1, 1, (0, 0)), 0))], commit_flags=MISSED_EVENTS | MISSED_STORED,
                          missed=1234))
    assert got.missed == 1234
    assert parse_page(page([], commit_flags=MISSED_EVENTS)).missed == -1


def test_a_commit_past_the_page_is_bad_not_a_crash():
    p = struct.pack("<QQ", 0, 5000) + b"\x01" * 100
    assert parse_page(p).bad


@given(st.binary(max_size=600))
def test_any_page_parses_without_raising(data):
    got = parse_page(data)
    for ts, eid, rec in got.records:
        assert isinstance(ts, int) and 0 <= eid < 65536 and rec


@given(st.text(max_size=2000))
def test_any_format_parses_without_raising(text):
    parse_format(text)
    parse_format(FORMAT[: len(text) % len(FORMAT)] + text)


# --- trace_pipe lines ------------------------------------------------------------------------------

def test_lines_with_and_without_tgid_and_flags():
    e = parse_line("         python3-12405   (  12395) [000] DBZff   773.543289: cuMemcpyHtoD_v2_0: "
                   "(0x7f58b9a6b100) host=140019047087994 size=4096")
    assert e == Event(12405, 12395, 0, 773.543289, "cuMemcpyHtoD_v2_0", {"host": 140019047087994, "size": 4096})
    e = parse_line("  <...>-8118 (-------) [001] 535.111842: x_0: (0x1) n=3 sizes={1,2,3} bad=(fault)")
    assert e.tid == 8118 and e.tgid is None and e.fields == {"n": 3, "sizes": (1, 2, 3), "bad": None}
    assert parse_line(" x-9 [001] 2.5: cuMemHostAlloc_0_ret: (0x7f01 <- 0x5501) rc=0").fields == {"rc": 0}
    assert parse_line("CPU:3 [LOST 12 EVENTS]") == Lost(3, 12)
    assert parse_line("# tracer: nop") is None


def test_a_thread_name_cannot_forge_another_thread_id():
    # A name (15 characters at most) holding a fake "-<tid> [cpu] ts: event: (" must not be read as the
    # thread id: the id is the one the kernel printed last, before the CPU column.
    line = "a-5 [0] 1: e: (-777   [002] ....  10.000001: cuMemcpy_0: (0x1) size=9"
    e = parse_line(line)
    assert e is not None and e.tid == 777 and e.name == "cuMemcpy_0"


@given(st.text(max_size=300))
def test_any_line_parses_without_raising(text):
    got = parse_line(text)
    assert got is None or isinstance(got, (Event, Lost))
