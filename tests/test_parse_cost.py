"""What a recording line or snapshot file costs to parse is bounded before ``json.loads`` runs: a 180 KB
gzip of a 60 MiB line of ``[{},{},...]`` (20 million empty objects) took 1.6 GB before it was refused.
Peak memory is measured in the child that reads the file: memory, not time, so it is asserted. It is
the child's ``VmHWM`` (the peak of its own address space), not ``getrusage``'s ``ru_maxrss``, which
Linux carries over from the parent's address space that the child was forked from before its exec: a
test process grown to 216 MiB made every child read 216 MiB."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from pinmon.limits import MAX_JSON_CONTAINERS, MAX_JSON_VALUES
from pinmon.recording import RecordingError, read_snapshot_file
from pinmon.recording.json_cost import structure_counts
from tests import factories as make

pytestmark = pytest.mark.hardening

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE_BYTES = 60 << 20
PEAK_LIMIT_BYTES = 200 << 20
# pinmon's command line in a child that prints its peak RSS (KiB) last on stderr.
MEASURED = ("import sys\nfrom pinmon.cli import main\ntry:\n    code = main()\nfinally:\n"
            "    peak = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')]\n"
            "    print('peak_kib', peak[0], file=sys.stderr)\n"
            "sys.exit(code)\n")


def gz_line(path, piece: bytes, head: bytes = b"[", tail: bytes = b"{}]"):
    """A gzip file of one line of about ``LINE_BYTES``: head, ``piece`` repeated, tail."""
    n = (LINE_BYTES - len(head) - len(tail)) // len(piece)
    with gzip.open(path, "wb", compresslevel=6) as f:
        f.write(head + piece * n + tail + b"\n")
    return str(path)


def run_measured(*args):
    r = subprocess.run([sys.executable, "-c", MEASURED, *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    lines = r.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("peak_kib "), r.stderr
    return r.returncode, lines[:-1], int(lines[-1].split()[1]) * 1024


@pytest.mark.parametrize("piece, needle", [(b"{},", "JSON objects and lists"), (b"0,", "JSON values"),
                                           (b"[", "JSON objects and lists")],
                         ids=["empty-objects", "zeros", "nested"])
@pytest.mark.parametrize("command", [["replay"], ["check", "--snapshot"]], ids=["replay", "check"])
def test_a_60_mib_line_of_tiny_values_is_refused_within_200_mb(tmp_path, piece, needle, command):
    path = gz_line(tmp_path / "flood.jsonl.gz", piece, tail=b"{}]" if piece != b"[" else b"")
    assert os.path.getsize(path) < 1 << 20  # a small file: the attack is the parse, not the download
    code, err, peak = run_measured(*command, path)
    assert code == (3 if command[0] == "check" else 2)
    assert len(err) == 1 and needle in err[0] and "Traceback" not in err[0], err
    assert peak < PEAK_LIMIT_BYTES, f"peak RSS {peak / 2**20:.0f} MiB"


def test_the_counts_leave_out_what_is_inside_strings():
    assert structure_counts(b'{"a": [1, 2], "b": {}}') == (3, 2)
    many = MAX_JSON_CONTAINERS + 10
    quoted = b'{"cmd": "' + b"{[," * many + b'\\"{\\\\", "x": [1]}'
    assert structure_counts(quoted) == (2, 1)
    assert structure_counts(quoted.decode()) == (2, 1)
    assert structure_counts(b"[" + b"{}," * many + b"{}]")[0] == many + 2
    assert structure_counts(b"[" + b"0," * (MAX_JSON_VALUES + 1) + b"0]")[1] == MAX_JSON_VALUES + 1


def test_a_real_snapshot_with_brackets_in_its_strings_is_read(tmp_path):
    """A command line of two million braces, quotes and backslashes: a few MiB, one value."""
    snap = make.full_snapshot().to_dict()
    snap["processes"][0]["identity"]["cmdline"] = '{["' * 700_000 + "\\" * 3 + "}"
    p = tmp_path / "snap.jsonl"
    p.write_text(json.dumps(snap) + "\n")
    assert read_snapshot_file(str(p)).processes[0].identity.cmdline.startswith('{["{')


def test_a_snapshot_file_of_too_many_objects_is_one_line(tmp_path):
    p = tmp_path / "s.json"
    p.write_bytes(b"[" + b"{}," * MAX_JSON_CONTAINERS + b"{}]")
    with pytest.raises(RecordingError) as e:
        read_snapshot_file(str(p))
    assert "JSON objects and lists; a snapshot has at most 1,048,576" in str(e.value) and "\n" not in str(e.value)
