"""Recordings: JSON lines (plain and gzip) written by Recorder and read back by ReplaySource."""
import gzip
import json

import pytest

from pinmon.model import HostMemory, Snapshot
from pinmon.model.source import Source
from pinmon.recording import Recorder, RecordingError, RecordingReader, default_recording_path, read_snapshot_file
from pinmon.recording.replay import ReplaySource


def snap(t):
    return Snapshot(time=float(t), host=HostMemory(hostname="h", mem_total_bytes=t), interval_s=1.0)


@pytest.mark.parametrize("name", ["rec.jsonl", "rec.jsonl.gz"])
def test_round_trip(tmp_path, name):
    path = str(tmp_path / name)
    with Recorder(path) as rec:
        for t in range(5):
            rec.write(snap(t))
    src = ReplaySource(path)
    assert isinstance(src, Source) and src.live is False
    got = []
    while (s := src.snapshot()) is not None:
        got.append(s)
    assert [s.time for s in got] == [0, 1, 2, 3, 4]
    assert all(s.source == "replay" for s in got)
    assert src.snapshot() is None
    src.close()
    src.close()


def test_the_reader_reads_what_the_recorder_wrote_as_it_is(tmp_path):
    # The format's own reader: the snapshots in order, unmarked (marking a replay is the Source's job),
    # and a bad line named by its number.
    path = tmp_path / "r.jsonl"
    with Recorder(str(path)) as rec:
        for t in range(3):
            rec.write(snap(t))
    reader = RecordingReader(str(path))
    got = [reader.next_snapshot() for _ in range(3)]
    assert got == [snap(0), snap(1), snap(2)] and reader.next_snapshot() is None
    reader.close()
    assert reader.next_snapshot() is None
    with open(path, "a") as f:
        f.write("{oops\n")
    reader = RecordingReader(str(path))
    for _ in range(3):
        reader.next_snapshot()
    with pytest.raises(RecordingError, match=r"r\.jsonl:4: not JSON"):
        reader.next_snapshot()
    reader.close()


def test_gzip_is_readable_before_close(tmp_path):
    # A recorder killed mid-session (closed SSH) leaves a readable file up to the last line.
    path = str(tmp_path / "live.jsonl.gz")
    rec = Recorder(path)
    rec.write(snap(1))
    rec.write(snap(2))
    src = ReplaySource(path)
    assert src.snapshot().time == 1 and src.snapshot().time == 2
    rec.close()


def test_recorder_never_overwrites(tmp_path):
    p = tmp_path / "exists.jsonl"
    p.write_text("precious")
    with pytest.raises(RecordingError, match="already exists"):
        Recorder(str(p))
    assert p.read_text() == "precious"


def test_loop(tmp_path):
    path = str(tmp_path / "r.jsonl")
    with Recorder(path) as rec:
        rec.write(snap(1))
        rec.write(snap(2))
    src = ReplaySource(path, loop=True)
    assert [src.snapshot().time for _ in range(5)] == [1, 2, 1, 2, 1]


@pytest.mark.parametrize("content, needle", [
    ("", "empty"),
    ("not json\n", "not JSON"),
    ('{"schema": "other/9", "time": 1}\n', "schema"),
    ('{"schema": "pinmon.snapshot/1", "time": 1}\n', "host"),
])
def test_bad_recordings_fail_at_open_with_one_line(tmp_path, content, needle):
    p = tmp_path / "bad.jsonl"
    p.write_text(content)
    with pytest.raises(RecordingError) as e:
        ReplaySource(str(p))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_truncated_tail_ends_replay_with_notice(tmp_path):
    p = tmp_path / "cut.jsonl"
    good = json.dumps(snap(1).to_dict())
    p.write_text(good + "\n" + good[: len(good) // 2])
    src = ReplaySource(str(p))
    assert src.snapshot().time == 1
    assert src.snapshot() is None
    assert src.notices and "ends early" in src.notices[0]


def test_corrupt_gzip(tmp_path):
    p = tmp_path / "x.jsonl.gz"
    p.write_bytes(b"\x1f\x8b\x08\x00garbage-garbage")
    with pytest.raises(RecordingError):
        ReplaySource(str(p))


def test_missing_and_directory(tmp_path):
    with pytest.raises(RecordingError, match="no such file"):
        ReplaySource(str(tmp_path / "nope"))
    with pytest.raises(RecordingError, match="directory"):
        ReplaySource(str(tmp_path))


def test_read_snapshot_file_variants(tmp_path):
    s = snap(7)
    one = tmp_path / "one.json"
    one.write_text(json.dumps(s.to_dict(), indent=1))
    assert read_snapshot_file(str(one)).time == 7
    check = tmp_path / "check.json"
    check.write_text(json.dumps({"schema": "pinmon.check/1", "status": "ok", "snapshot": s.to_dict(), "findings": []}))
    assert read_snapshot_file(str(check)).time == 7
    rec = tmp_path / "rec.jsonl.gz"
    with gzip.open(rec, "wt") as f:
        f.write(json.dumps(snap(1).to_dict()) + "\n" + json.dumps(snap(2).to_dict()) + "\n")
    assert read_snapshot_file(str(rec)).time == 2  # the latest state
    empty = tmp_path / "empty.json"
    empty.write_text("  ")
    with pytest.raises(RecordingError, match="empty"):
        read_snapshot_file(str(empty))


def test_default_recording_path_is_new(tmp_path):
    p1 = default_recording_path(str(tmp_path), now=0)
    open(p1, "w").close()
    p2 = default_recording_path(str(tmp_path), now=0)
    assert p1 != p2 and p2.endswith(".jsonl.gz")


# --- damaged recordings: the right line, no valid line lost -------------------------------------------

def _lines(n):
    return [json.dumps(snap(t).to_dict()) for t in range(n)]


def _replay_all(path):
    src = ReplaySource(str(path))
    got = []
    while (s := src.snapshot()) is not None:
        got.append(s.time)
    return got, src.notices


@pytest.mark.parametrize("bad_line", [b"\x00\xff\xfe\x89PNG binary", b"{\"schema\": 1e999", b"\xc3\x28 not utf-8"])
def test_a_bad_line_7_keeps_lines_1_to_6_and_is_named(tmp_path, bad_line):
    p = tmp_path / "r.jsonl"
    lines = [l.encode() for l in _lines(10)]
    lines[6] = bad_line
    p.write_bytes(b"\n".join(lines) + b"\n")
    times, notices = _replay_all(p)
    assert times == [0, 1, 2, 3, 4, 5]
    assert len(notices) == 1 and "recording ends early" in notices[0] and "r.jsonl:7:" in notices[0]


def test_blank_lines_count_in_line_numbers(tmp_path):
    p = tmp_path / "r.jsonl"
    good = _lines(2)
    p.write_text(f"\n\n{good[0]}\r\n  \n{good[1]}\nnot json\n")
    times, notices = _replay_all(p)
    assert times == [0, 1] and "r.jsonl:6:" in notices[0]


def _cut_gzip(n: int) -> bytes:
    """A gzip of ``n`` lines, each sync-flushed as the recorder does, cut inside the last line."""
    import zlib

    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    lines = _lines(n)
    data = b"".join(z.compress((l + "\n").encode()) + z.flush(zlib.Z_SYNC_FLUSH) for l in lines[:-1])
    last = z.compress((lines[-1] + "\n").encode()) + z.flush(zlib.Z_FINISH)
    return data + last[: len(last) // 2]


def test_truncated_gzip_keeps_every_whole_line(tmp_path):
    p = tmp_path / "r.jsonl.gz"
    p.write_bytes(_cut_gzip(5))
    times, notices = _replay_all(p)
    assert times == [0, 1, 2, 3]
    assert "compressed data ends early after line 4" in notices[0]


def test_snapshot_file_from_a_damaged_recording_takes_the_last_whole_snapshot(tmp_path):
    p = tmp_path / "r.jsonl.gz"
    p.write_bytes(_cut_gzip(5))
    assert read_snapshot_file(str(p)).time == 3
    q = tmp_path / "r.jsonl"
    q.write_bytes(("\n".join(_lines(3)) + "\n").encode() + b"\x00\xff binary\n")
    assert read_snapshot_file(str(q)).time == 2


@pytest.mark.parametrize("content, needle", [
    ("[" * 200_000, "nested too deeply"),
    ('{"schema": "pinmon.snapshot/1", "time": NaN, "host": {"hostname": "h"}}', "not a finite number"),
    ('{"schema": "pinmon.snapshot/1", "time": 1e300, "host": {"hostname": "h"}}', "not a time"),
])
def test_bad_snapshot_files_are_one_line_errors(tmp_path, content, needle):
    p = tmp_path / "s.json"
    p.write_text(content)
    for read in (read_snapshot_file, ReplaySource):
        with pytest.raises(RecordingError) as e:
            read(str(p))
        assert needle in str(e.value) and "\n" not in str(e.value)


# --- the line reader's bounds ------------------------------------------------------------------------

def test_line_reader_bounds(tmp_path):
    from pinmon.recording.infile import InputError, LineReader

    p = tmp_path / "x.txt"
    p.write_bytes(b"a\n" + b"b" * 100 + b"\nc")
    r = LineReader(str(p), max_line_bytes=50)
    assert r.next_line() == b"a"
    with pytest.raises(InputError, match=r"x\.txt:2: line longer than 50 B"):
        r.next_line()
    r.close()
    p.write_bytes(b"\n" * 1000 + b"late\n")
    r = LineReader(str(p), max_lines=500)
    with pytest.raises(InputError, match="more than 500 lines"):
        r.next_line()
    r.close()
    p.write_bytes(b"one\n\n two \nlast-without-newline")
    r = LineReader(str(p))
    assert [r.next_line(), r.next_line(), r.next_line(), r.next_line()] == [b"one", b"two ", b"last-without-newline", None]
    assert r.line_no == 4
    r.close()


def test_line_reader_joins_a_line_across_chunks(tmp_path, monkeypatch):
    from pinmon.recording import infile

    monkeypatch.setattr(infile, "CHUNK_BYTES", 7)
    p = tmp_path / "x.txt"
    p.write_bytes(b"short\n" + b"L" * 40 + b"\n\n\nend")
    r = infile.LineReader(str(p), max_line_bytes=45)
    assert [r.next_line(), r.next_line(), r.next_line(), r.next_line()] == [b"short", b"L" * 40, b"end", None]
    assert r.line_no == 5
    r.close()


def _gzip_members(piece: bytes, n: int) -> bytes:
    # Concatenated gzip members read as one stream: a cheap way to make a big decompressed file.
    return gzip.compress(piece, compresslevel=9) * n


def test_gzip_bombs_stop_at_the_caps(tmp_path, monkeypatch):
    from pinmon.recording import infile

    one_line = tmp_path / "line.jsonl.gz"
    one_line.write_bytes(_gzip_members(b"x" * (1 << 20), 8))  # 8 MiB, no line break
    blank = tmp_path / "blank.jsonl.gz"
    blank.write_bytes(_gzip_members(b"\n" * (1 << 20), 8))  # 8 Mi empty lines
    r = infile.LineReader(str(one_line), max_line_bytes=2 << 20)
    with pytest.raises(infile.InputError, match="line longer than 2 MiB"):
        r.next_line()
    r.close()
    r = infile.LineReader(str(blank), max_lines=1_000_000)
    with pytest.raises(infile.InputError, match="more than 1,000,000 lines"):
        r.next_line()
    r.close()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_only_regular_files_are_read(tmp_path, kind):
    import os

    p = tmp_path / "rec.jsonl"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "dev-zero":
        p.symlink_to("/dev/zero")
    else:
        p.mkdir()
    word = {"fifo": "a FIFO", "dev-zero": "a character device", "directory": "a directory"}[kind]
    for read in (read_snapshot_file, ReplaySource):
        with pytest.raises(RecordingError, match=f"rec.jsonl: is {word}, not a regular file"):
            read(str(p))
