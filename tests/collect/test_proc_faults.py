"""/proc under stress: processes exiting mid-read, permission denied, truncated and malformed files.

The scanner and host readers must skip what they cannot read, count it in one notice, and never
raise. Permission denied is injected (tests may run as root, for whom chmod denies nothing).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from pinmon.collect.host.memory import read_host_memory
from pinmon.collect.live import LiveCollector
from pinmon.collect.processes import scan as processes
from pinmon.collect.processes.scan import ProcessScanner, scan_notice

pytestmark = pytest.mark.hardening

CUDA_MAPS = ("7f3a00000000-7f3a00200000 rw-s 00000000 00:05 78 /dev/nvidia0\n"
             "7f3a40000000-7f3a50000000 rw-s 00000000 00:01 1234 /dev/zero (deleted)\n")


def proc_tree(tmp_path, maps: dict):
    root = tmp_path / "proc"
    root.mkdir()
    for pid, text in maps.items():
        d = root / str(pid)
        d.mkdir()
        if text is not None:
            (d / "maps").write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(root)


@pytest.mark.parametrize("text", [
    CUDA_MAPS[: len(CUDA_MAPS) // 2],            # cut mid-line (the process exited while read)
    CUDA_MAPS.replace("-", " "),                  # no address range
    "\x00" * 100,
    b"\xff\xfe" + bytes(range(200)),             # binary
    "7f3a40000000-7f3a00000000 rw-s 0 0:0 0 /dev/zero (deleted)\n/dev/nvidia0\n",  # end < start
    "",
])
def test_malformed_maps_are_skipped(tmp_path, text):
    root = proc_tree(tmp_path, {100: text, 101: CUDA_MAPS})
    scan = ProcessScanner(proc_root=root).scan()
    assert [p.pid for p in scan.processes][-1] == 101
    assert scan.processes[-1].held.pinned_bytes == 256 << 20


def test_vanished_denied_and_odd_entries_make_one_notice(tmp_path, monkeypatch):
    root = proc_tree(tmp_path, {100: CUDA_MAPS, 101: None, 102: CUDA_MAPS, 103: CUDA_MAPS})
    os.mkdir(os.path.join(root, "104"))
    os.mkdir(os.path.join(root, "104", "maps"))  # a directory where a file should be
    real = processes.read_maps

    def read_maps(pid, proc_root="/proc"):
        if pid == 102:
            raise PermissionError(13, "Permission denied")
        if pid == 103:
            raise ProcessLookupError(3, "No such process")
        return real(pid, proc_root)

    monkeypatch.setattr(processes, "read_maps", read_maps)
    scan = ProcessScanner(proc_root=root).scan()
    assert [p.pid for p in scan.processes] == [100]
    assert scan.denied == 1 and scan.vanished == 3
    assert scan_notice(scan, euid=1000) == ("process scan: skipped 1 denied access: pid 102 (n/a) (run as root"
                                            " to see every process), 3 exited during the scan")


def test_proc_root_missing_or_unlistable(tmp_path):
    scan = ProcessScanner(proc_root=str(tmp_path / "nope")).scan()
    assert scan.processes == [] and scan_notice(scan) is None


def test_real_processes_exiting_during_scans():
    # Short-lived children come and go while the real /proc is scanned: nothing raises.
    kids = []
    scanner = ProcessScanner()
    deadline = time.monotonic() + 1.5
    scans = 0
    while time.monotonic() < deadline:
        kids = [k for k in kids if k.poll() is None]
        kids.append(subprocess.Popen([sys.executable, "-c", "pass"]))
        scanner.scan()
        scans += 1
    for k in kids:
        k.wait()
    assert scans > 0


@pytest.mark.parametrize("meminfo", [
    None,                                         # unreadable / missing
    "MemTotal:  131072",                          # truncated: no unit, no MemAvailable
    "MemTotal: lots kB\nMemAvailable: -5 kB\n",
    "\x00\x01garbage",
    "MemTotal: 1000 kB\nMemAvailable: 99999999 kB\nSwapTotal: 10 kB\nSwapFree: 20 kB\n",
])
@pytest.mark.parametrize("cgroup, limit", [
    (None, None), ("0::/a\n", "max\n"), ("0::/a\n", "junk"), ("0:/broken", "1"), ("0::/a\x00b\n", "5"),
    ("12:memory:/x\n", "9223372036854771712"), ("0::/../../../../etc\n", "100"),
])
def test_host_reader_degrades(tmp_path, meminfo, cgroup, limit):
    root = tmp_path
    (root / "proc/self").mkdir(parents=True)
    if meminfo is not None:
        (root / "proc/meminfo").write_text(meminfo)
    if cgroup is not None:
        (root / "proc/self/cgroup").write_text(cgroup)
    (root / "sys/fs/cgroup/a").mkdir(parents=True)
    (root / "sys/fs/cgroup/memory/x").mkdir(parents=True)
    if limit is not None:
        (root / "sys/fs/cgroup/a/memory.max").write_text(limit)
        (root / "sys/fs/cgroup/a/memory.current").write_text("not a number")
        (root / "sys/fs/cgroup/memory/x/memory.limit_in_bytes").write_text(limit)
    fields, notices = read_host_memory(str(root))
    assert (notices != []) == (meminfo is None)
    for key in ("mem_total_bytes", "mem_available_bytes", "effective_mem_limit_bytes", "swap_used_bytes"):
        assert fields[key] is None or fields[key] >= 0


def test_meminfo_is_a_directory(tmp_path):
    (tmp_path / "proc/meminfo").mkdir(parents=True)
    fields, notices = read_host_memory(str(tmp_path))
    assert fields["mem_total_bytes"] is None and notices == ["host memory: /proc/meminfo is not readable"]


def test_collector_on_a_broken_tree_still_makes_snapshots(tmp_path):
    root = proc_tree(tmp_path, {1: b"\xff" * 50, 2: None, 3: CUDA_MAPS[:30]})
    with LiveCollector(use_nvml=False, host_root=str(tmp_path / "empty"), proc_root=root) as col:
        snap = col.snapshot()
    assert snap.processes == () and snap.host.mem_total_bytes is None
    assert any("meminfo" in n for n in snap.notices) and any("exited" in n for n in snap.notices)
