"""Discovery of tracer reports: what a reader trusts, what it refuses and cleans, and the collector's
merge (a traced pid's row gets the exact figures; a traced process without pinned mappings appears)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pinmon.collect.traced.reader import merge_traced, read_reports
from pinmon.trace import report_file as R
from pinmon.trace.state import TracerState
from tests import factories as make
from tests.cuda_stand_in import treat_as_cuda
from tests.waiting import wait_until

from .conftest import FAKES

MIB = 1 << 20
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def own_report(**figures):
    st = TracerState()
    for i in range(30):
        st.record_alloc(0x10000 * (i + 1), 4096, site="train.py:12")
    body = st.report()
    body.update(figures)
    return {"schema": R.TRACE_SCHEMA, "pid": os.getpid(), "start_ticks": R.proc_start_ticks(os.getpid()),
            "uid": os.getuid(), "time": time.time(), **body}


def write(d, name, data, mode=0o600):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))
    os.chmod(path, mode)
    return path


def test_a_live_report_is_read(report_dir):
    R.write_report(report_dir, os.getpid(), own_report())
    res = read_reports(report_dir)
    assert list(res.processes) == [os.getpid()] and res.rejected == []
    from pinmon.model import ProcessPinned

    row = res.processes[os.getpid()].apply(ProcessPinned(pid=os.getpid()))
    assert row.source == "traced" and row.held.pinned_bytes == 30 * 4096
    assert row.allocations.median_bytes == 4096 and row.call_sites == {"alloc": "train.py:12"}
    assert row.copies.wc_readbacks == 0 and row.allocations.per_s > 0


def test_dead_pid_and_reused_pid_reports_are_ignored_and_removed(report_dir):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    write(report_dir, f"{dead}.json", {**own_report(), "pid": int(dead)})
    reused = own_report()
    reused["start_ticks"] -= 1  # our pid, but another process's start time: pid reuse
    write(report_dir, f"{os.getpid()}.json", reused)
    res = read_reports(report_dir)
    assert res.processes == {} and res.removed == 2 and os.listdir(report_dir) == []


@pytest.mark.parametrize("content, why", [
    ('{"schema": "pinmon.trace/1", "pid": ', "not a whole JSON report"),
    ("\x00\xff garbage", "not a whole JSON report"),
    ('{"schema": "other/1"}', "not a pinmon.trace/1 report"),
    ("[1, 2]", "not a pinmon.trace/1 report"),
])
def test_garbled_reports_are_refused(report_dir, content, why):
    write(report_dir, f"{os.getpid()}.json", content)
    res = read_reports(report_dir)
    assert res.processes == {} and why in res.rejected[0]


def test_a_report_naming_another_pid_is_refused(report_dir):
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        write(report_dir, f"{child.pid}.json", own_report())  # a live pid of ours, our report inside
        assert "names pid" in read_reports(report_dir).rejected[0]
    finally:
        child.stdin.close()
        child.wait(10)


def test_open_mode_symlink_and_owner_are_refused(report_dir, tmp_path):
    write(report_dir, f"{os.getpid()}.json", own_report(), mode=0o644)
    assert "mode 644" in read_reports(report_dir).rejected[0]
    os.unlink(os.path.join(report_dir, f"{os.getpid()}.json"))
    target = write(str(tmp_path), "elsewhere.json", own_report())
    os.symlink(target, os.path.join(report_dir, f"{os.getpid()}.json"))
    res = read_reports(report_dir)
    assert res.processes == {} and "cannot open" in res.rejected[0]
    os.unlink(os.path.join(report_dir, f"{os.getpid()}.json"))
    write(report_dir, f"{os.getpid()}.json", own_report())
    # A reader of another uid refuses a file it does not own (root reads everyone's).
    res = read_reports(report_dir, uid=os.getuid() + 4242, dir_owner=os.getuid())
    assert res.processes == {} and "owned by uid" in res.rejected[0]


def test_an_unsafe_directory_is_refused(tmp_path):
    d = tmp_path / "open"
    d.mkdir()
    os.chmod(d, 0o777)
    res = read_reports(str(d))
    assert res.processes == {} and "mode 777" in res.rejected[0]
    assert read_reports(str(tmp_path / "missing")).rejected == []


def test_temp_files_of_killed_writers_are_removed(report_dir):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    write(report_dir, f".{dead}.abcd.tmp", '{"schema": "pinmon.trace/1", "pi')
    young_live = write(report_dir, f".{os.getpid()}.ef01.tmp", '{"half')
    res = read_reports(report_dir)
    assert res.removed == 1 and os.path.exists(young_live)
    os.utime(young_live, (time.time() - 120, time.time() - 120))
    assert read_reports(report_dir).removed == 1 and os.listdir(report_dir) == []


def test_merge_replaces_estimates_and_adds_traced_only_processes(report_dir):
    R.write_report(report_dir, os.getpid(), own_report())
    res = read_reports(report_dir)
    est = [make.process(os.getpid(), "python", pinned_bytes=8 * MIB, mappings=3),
           make.process(1, "init", pinned_bytes=2 * MIB)]
    rows = merge_traced(est, res)
    assert rows[0].source == "traced" and rows[0].held.pinned_bytes == 30 * 4096 and rows[0].held.mappings == 3
    assert rows[1].source == "est." and rows[1].held.pinned_bytes == 2 * MIB
    alone = merge_traced([], res, describe=lambda pid: ("trainer", "me", "python train.py"))
    assert [(r.pid, r.identity.name, r.source) for r in alone] == [(os.getpid(), "trainer", "traced")]
    assert merge_traced([], res, only_pids=[1]) == []


def test_the_collector_shows_traced_processes(report_dir, monkeypatch):
    from pinmon.collect.live import LiveCollector

    monkeypatch.setenv("PINMON_TRACE_DIR", report_dir)
    R.write_report(report_dir, os.getpid(), own_report())
    with LiveCollector(use_nvml=False, pids=[os.getpid()]) as col:
        assert col.snapshot().processes == ()  # this process maps no NVIDIA device: its report is not taken
    treat_as_cuda(monkeypatch, [os.getpid()])
    with LiveCollector(use_nvml=False, pids=[os.getpid()]) as col:
        snap = col.snapshot()
    rows = [p for p in snap.processes if p.pid == os.getpid()]
    assert len(rows) == 1 and rows[0].source == "traced" and rows[0].allocations.median_bytes == 4096
    # A report fills in its row, never a host total; its pinned bytes that no mapping shows (this
    # process maps none) fit in the kernel's pinned pages that no mapping explains.
    assert snap.host.pinned_bytes_est == 0
    unexplained = snap.host.unattributed_pinned_bytes
    assert rows[0].held.pinned_bytes == (30 * 4096 if unexplained is None else min(30 * 4096, unexplained))


WORKER = r"""
import os, sys, time
import pinmon.trace
pinmon.trace.install()
import cupy  # the fake; imported after install(), so the import hook wraps it
n = int(sys.argv[1])
rt = cupy.cuda.runtime
ptrs = [rt.hostAlloc(4096 * n, 0) for _ in range(n)]
print("ready", flush=True)
time.sleep(float(sys.argv[2]))
"""


def spawn(report_dir, n, seconds):
    env = dict(os.environ, PINMON_TRACE_DIR=report_dir, PINMON_TRACE_INTERVAL="0.1",
               PYTHONPATH=os.pathsep.join([FAKES, ROOT]))
    p = subprocess.Popen([sys.executable, "-c", WORKER, str(n), str(seconds)], env=env,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_concurrent_traced_processes_are_discovered_together(report_dir):
    procs = [spawn(report_dir, n, 4) for n in (1, 2, 3, 4)]
    try:
        want = {p.pid: n for p, n in zip(procs, (1, 2, 3, 4))}

        def complete():
            res = read_reports(report_dir)
            got = {pid: t.report["allocs"]["count"] for pid, t in res.processes.items()}
            return res if got == want else None

        res = wait_until(complete, what="the four processes' reports")
        assert res.rejected == []
        for p, n in zip(procs, (1, 2, 3, 4)):
            assert res.processes[p.pid].held_figures()["pinned_bytes"] == n * 4096 * n
            assert res.processes[p.pid].report["hooks"]["cupy.cuda.runtime.hostAlloc"] is True
    finally:
        for p in procs:
            p.wait(20)
    # Each wrote a final report at exit; once they are gone the reports are stale and cleaned.
    res = read_reports(report_dir)
    assert res.processes == {} and res.removed == 4


def test_a_killed_writer_leaves_nothing_a_reader_trusts(report_dir):
    p = spawn(report_dir, 2, 30)
    wait_until(lambda: p.pid in read_reports(report_dir).processes, what="the process's report")
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    res = read_reports(report_dir)
    assert p.pid not in res.processes and os.listdir(report_dir) == []


def test_pinmon_pinned_shows_traced_processes(report_dir, monkeypatch, capsys):
    from pinmon.cli import main

    monkeypatch.setenv("PINMON_TRACE_DIR", report_dir)
    R.write_report(report_dir, os.getpid(), own_report())
    treat_as_cuda(monkeypatch, [os.getpid()])
    assert main(["pinned", "--pid", str(os.getpid()), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = [p for p in out["processes"] if p["pid"] == os.getpid()]
    # This process maps no pinned memory: the report's bytes are held to what the kernel counts
    # and no mapping explains (no report reaches the totals).
    from pinmon.collect.host.kernel_pins import KernelPinsReader

    counted = KernelPinsReader().read().pinned_bytes
    assert row["source"] == "traced" and row["allocations"]["median_bytes"] == 4096
    assert row["held"]["pinned_bytes"] == (30 * 4096 if counted is None else min(30 * 4096, counted))
    assert out["total_pinned_bytes"] == 0
    assert not any("not a CUDA process" in n for n in out["notices"])


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make directories of two other uids")
def test_root_looks_up_the_directory_of_each_uid_with_a_live_process(tmp_path):
    from pinmon.collect.traced import reader as mod

    tmp = str(tmp_path)
    for name, uid in (("pinmon-1000", 1000), ("pinmon-0", 0), ("other", 1000), ("pinmon-1002", 1003),
                      ("pinmon-1001", 1001)):
        (tmp_path / name).mkdir()
        os.chown(tmp_path / name, uid, uid)  # pinmon-1002 is not uid 1002's: left out
    reader = mod.ReportReader(tmp=tmp)
    # uid 1001 has no live process: its directory is not read; root's own is its runtime dir.
    assert reader._tmp_dirs([0, 1000, 1002, 4000, 1000]) == [(1000, os.path.join(tmp, "pinmon-1000"))]
    assert mod.ReportReader(tmp=str(tmp_path / "missing"))._tmp_dirs([1000]) == []
