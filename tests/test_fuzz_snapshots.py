"""Fuzzing the snapshot schema and the recording readers with mutated real snapshots: a snapshot
loads (and round-trips) or raises ``SchemaError``; a recording or snapshot file reads or raises
``RecordingError``, in one line either way. Examples: the Hypothesis profile's (tests/fuzzing.py)."""
from __future__ import annotations

import copy
import gzip
import json
import os

import pytest
from hypothesis import given

from pinmon.model import SchemaError, Snapshot
from pinmon.recording import RecordingError, read_snapshot_file
from pinmon.recording.replay import ReplaySource
from tests import factories as make  # box_*: a realistic two-GPU snapshot
from tests.fuzzing import BYTES, FUZZ, run_counted

pytestmark = [pytest.mark.hardening, pytest.mark.fuzz]

BASE = make.box_snapshot(3, probe=make.box_probe("quick")).to_dict()
ODD_VALUES = [None, True, False, -1, 0, 1.5, 2 ** 70, float("nan"), float("inf"), "", "x", [], {}, [1],
              {"a": None}, [[{}]], "pinmon.snapshot/1", -(2 ** 63)]


def _paths(d, prefix=()):
    if isinstance(d, dict):
        for k, v in d.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


PATHS = list(_paths(BASE))


def mutate(data: bytes, base=BASE, paths=PATHS):
    """The real snapshot with up to four values (picked by pairs of bytes) replaced or deleted."""
    if data[:1] == b"\x00":
        return ODD_VALUES[len(data) % len(ODD_VALUES)]  # not even an object
    d = copy.deepcopy(base)
    for i in range(0, min(len(data), 12), 3):
        chunk = data[i:i + 3] + bytes(3)
        path = paths[(chunk[0] << 8 | chunk[1]) % len(paths)]
        node = d
        try:
            for k in path[:-1]:
                node = node[k]
            if chunk[2] == 255 and isinstance(node, dict):
                node.pop(path[-1], None)
            else:
                node[path[-1]] = copy.deepcopy(ODD_VALUES[chunk[2] % len(ODD_VALUES)])
        except (KeyError, IndexError, TypeError):
            pass
    return d


def test_snapshot_from_dict():
    def make(count):
        @FUZZ
        @given(BYTES)
        def t(raw):
            count()
            data = mutate(raw)
            try:
                snap = Snapshot.from_dict(data)
            except SchemaError as e:
                assert "\n" not in str(e)  # noqa: PT017  (a refusal may come, or not)
                return
            # What it accepts round-trips, and is finite (from_dict refuses NaN and infinities).
            text = json.dumps(snap.to_dict(), allow_nan=False)
            assert json.dumps(Snapshot.from_dict(json.loads(text)).to_dict()) == text
        return t
    run_counted(make)


# Recordings use a smaller snapshot (one GPU, no probe): the readers' work per line is the same.
REC_BASE = make.box_snapshot(1).to_dict()
REC_BASE["gpus"] = REC_BASE["gpus"][:1]
REC_BASE["processes"] = REC_BASE["processes"][:1]
REC_PATHS = list(_paths(REC_BASE))
GOOD_LINE = json.dumps(REC_BASE).encode()


def recording_bytes(data: bytes) -> bytes:
    """A recording's bytes from ``data``: good, mutated, cut and noise lines; maybe gzip, maybe cut."""
    b = data + bytes(4)
    lines = []
    for i in range(b[0] % 4):
        kind = b[1 + i] % 4 if i < 3 else 0
        if kind == 0:
            lines.append(GOOD_LINE)
        elif kind == 1:
            lines.append(json.dumps(mutate(data[i:], REC_BASE, REC_PATHS)).encode())
        elif kind == 2:
            lines.append(GOOD_LINE[: 17 * b[2]])
        else:
            lines.append(data[4:])
    out = b"\n".join(lines)
    if b[3] & 1:
        out = gzip.compress(out, compresslevel=1)
        if b[3] & 2:
            out = out[: len(out) * b[3] // 255]
    return out


def test_recording_and_snapshot_readers(tmp_path):
    d = str(tmp_path)

    def make(count):
        @FUZZ
        @given(BYTES)
        def t(raw):
            count()
            data = recording_bytes(raw)
            name = ("rec.jsonl", "rec.jsonl.gz", "snap.json", "snap.json.gz")[len(raw) % 4]
            path = os.path.join(d, name)
            with open(path, "wb") as f:
                f.write(data)
            try:
                src = ReplaySource(path)
            except RecordingError as e:
                assert "\n" not in str(e)  # noqa: PT017  (a refusal may come, or not)
            else:
                n = 0
                while src.snapshot() is not None:
                    n += 1
                    assert n < 100
                src.close()
            try:
                read_snapshot_file(path)
            except RecordingError as e:
                assert "\n" not in str(e)  # noqa: PT017  (a refusal may come, or not)
        return t
    run_counted(make)
