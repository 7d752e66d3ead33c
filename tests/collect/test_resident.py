"""Pinned estimates capped by what a process has resident (/proc/PID/status) and by RAM."""
import os
import shutil

import pytest

from pinmon.collect.live import LiveCollector
from pinmon.collect.processes.resident import CAP_SLACK_BYTES, Resident, cap_estimate, capped_totals, parse_status_rss
from pinmon.collect.processes.scan import ProcessScanner, scan_notice
from tests import factories as make

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "maps")
MIB = 1 << 20
GIB = 1 << 30
TIB = 1 << 40

# A forged CUDA process: a sparse tmpfs file named /dev/zero (deleted) and one named
# /dev/nvidiactl, each mapped shared at 1 TiB in the mmap area; almost nothing of it is resident.
FORGED_MAPS = ("7f0000000000-7f0000001000 rw-s 00000000 00:30 5 /dev/nvidiactl\n"
               "7e0000000000-7f0000000000 rw-s 00000000 00:30 6 /dev/nvidiactl\n"
               "7d0000000000-7e0000000000 rw-s 00000000 00:30 7 /dev/zero (deleted)\n")


def status_text(rss_file_kb, rss_shmem_kb):
    return (f"Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nVmRSS:\t   30000 kB\n"
            f"RssAnon:\t   10000 kB\nRssFile:\t{rss_file_kb:>8} kB\nRssShmem:\t{rss_shmem_kb:>8} kB\n"
            "VmLck:\t       0 kB\n")


def proc_with(tmp_path, procs, mem_total_kb=None):
    """procs: pid -> (maps fixture name or maps text, status text or None)."""
    root = tmp_path / "proc"
    root.mkdir(exist_ok=True)
    for pid, (maps, status) in procs.items():
        d = root / str(pid)
        d.mkdir()
        if maps.endswith("\n"):
            (d / "maps").write_text(maps)
        else:
            shutil.copy(os.path.join(FIXTURES, maps + ".maps"), d / "maps")
        if status is not None:
            (d / "status").write_text(status)
    if mem_total_kb is not None:
        (root / "meminfo").write_text(f"MemTotal:       {mem_total_kb} kB\nMemFree:  1000 kB\n")
    return str(root)


def test_parse_status_rss():
    r = parse_status_rss(status_text(2048, 270336))
    assert r == Resident(file_bytes=2048 * 1024, shmem_bytes=270336 * 1024)
    assert parse_status_rss("Name:\tkthreadd\nRssFile: lots kB\n") == Resident(None, None)
    assert parse_status_rss("RssShmem:\t\u0663\u0663 kB\n") == Resident(None, None)  # not ASCII digits


def test_cap_estimate_lowers_to_resident_and_to_ram():
    res = Resident(file_bytes=8 * MIB, shmem_bytes=12 * MIB)
    c = cap_estimate(TIB, TIB, res, 64 * GIB)
    assert (c.pinned_bytes, c.write_combined_bytes, c.capped) == (12 * MIB, 8 * MIB, True)
    # Within the slack of the kernel's lagging counters: left as it is, not flagged.
    near = cap_estimate(12 * MIB + CAP_SLACK_BYTES, 0, res, None)
    assert (near.pinned_bytes, near.capped) == (12 * MIB + CAP_SLACK_BYTES, False)
    # Resident unknown: RAM alone caps it, pinned first, then write-combined in what is left.
    c = cap_estimate(3 * GIB, 2 * GIB, None, 4 * GIB)
    assert (c.pinned_bytes, c.write_combined_bytes, c.capped) == (3 * GIB, GIB, True)
    assert cap_estimate(3 * GIB, 0, None, None) == cap_estimate(3 * GIB, 0, Resident(None, None), None)
    assert not cap_estimate(3 * GIB, 0, None, None).capped


def test_capped_totals_never_exceed_ram():
    assert capped_totals([3 * GIB, 3 * GIB, None], [GIB], 4 * GIB) == (4 * GIB, 0, True)
    assert capped_totals([GIB, GIB], [GIB], 4 * GIB) == (2 * GIB, GIB, False)
    assert capped_totals([GIB], [None], None) == (GIB, 0, False)


def test_a_genuine_process_keeps_its_estimate(tmp_path):
    # default_256m: 264 MiB of /dev/zero (deleted) mappings (256 MiB + the context's staging chunks),
    # all of it resident shmem as pinned pages are.
    root = proc_with(tmp_path, {10: ("default_256m", status_text(180000, 264 * 1024 + 512))}, 64 * 1024 * 1024)
    scan = ProcessScanner(proc_root=root).scan()
    (p,) = scan.processes
    assert p.held.pinned_bytes == 264 * MIB and not p.held.capped
    assert scan.capped == [] and scan_notice(scan) is None


def test_write_combined_buffer_fits_in_resident_file_pages(tmp_path):
    # A WC buffer is driver memory mapped through /dev/nvidiactl: resident as file pages.
    root = proc_with(tmp_path, {10: ("write_combined_128m", status_text(128 * 1024 + 90000, 8 * 1024))})
    (p,) = ProcessScanner(proc_root=root).scan().processes
    assert (p.held.pinned_bytes, p.held.write_combined_bytes, p.held.capped) == (8 * MIB, 128 * MIB, False)


def test_a_forged_terabyte_is_capped_to_what_is_resident(tmp_path):
    root = proc_with(tmp_path, {4242: (FORGED_MAPS, status_text(9000, 3000))}, 16 * 1024 * 1024)
    scan = ProcessScanner(proc_root=root).scan()
    (p,) = scan.processes
    assert p.held.pinned_bytes == 3000 * 1024
    assert p.held.write_combined_bytes <= 9000 * 1024 and p.held.capped
    assert scan.capped == [4242]
    note = scan_notice(scan)
    assert note == ("process scan: pinned estimate of pid 4242 capped to what is resident"
                    " (its pinned-looking mappings are larger than that)")


def test_without_status_ram_still_caps(tmp_path):
    root = proc_with(tmp_path, {7: (FORGED_MAPS, None)}, mem_total_kb=4 * 1024 * 1024)
    (p,) = ProcessScanner(proc_root=root).scan().processes
    assert p.held.pinned_bytes == 4 * GIB and p.held.write_combined_bytes == 0 and p.held.capped
    # The caller's MemTotal wins over the scanned /proc's.
    (p,) = ProcessScanner(proc_root=root).scan(mem_total_bytes=GIB).processes
    assert p.held.pinned_bytes == GIB


def test_resident_is_read_every_scan_but_only_for_pinned_holders(tmp_path, monkeypatch):
    import pinmon.collect.processes.scan as mod

    no_pinned = ("7f3a00000000-7f3a00200000 rw-s 00000000 00:05 78 /dev/nvidia0\n"
                 "7f3a40000000-7f3a50000000 rw-p 00000000 00:00 0\n")
    root = proc_with(tmp_path, {5: (no_pinned, status_text(1, 1)),
                                6: (FORGED_MAPS, status_text(9000, 3000))})
    reads = []
    real = mod.read_resident
    monkeypatch.setattr(mod, "read_resident", lambda pid, r: reads.append(pid) or real(pid, r))
    sc = ProcessScanner(proc_root=root)
    assert [p.held.pinned_bytes for p in sc.scan().processes] == [0, 3000 * 1024]
    (tmp_path / "proc" / "6" / "status").write_text(status_text(9000, 5000))  # maps unchanged
    assert [p.held.pinned_bytes for p in sc.scan().processes] == [0, 5000 * 1024]
    assert reads == [6, 6]


def test_the_notice_names_a_few_capped_pids(tmp_path):
    procs = {pid: (FORGED_MAPS, status_text(10, 10)) for pid in range(100, 108)}
    scan = ProcessScanner(proc_root=proc_with(tmp_path, procs)).scan()
    assert scan.capped == list(range(100, 108))
    assert "pid 100, 101, 102, 103, 104 and 3 more capped" in scan_notice(scan)


@pytest.mark.parametrize("shared", [True, False])
def test_live_totals_never_exceed_ram(tmp_path, shared):
    # Three processes each hold 3 GiB resident on a 4 GiB box: of one shared buffer (a fork, an IPC
    # handle: one buffer, counted once), or each of its own (more than RAM: capped).
    host = tmp_path / "host"
    (host / "proc").mkdir(parents=True)
    (host / "proc" / "meminfo").write_text("MemTotal: 4194304 kB\nMemAvailable: 1048576 kB\n")

    def maps(pid):
        inode = 1234 if shared else pid
        return ("7f3a00000000-7f3a00200000 rw-s 00000000 00:05 78 /dev/nvidia0\n"
                f"7f3b00000000-7f3bc0000000 rw-s 00000000 00:01 {inode} /dev/zero (deleted)\n")

    procs = {pid: (maps(pid), status_text(0, 3 * 1024 * 1024)) for pid in (11, 12, 13)}
    root = proc_with(tmp_path, procs)
    with LiveCollector(use_nvml=False, host_root=str(host), proc_root=root) as col:
        snap = col.snapshot()
    assert [p.held.pinned_bytes for p in snap.processes] == [3 * GIB] * 3
    assert snap.host.pinned_bytes_est == (3 if shared else 4) * GIB
    assert snap.host.write_combined_bytes_est == 0
    assert any("capped at RAM" in n for n in snap.notices) is not shared


def test_no_row_of_any_source_is_above_ram():
    from pinmon.collect.live import cap_rows_to_ram

    rows = [make.process(1, None, pinned_bytes=10 * TIB, source="traced"),
            make.process(2, None, pinned_bytes=GIB, write_combined_bytes=None),
            make.process(3, None, pinned_bytes=None, write_combined_bytes=5 * GIB)]
    out = cap_rows_to_ram(rows, 4 * GIB)
    assert [(r.held.pinned_bytes, r.held.write_combined_bytes, r.held.capped) for r in out] == [
        (4 * GIB, None, True), (GIB, None, False), (None, 4 * GIB, True)]
    assert out[0].source == "traced"
    assert cap_rows_to_ram(rows, None) == rows


def test_an_endless_status_figure_is_not_a_figure():
    assert parse_status_rss(f"RssShmem:\t{'9' * 5000} kB\nRssFile:\t12 kB\n") == Resident(12 * 1024, None)
