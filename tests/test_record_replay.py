"""Recordings: JSON lines (plain and gzip) written by Recorder and read back by ReplaySource."""
import gzip
import json

import pytest

from pinmon.collect.replay import ReplaySource, read_snapshot_file
from pinmon.collect.source import Source
from pinmon.model import HostMemory, Snapshot
from pinmon.outputs.record import Recorder, RecordingError, default_recording_path


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
