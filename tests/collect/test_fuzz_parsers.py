"""Fuzzing every parser of outside input: only documented errors, 10,000 examples each in CI.

Each parser either returns or raises the one error type it documents (``SchemaError``,
``RecordingError``, ``ConfigError``, ``ValueError``); anything else is a bug. The number of examples
is the Hypothesis profile's (tests/conftest.py): 300 in everyday runs, 10,000 under
``--hypothesis-profile full``, which ``.ci/run`` runs on this file. Hypothesis draws only bytes (its
cheapest strategy, ~1 ms an example); ``splice`` turns them into a mutation of real input (real lines
cut, joined, salted with the bytes), so 10,000 examples per parser stay within about a minute and a
half for the file on two cores. Each test counts its examples and asserts the count, so the figure
is real.
"""
from __future__ import annotations

import copy
import gzip
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinmon.cli.config import ConfigError, parse_config
from pinmon.collect.cgroups.limits import parse_limit
from pinmon.collect.host.memory import cgroup_memory_limit, parse_meminfo, read_host_memory
from pinmon.collect.processes.procmaps import estimate_pinned, parse_maps
from pinmon.model import SchemaError, Snapshot
from pinmon.recording import RecordingError, read_snapshot_file
from pinmon.recording.replay import ReplaySource
from pinmon.units import parse_size
from tests import factories as make  # box_*: a realistic two-GPU snapshot

# The profile's number of examples (300 quick, 10,000 full): settings made here inherit it.
FUZZ = settings(deadline=None, database=None, derandomize=False, suppress_health_check=list(HealthCheck))
N = FUZZ.max_examples

pytestmark = [pytest.mark.hardening, pytest.mark.fuzz]

MAPS_LINES = [
    "7f3a40000000-7f3a50000000 rw-s 00000000 00:01 1234  /dev/zero (deleted)",
    "200000000-204000000 rw-s 00000000 00:05 77 /dev/nvidiactl",
    "7f3a60000000-7f3a68000000 rw-s 00000000 00:05 77 /dev/nvidiactl",
    "7f3a00000000-7f3a00200000 rw-s 00000000 00:05 78 /dev/nvidia0",
    "55d0c0000000-55d0c0021000 r-xp 00000000 08:01 4242 /usr/bin/python3.12",
    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]",
]
MEMINFO_LINES = ["MemTotal:       131072000 kB", "MemAvailable:   65536000 kB", "SwapTotal: 0 kB",
                 "SwapFree: 0 kB", "Shmem: 1024 kB", "Mlocked: 0 kB", "HugePages_Total: 0"]
SEPS = ("\n", "\r\n", "\x00", " ", "\t", "")
BYTES = st.binary(max_size=64)


def splice(data: bytes, lines) -> str:
    """Real lines mutated by ``data``: its first bytes pick lines, a separator, a cut and a mode;
    the rest (as latin-1, so NUL, newlines and high bytes all occur, or as UTF-8) is salted in."""
    if not data:
        return ""
    b = data + bytes(6)
    noise = data[6:].decode("latin-1") if b[0] & 1 else data[6:].decode("utf-8", "replace")
    picked = [lines[(b[1] + 7 * i) % len(lines)] for i in range(b[2] % 6)]
    text = SEPS[b[3] % len(SEPS)].join(picked)
    cut = b[4] * max(1, len(text)) // 255
    mode = b[5] % 5
    if mode == 0:
        return noise
    if mode == 1:
        return text[:cut] + noise + text[cut:]
    if mode == 2:
        return text[:cut]
    if mode == 3:
        return text + "\n" + noise
    return "".join(c if i % 7 else noise[:1] for i, c in enumerate(text))


def run_counted(make_test):
    """Run a @given test built by ``make_test(count)`` and return how many examples it saw."""
    seen = [0]

    def count():
        seen[0] += 1

    make_test(count)()
    assert seen[0] >= N, seen[0]
    return seen[0]


def test_procmaps():
    def make(count):
        @FUZZ
        @given(BYTES)
        def t(data):
            count()
            text = splice(data, MAPS_LINES)
            for m in parse_maps(text):
                assert m.end >= m.start and len(m.perms) == 4
            est = estimate_pinned(text)
            assert est.pinned_bytes >= 0 and est.write_combined_bytes >= 0
        return t
    run_counted(make)


def test_meminfo():
    def make(count):
        @FUZZ
        @given(BYTES)
        def t(data):
            count()
            text = splice(data, MEMINFO_LINES)
            assert all(v >= 0 for v in parse_meminfo(text).values())
        return t
    run_counted(make)


CGROUP_VALUES = ["max", "max\n", "9223372036854771712", " 0 ", "1e9", "-1", "137438953472\n",
                 str(1 << 70), "+5", "0x10"]


def test_cgroup_limit_value():
    def make(count):
        @FUZZ
        @given(BYTES)
        def t(data):
            count()
            text = None if data == b"\x00" else splice(data, CGROUP_VALUES)
            v, _understood = parse_limit(text)
            assert v is None or 0 <= v < (1 << 60)
        return t
    run_counted(make)


CGROUP_LINES = ["0::/user.slice/user-1000.slice/session-1.scope", "12:memory:/docker/abc",
                "11:cpu,cpuacct:/", "0::/", "0::/../../..", "1:name=systemd:/init.scope"]


def test_cgroup_tree_and_host_memory(tmp_path):
    root = str(tmp_path)  # pytest's own temporary directory: nothing is left in /tmp
    os.makedirs(os.path.join(root, "proc/self"))
    os.makedirs(os.path.join(root, "sys/fs/cgroup/user.slice"))
    os.makedirs(os.path.join(root, "sys/fs/cgroup/memory/docker/abc"))
    # A hybrid host: the v1 memory mount holds the controller (the unified one at its usual place too).
    with open(os.path.join(root, "proc/self/mountinfo"), "w", encoding="utf-8") as f:
        f.write("35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
                "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")

    def write(rel, text):
        with open(os.path.join(root, rel), "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)

    def make(count):
        @FUZZ
        @given(BYTES)
        def t(data):
            count()
            k = len(data) // 4
            cgroup = splice(data[:k], CGROUP_LINES)
            v2_max, v1_limit = splice(data[k:2 * k], CGROUP_VALUES), splice(data[2 * k:3 * k], CGROUP_VALUES)
            meminfo = splice(data[3 * k:], MEMINFO_LINES)
            write("proc/self/cgroup", cgroup)
            write("sys/fs/cgroup/user.slice/memory.max", v2_max)
            write("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", v1_limit)
            write("proc/meminfo", meminfo)
            limit = cgroup_memory_limit(root)
            assert limit is None or limit >= 0  # 0 is a limit of zero bytes
            fields, notices = read_host_memory(root)
            assert isinstance(notices, list)
        return t
    run_counted(make)


SIZES = ["256M", "1G", "4096", "1.5GiB", "nan", "inf", "-1k", "1e400", "0x10", " 2 tb ", "e5", "."]


def test_size_parser():
    def make(count):
        @FUZZ
        @given(BYTES)
        def t(data):
            count()
            text = splice(data, SIZES)
            try:
                assert parse_size(text) >= 0
            except ValueError:
                pass
        return t
    run_counted(make)


TOML_PIECES = ["interval = 1.0", "interval = \"x\"", "interval = -1", "[thresholds]",
               "pinned_ram_warning_fraction = 0.3", "pinned_ram_critical_fraction = 2",
               "growth_min_bytes = \"2G\"", "growth_min_bytes = 1.5", "disabled_rules = [\"gpu-lost\"]",
               "disabled_rules = [1]", "bogus = 1", "[thresholds.sub]", "interval = inf", "= =", "[[x]]"]


def test_config_loader():
    def make(count):
        @FUZZ
        @given(BYTES)
        def t(raw):
            count()
            data = raw if raw[:1] == b"\xff" else splice(raw, TOML_PIECES)
            try:
                parse_config(data, "fuzz.toml")
            except ConfigError as e:
                assert "\n" not in str(e) and "fuzz.toml" in str(e)
        return t
    run_counted(make)


# --- snapshots and recordings ---------------------------------------------------------------------

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
                assert "\n" not in str(e)
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
                assert "\n" not in str(e)
            else:
                n = 0
                while src.snapshot() is not None:
                    n += 1
                    assert n < 100
                src.close()
            try:
                read_snapshot_file(path)
            except RecordingError as e:
                assert "\n" not in str(e)
        return t
    run_counted(make)
