"""The process scanner on a fake /proc: CUDA processes kept, vanished/denied ones counted, churn."""
import os
import shutil

import pytest

from pinmon.collect.processes.scan import ProcessScanner, scan_notice
from pinmon.collect.rawfile import READ_CHUNK

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "maps")
MIB = 1 << 20


def fake_proc(tmp_path, entries):
    for pid, fixture in entries.items():
        d = tmp_path / str(pid)
        d.mkdir()
        if fixture is not None:
            shutil.copy(os.path.join(FIXTURES, fixture + ".maps"), d / "maps")
    return str(tmp_path)


def test_scan_keeps_cuda_processes_only(tmp_path):
    root = fake_proc(tmp_path, {101: "default_256m", 102: "non_cuda_shared_anon", 103: None})
    res = ProcessScanner(proc_root=root).scan()
    assert [p.pid for p in res.processes] == [101]
    p = res.processes[0]
    assert abs(p.held.pinned_bytes - 256 * MIB) <= 10 * MIB and p.source == "est."
    assert p.held.mappings_churn is None  # first scan: no baseline yet
    assert res.vanished == 1  # pid 103 has no maps file: it exited mid-scan
    assert "exited" in scan_notice(res)


def test_churn_between_scans(tmp_path):
    root = fake_proc(tmp_path, {7: "context_only"})
    sc = ProcessScanner(proc_root=root)
    sc.scan()
    assert sc.scan().processes[0].held.mappings_churn == 0
    shutil.copy(os.path.join(FIXTURES, "small_4k_x1000.maps"), tmp_path / "7" / "maps")
    assert sc.scan().processes[0].held.mappings_churn > 0


def test_permission_denied_is_counted(tmp_path, monkeypatch):
    root = fake_proc(tmp_path, {5: "default_256m"})
    import pinmon.collect.processes.scan as mod

    def deny(pid, proc_root):
        raise PermissionError(13, "denied")

    monkeypatch.setattr(mod, "read_maps", deny)
    res = ProcessScanner(proc_root=root).scan()
    assert res.processes == [] and res.denied == 1
    assert "denied" in scan_notice(res)
    # The hint to run as root is for users who are not root; root is told why root was refused.
    # The denied process is named, from its comm (readable where its maps are not).
    assert res.denied_pids == [(5, "n/a")]
    assert scan_notice(res, euid=1000) == ("process scan: skipped 1 denied access: pid 5 (n/a)"
                                           " (run as root to see every process)")
    as_root = scan_notice(res, euid=0)
    assert as_root.startswith("process scan: skipped 1 denied access: pid 5 (n/a) (even as root")
    assert "run as root" not in as_root and "CAP_SYS_PTRACE" in as_root


def test_no_notice_when_clean(tmp_path):
    root = fake_proc(tmp_path, {1: "non_cuda_shared_anon"})
    assert scan_notice(ProcessScanner(proc_root=root).scan()) is None


def test_real_proc_scan_does_not_raise():
    res = ProcessScanner().scan()
    assert res.scanned > 0


def test_unchanged_maps_keep_their_estimate_without_a_parse(tmp_path, monkeypatch):
    import pinmon.collect.processes.scan as mod

    root = fake_proc(tmp_path, {7: "context_only", 8: "default_256m"})
    parsed = []
    real = mod.estimate_pinned
    monkeypatch.setattr(mod, "estimate_pinned",
                        lambda text, *checks: parsed.append(text) or real(text, *checks))
    sc = ProcessScanner(proc_root=root)
    first = sc.scan()
    assert len(parsed) == 2
    second = sc.scan()
    assert len(parsed) == 2  # the same bytes: no parse
    assert [p.held.pinned_bytes for p in second.processes] == [p.held.pinned_bytes for p in first.processes]
    assert [p.held.mappings_churn for p in second.processes] == [0, 0]
    shutil.copy(os.path.join(FIXTURES, "default_256m.maps"), tmp_path / "7" / "maps")
    third = sc.scan()
    assert len(parsed) == 3  # only the process whose maps changed
    assert third.processes[0].held.pinned_bytes == third.processes[1].held.pinned_bytes
    assert third.processes[0].held.mappings_churn > 0 and third.processes[1].held.mappings_churn == 0


def test_descriptions_are_cached_for_a_while_and_dropped_with_the_process(tmp_path, monkeypatch):
    import pinmon.collect.processes.scan as mod

    root = fake_proc(tmp_path, {7: "context_only"})
    calls = []
    monkeypatch.setattr(mod, "_describe", lambda pid: calls.append(pid) or (f"n{len(calls)}", "u", "c"))
    now = [100.0]
    sc = ProcessScanner(proc_root=root, clock=lambda: now[0])
    assert sc.scan().processes[0].identity.name == "n1"
    now[0] += mod.DESCRIBE_TTL_S - 1
    assert sc.scan().processes[0].identity.name == "n1" and calls == [7]
    now[0] += 2
    assert sc.scan().processes[0].identity.name == "n2"  # stale: looked up again
    shutil.rmtree(tmp_path / "7")
    assert sc.scan().processes == []
    (tmp_path / "7").mkdir()  # a new process under the same pid is described afresh
    shutil.copy(os.path.join(FIXTURES, "context_only.maps"), tmp_path / "7" / "maps")
    assert sc.scan().processes[0].identity.name == "n3"


def test_maps_are_read_whole_past_one_read_chunk(tmp_path):
    import pinmon.collect.processes.scan as mod

    root = fake_proc(tmp_path, {9: "small_4k_x1000"})
    data = mod.read_maps(9, root)
    assert len(data) > READ_CHUNK
    with open(os.path.join(root, "9", "maps"), "rb") as f:
        assert data == f.read()


def _count_maps_reads(monkeypatch):
    import pinmon.collect.processes.scan as mod

    reads = []
    real = mod.read_maps
    monkeypatch.setattr(mod, "read_maps", lambda pid, root: reads.append(pid) or real(pid, root))
    return reads


def test_a_non_cuda_process_is_reread_only_when_its_size_changes(tmp_path, monkeypatch):
    root = fake_proc(tmp_path, {7: "non_cuda_shared_anon", 8: "context_only"})
    for pid in (7, 8):
        (tmp_path / str(pid) / "statm").write_text("4969 4153 1671 1 0 2850 0\n")
    reads = _count_maps_reads(monkeypatch)
    now = [100.0]
    sc = ProcessScanner(proc_root=root, clock=lambda: now[0])
    assert [p.pid for p in sc.scan().processes] == [8] and reads == [7, 8]
    reads.clear()
    (tmp_path / "7" / "statm").write_text("4969 5000 1700 1 0 2900 0\n")  # only resident pages moved
    res = sc.scan()
    assert reads == [8] and res.scanned == 2  # the CUDA process every time; 7 counted, not read
    # 7 initialises CUDA: its maps gain the device files and its size grows.
    shutil.copy(os.path.join(FIXTURES, "default_256m.maps"), tmp_path / "7" / "maps")
    (tmp_path / "7" / "statm").write_text("9969 5000 1700 1 0 2900 0\n")
    reads.clear()
    assert [p.pid for p in sc.scan().processes] == [7, 8] and reads == [7, 8]


def test_an_unchanged_non_cuda_process_is_still_reread_now_and_then(tmp_path, monkeypatch):
    import pinmon.collect.processes.scan as mod

    root = fake_proc(tmp_path, {7: "non_cuda_shared_anon"})
    (tmp_path / "7" / "statm").write_text("4969 4153 1671 1 0 2850 0\n")
    reads = _count_maps_reads(monkeypatch)
    now = [100.0]
    sc = ProcessScanner(proc_root=root, clock=lambda: now[0])
    sc.scan()
    # The same size and a CUDA mapping of the very same size swapped in: found at the next full read.
    shutil.copy(os.path.join(FIXTURES, "default_256m.maps"), tmp_path / "7" / "maps")
    for _ in range(5):
        now[0] += 1
        assert sc.scan().processes == []
    assert reads == [7]
    now[0] += mod.PLAIN_RECHECK_S
    assert [p.pid for p in sc.scan().processes] == [7] and reads == [7, 7]


def test_recheck_times_are_spread_over_the_period():
    import pinmon.collect.processes.scan as mod

    delays = [mod._recheck_after_s(pid) for pid in range(1, 2001)]
    assert min(delays) >= mod.PLAIN_RECHECK_S / 2 and max(delays) <= mod.PLAIN_RECHECK_S
    assert len({round(d) for d in delays}) >= mod.PLAIN_RECHECK_S / 2 - 1  # not all in one second


def test_without_statm_every_maps_is_read_each_scan(tmp_path, monkeypatch):
    root = fake_proc(tmp_path, {7: "non_cuda_shared_anon"})  # no statm file: read maps every time
    reads = _count_maps_reads(monkeypatch)
    sc = ProcessScanner(proc_root=root)
    sc.scan()
    sc.scan()
    assert reads == [7, 7]


def test_a_vanished_plain_process_is_forgotten(tmp_path, monkeypatch):
    root = fake_proc(tmp_path, {7: "non_cuda_shared_anon"})
    (tmp_path / "7" / "statm").write_text("10 5 1 1 0 2 0\n")
    sc = ProcessScanner(proc_root=root)
    sc.scan()
    shutil.rmtree(tmp_path / "7")
    res = sc.scan()
    assert res.scanned == 0 and res.processes == [] and sc._plain == {}


def test_a_described_live_process_without_cuda_is_kept_for_a_while(tmp_path, monkeypatch):
    # A traced process is described on request even when its maps show no CUDA yet: once per
    # DESCRIBE_TTL_S, not once per scan.
    import pinmon.collect.processes.scan as mod

    root = fake_proc(tmp_path, {7: "non_cuda_shared_anon"})
    calls = []
    monkeypatch.setattr(mod, "_describe", lambda pid: calls.append(pid) or ("n", "u", "c"))
    now = [100.0]
    sc = ProcessScanner(proc_root=root, clock=lambda: now[0])
    for _ in range(5):
        sc.scan()
        assert sc.describe(7) == ("n", "u", "c")
        now[0] += 1
    assert calls == [7]
    now[0] += mod.DESCRIBE_TTL_S
    sc.scan()
    sc.describe(7)
    assert calls == [7, 7]
    shutil.rmtree(tmp_path / "7")
    sc.scan()
    assert 7 not in sc._described  # gone: forgotten


def test_a_kernel_thread_is_not_read_again_until_its_recheck(tmp_path, monkeypatch):
    import pinmon.collect.processes.scan as mod

    root = fake_proc(tmp_path, {2: None, 7: "non_cuda_shared_anon"})
    (tmp_path / "2" / "maps").write_text("")  # a kernel thread: no address space
    (tmp_path / "2" / "statm").write_text("0 0 0 0 0 0 0\n")
    (tmp_path / "7" / "statm").write_text("4969 4153 1671 1 0 2850 0\n")
    opened = []
    real_open = mod._open_proc
    monkeypatch.setattr(mod, "_open_proc", lambda pid, name, r: opened.append((pid, name)) or real_open(pid, name, r))
    now = [100.0]
    sc = ProcessScanner(proc_root=root, clock=lambda: now[0])
    assert sc.scan().scanned == 2
    assert (2, "statm") in opened and (2, "maps") not in opened  # its size says it: nothing to read
    opened.clear()
    now[0] += 1
    res = sc.scan()
    assert res.scanned == 2 and [p for p, _ in opened] == [7]  # not even its statm this time
    # Its pid reused by a CUDA process: found at the kernel thread's re-check.
    shutil.copy(os.path.join(FIXTURES, "default_256m.maps"), tmp_path / "2" / "maps")
    (tmp_path / "2" / "statm").write_text("9969 5000 1700 1 0 2900 0\n")
    now[0] += mod.PLAIN_RECHECK_S
    assert [p.pid for p in sc.scan().processes] == [2]
    shutil.rmtree(tmp_path / "2")
    sc.scan()
    assert 2 not in sc._no_mm


def test_non_ascii_digit_names_in_proc_are_not_pids(tmp_path):
    root = fake_proc(tmp_path, {101: "default_256m"})
    (tmp_path / "\u00b2").mkdir()  # "²".isdigit() is True, int("²") raises
    (tmp_path / "\u0663").mkdir()  # ARABIC-INDIC DIGIT THREE: int() takes it, /proc never has it
    res = ProcessScanner(proc_root=root).scan()
    assert [p.pid for p in res.processes] == [101] and res.vanished == 0


def test_denied_processes_are_named_by_their_comm_printable_and_few(tmp_path, monkeypatch):
    import pinmon.collect.processes.scan as mod

    root = fake_proc(tmp_path, {pid: "default_256m" for pid in range(10, 18)})
    for pid in range(10, 18):
        (tmp_path / str(pid) / "comm").write_text("evil\x1b[2J\n" if pid == 10 else f"job{pid}\n")

    def deny(pid, proc_root):
        raise PermissionError(13, "denied")

    monkeypatch.setattr(mod, "read_maps", deny)
    res = ProcessScanner(proc_root=root).scan()
    note = scan_notice(res, euid=0)
    assert "pid 10 (evil\\x1b[2J), pid 11 (job11)" in note and "and 3 more" in note and "\x1b" not in note


def test_statm_reader_reads_each_process_again_through_its_open_file_and_lets_gone_ones_go():
    """The live /proc's statm files stay open between scans: a read from the start gives the size as
    it is now; a process that exits fails the next read and its file is closed; the cap holds."""
    import mmap
    import subprocess

    from pinmon.collect.processes.scan import StatmReader, read_statm_size

    reader = StatmReader(kept=2)
    me = os.getpid()

    def agrees(pid: int) -> bool:
        """The kept file reads what a fresh open reads, once the process is done starting (its
        exec changes the size meanwhile)."""
        return any(read_statm_size(pid) == reader.size(pid) == read_statm_size(pid) for _ in range(1000))

    before = reader.size(me)
    grown = mmap.mmap(-1, 64 << 20)  # 64 MiB more address space
    try:
        assert reader.size(me) == read_statm_size(me) != before
    finally:
        grown.close()
    assert len(reader) == 1
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert agrees(child.pid)
        assert len(reader) == 2
        third = subprocess.Popen(["sleep", "30"])
        try:
            assert agrees(third.pid)  # past the cap: read by path
            assert len(reader) == 2
        finally:
            third.kill()
            third.wait()
    finally:
        child.kill()
        child.wait()
    with pytest.raises(OSError, match="No such file"):
        reader.size(child.pid)  # gone: its kept file fails, and no new one opens
    assert len(reader) == 1
    reader.keep_only(set())
    assert len(reader) == 0
    reader.size(me)
    reader.close()
    assert len(reader) == 0


def test_a_scan_of_the_live_proc_keeps_no_file_of_a_kernel_thread_or_a_gone_pid():
    from pinmon.collect.processes.scan import ProcessScanner

    scanner = ProcessScanner()
    try:
        scanner.scan()
        kept = scanner._statm._fds  # the reader's own table: which pids have a file open
        assert os.getpid() in kept
        assert not [pid for pid in kept if scanner._no_mm.get(pid)], "a kernel thread's statm kept open"
    finally:
        scanner.close()
    assert not scanner._statm._fds


def test_a_plain_process_whose_statm_stays_open_is_re_read_less_often(monkeypatch):
    """With its statm kept open a reused pid fails the kept read, so the periodic re-read of a
    process with no NVIDIA mapping (unchanged size) comes HELD_RECHECK_FACTOR times less often."""
    from pinmon.collect.processes import scan as mod

    me = os.getpid()
    now = [1000.0]
    reads = []
    real = mod.read_maps
    monkeypatch.setattr(mod, "read_maps", lambda pid, root="/proc": reads.append(pid) or real(pid, root))
    # The size read through the kept file, as one that stays: this process may map more meanwhile.
    real_size = mod.StatmReader.size
    monkeypatch.setattr(mod.StatmReader, "size", lambda self, pid: (real_size(self, pid), b"4242")[1])
    scanner = mod.ProcessScanner(pids=[me], clock=lambda: now[0])
    try:
        scanner.scan()
        assert reads == [me] and scanner._statm.holds(me)
        now[0] += mod.PLAIN_RECHECK_S + 1  # past the plain re-check of a pid read by path
        scanner.scan()
        assert reads == [me]
        now[0] += mod.PLAIN_RECHECK_S * mod.HELD_RECHECK_FACTOR
        scanner.scan()
        assert reads == [me, me]
    finally:
        scanner.close()
