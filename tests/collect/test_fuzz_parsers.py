"""Fuzzing the collectors' parsers of /proc and cgroup files: /proc/PID/maps, /proc/meminfo, and the
host memory reader through a cgroup tree of mutated files. Each returns, never raises; sizes are never
negative. Examples: the Hypothesis profile's (tests/fuzzing.py)."""
from __future__ import annotations

import os

import pytest
from hypothesis import given

from pinmon.collect.host.memory import cgroup_memory_limit, parse_meminfo, read_host_memory
from pinmon.collect.processes.procmaps import estimate_pinned, parse_maps
from tests.fuzzing import BYTES, CGROUP_VALUES, FUZZ, run_counted, splice

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
            _fields, notices = read_host_memory(root)
            assert isinstance(notices, list)
        return t
    run_counted(make)
