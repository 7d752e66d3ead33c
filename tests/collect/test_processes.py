"""The process scanner on a fake /proc: CUDA processes kept, vanished/denied ones counted, churn."""
import os
import shutil

from pinmon.collect.processes import ProcessScanner, scan_notice

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
    assert abs(p.pinned_bytes - 256 * MIB) <= 10 * MIB and p.source == "est."
    assert p.mappings_churn is None  # first scan: no baseline yet
    assert res.vanished == 1  # pid 103 has no maps file: it exited mid-scan
    assert "exited" in scan_notice(res)


def test_churn_between_scans(tmp_path):
    root = fake_proc(tmp_path, {7: "context_only"})
    sc = ProcessScanner(proc_root=root)
    sc.scan()
    assert sc.scan().processes[0].mappings_churn == 0
    shutil.copy(os.path.join(FIXTURES, "small_4k_x1000.maps"), tmp_path / "7" / "maps")
    assert sc.scan().processes[0].mappings_churn > 0


def test_permission_denied_is_counted(tmp_path, monkeypatch):
    root = fake_proc(tmp_path, {5: "default_256m"})
    import pinmon.collect.processes as mod

    def deny(pid, proc_root):
        raise PermissionError(13, "denied")

    monkeypatch.setattr(mod, "read_maps", deny)
    res = ProcessScanner(proc_root=root).scan()
    assert res.processes == [] and res.denied == 1
    assert "denied" in scan_notice(res)


def test_no_notice_when_clean(tmp_path):
    root = fake_proc(tmp_path, {1: "non_cuda_shared_anon"})
    assert scan_notice(ProcessScanner(proc_root=root).scan()) is None


def test_real_proc_scan_does_not_raise():
    res = ProcessScanner().scan()
    assert res.scanned > 0
