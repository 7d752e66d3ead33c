"""A program that has exited is dead even while its parent has not reaped it (a zombie, state Z):
its report is not read (and is removed), the collector shows no row for it, and the /proc scan does
not count it as a live holder of pinned memory."""
import os
import subprocess
import sys

import pytest

from pinmon.collect.processes.scan import ProcessScanner
from pinmon.collect.traced.reader import read_reports
from pinmon.trace import report_file as R
from tests.cuda_stand_in import treat_as_cuda
from tests.waiting import wait_until

from .fakeproc import fake_proc
from .test_discovery import own_report, write


def state_of(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[0]


@pytest.fixture
def zombie_maker():
    """Starts a child that exits when told and is not reaped until the test ends."""
    children = []

    def start():
        p = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
        children.append(p)
        return p

    def kill(p):
        p.stdin.close()  # the child exits; nobody waits for it yet: a zombie
        wait_until(lambda: state_of(p.pid) == "Z", what="the child to become a zombie")

    yield start, kill
    for p in children:
        if p.stdin and not p.stdin.closed:
            p.stdin.close()
        p.wait(10)


def test_a_zombie_has_no_start_time(tmp_path):
    for pid, state in ((11, "S"), (12, "R"), (13, "Z"), (14, "X"), (15, "D")):
        fake_proc(tmp_path, pid, 1000, ticks=500, state=state)
    assert [R.proc_start_ticks(pid, str(tmp_path)) for pid in (11, 12, 13, 14, 15)] == [500, 500, None, None, 500]


def test_the_report_of_an_exited_unreaped_program_is_dropped_and_removed(report_dir, zombie_maker):
    start, kill = zombie_maker
    p = start()
    ticks = R.proc_start_ticks(p.pid)
    write(report_dir, f"{p.pid}.json", {**own_report(), "pid": p.pid, "start_ticks": ticks, "final": True})
    assert list(read_reports(report_dir).processes) == [p.pid]  # alive: shown
    kill(p)
    res = read_reports(report_dir)
    assert res.processes == {} and res.removed == 1 and os.listdir(report_dir) == []


def test_the_collector_shows_no_row_for_a_zombie(report_dir, zombie_maker, monkeypatch):
    from pinmon.collect.live import LiveCollector

    start, kill = zombie_maker
    p = start()
    write(report_dir, f"{p.pid}.json", {**own_report(), "pid": p.pid, "start_ticks": R.proc_start_ticks(p.pid)})
    monkeypatch.setenv("PINMON_TRACE_DIR", report_dir)
    treat_as_cuda(monkeypatch, [p.pid])
    with LiveCollector(use_nvml=False, pids=[p.pid]) as col:
        assert [r.source for r in col.snapshot().processes] == ["traced"]
        kill(p)
        snap = col.snapshot()
    assert snap.processes == () and snap.host.pinned_bytes_est == 0


def test_the_proc_scan_does_not_list_a_zombie(tmp_path, zombie_maker):
    # A zombie keeps its pid but has no address space: statm reads all zeros, whatever maps said before.
    fake_proc(tmp_path, 4242, 1000, state="Z")
    (tmp_path / "4242" / "statm").write_text("0 0 0 0 0 0 0\n")
    (tmp_path / "4242" / "maps").write_text(
        "7f0000000000-7f0040000000 rw-s 00000000 00:05 12 /dev/zero (deleted)\n"
        "7f1000000000-7f1000001000 rw-s 00000000 00:05 13 /dev/nvidiactl\n")
    res = ProcessScanner(proc_root=str(tmp_path)).scan()
    assert res.processes == [] and res.vanished == 0
    start, kill = zombie_maker
    p = start()
    kill(p)
    res = ProcessScanner(pids=[p.pid]).scan()
    assert res.processes == [] and res.vanished == 0 and res.denied == 0
