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


def test_unchanged_maps_keep_their_estimate_without_a_parse(tmp_path, monkeypatch):
    import pinmon.collect.processes as mod

    root = fake_proc(tmp_path, {7: "context_only", 8: "default_256m"})
    parsed = []
    real = mod.estimate_pinned
    monkeypatch.setattr(mod, "estimate_pinned", lambda text: parsed.append(text) or real(text))
    sc = ProcessScanner(proc_root=root)
    first = sc.scan()
    assert len(parsed) == 2
    second = sc.scan()
    assert len(parsed) == 2  # the same bytes: no parse
    assert [p.pinned_bytes for p in second.processes] == [p.pinned_bytes for p in first.processes]
    assert [p.mappings_churn for p in second.processes] == [0, 0]
    shutil.copy(os.path.join(FIXTURES, "default_256m.maps"), tmp_path / "7" / "maps")
    third = sc.scan()
    assert len(parsed) == 3  # only the process whose maps changed
    assert third.processes[0].pinned_bytes == third.processes[1].pinned_bytes
    assert third.processes[0].mappings_churn > 0 and third.processes[1].mappings_churn == 0


def test_descriptions_are_cached_for_a_while_and_dropped_with_the_process(tmp_path, monkeypatch):
    import pinmon.collect.processes as mod

    root = fake_proc(tmp_path, {7: "context_only"})
    calls = []
    monkeypatch.setattr(mod, "_describe", lambda pid: calls.append(pid) or (f"n{len(calls)}", "u", "c"))
    now = [100.0]
    sc = ProcessScanner(proc_root=root, clock=lambda: now[0])
    assert sc.scan().processes[0].name == "n1"
    now[0] += mod.DESCRIBE_TTL_S - 1
    assert sc.scan().processes[0].name == "n1" and calls == [7]
    now[0] += 2
    assert sc.scan().processes[0].name == "n2"  # stale: looked up again
    shutil.rmtree(tmp_path / "7")
    assert sc.scan().processes == []
    (tmp_path / "7").mkdir()  # a new process under the same pid is described afresh
    shutil.copy(os.path.join(FIXTURES, "context_only.maps"), tmp_path / "7" / "maps")
    assert sc.scan().processes[0].name == "n3"


def test_maps_are_read_whole_past_one_read_chunk(tmp_path):
    import pinmon.collect.processes as mod

    root = fake_proc(tmp_path, {9: "small_4k_x1000"})
    data = mod.read_maps(9, root)
    assert len(data) > mod._READ_CHUNK
    with open(os.path.join(root, "9", "maps"), "rb") as f:
        assert data == f.read()
