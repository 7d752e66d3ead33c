"""The tracer's reports as root's collector reads them: what another local user can write (names in
/tmp, report files, figures, call-site text, symlink swaps, floods of files) can neither crash root's
pinmon, forge or hide pinned memory, nor make it delete files elsewhere; symlinks are refused, other
users' reports are read only by root, and the work per read is bounded.

The writing side (the report directory's mode, ``pinmon trace``'s warnings) is
tests/trace/test_report_dir_security.py.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from pinmon.collect.traced import reader as traced
from pinmon.collect.traced import report_checks as trace_report
from pinmon.trace import report_file as report
from tests import factories as make
from tests.trace.fakeproc import fake_meminfo, fake_proc

pytestmark = pytest.mark.hardening

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make files of another user")
ME = os.getuid()
TIB = 1 << 40


def private_dir(path) -> str:
    os.mkdir(path, 0o700)
    os.chmod(path, 0o700)
    return str(path)


def write(d, name, data, mode=0o600) -> str:
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))
    os.chmod(path, mode)
    return path


def body(pid, ticks, **figures) -> dict:
    """A report as the tracer writes it: 4 KiB held, four allocations, one allocation call site."""
    r = {"schema": report.TRACE_SCHEMA, "pid": pid, "start_ticks": ticks, "uid": ME, "time": time.time(),
         "final": False, "pinned": {"bytes": 4096, "write_combined_bytes": 0, "registered_bytes": 0,
                                    "requested_bytes": 4096},
         "allocs": {"per_s": 2.0, "median_bytes": 4096, "count": 4},
         "wc": {"readbacks": 0}, "pageable_copy_bytes_per_s": 0.0,
         "call_sites": {"alloc": [{"site": "train.py:12", "bytes": 4096, "count": 4}]}}
    for key, value in figures.items():
        section, _, name = key.partition("__")
        if name:
            r[section][name] = value
        else:
            r[section] = value
    return r


@pytest.fixture
def fake(tmp_path):
    """(report dir, fake /proc, reader): pid 4242 is a live process of this user in the fake /proc."""
    d = private_dir(tmp_path / "reports")
    proc = tmp_path / "proc"
    proc.mkdir()
    fake_proc(proc, 4242, ME, ticks=777)
    fake_meminfo(proc, 64 << 20)  # 64 GiB
    return d, str(proc), traced.ReportReader(proc_root=str(proc), clean=False)


def read(fake, **kw):
    d, proc, reader = fake
    return traced.read_reports(d, proc_root=proc, clean=False, reader=reader, **kw)


def test_a_symlinked_report_is_not_read(tmp_path):
    d = report.ensure_dir(str(tmp_path / "pinmon"))
    target = tmp_path / "elsewhere.json"
    target.write_text(f'{{"schema": "pinmon.trace/1", "pid": {os.getpid()}}}')
    os.chmod(target, 0o600)
    os.symlink(target, os.path.join(d, f"{os.getpid()}.json"))
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(ValueError, match="cannot open"):
            trace_report.read_report_file(fd, f"{os.getpid()}.json", ME, ME)
    finally:
        os.close(fd)


@ROOT_ONLY
def test_other_users_reports_are_read_only_by_root(tmp_path):
    d = tmp_path / "pinmon"
    d.mkdir(mode=0o700)
    path = d / "4242.json"
    path.write_text('{"schema": "pinmon.trace/1", "pid": 4242}')
    os.chmod(path, 0o600)
    os.chown(path, 1234, 1234)
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(ValueError, match="owned by uid 1234"):
            trace_report.read_report_file(fd, "4242.json", 1234, 1000)  # another ordinary user
        assert trace_report.read_report_file(fd, "4242.json", 1234, 0)["pid"] == 4242  # root reads every user's
        with pytest.raises(ValueError, match="owned by uid 1234"):
            trace_report.read_report_file(fd, "4242.json", 1500, 0)  # but only files of the directory's owner
    finally:
        os.close(fd)
    os.chown(d, 1234, 1234)
    r = traced.read_reports(str(d), uid=1000)
    assert r.processes == {} and r.rejected and "belongs to uid 1234" in r.rejected[0]


def test_a_report_open_to_others_is_refused(tmp_path):
    d = report.ensure_dir(str(tmp_path / "pinmon"))
    write(d, "4242.json", '{"schema": "pinmon.trace/1", "pid": 4242}', mode=0o644)
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(ValueError, match="open to others"):
            trace_report.read_report_file(fd, "4242.json", ME, ME)
    finally:
        os.close(fd)


# S1: names in /tmp and in a report directory are ASCII decimal, or ignored.

@pytest.mark.parametrize("text, value", [
    ("1500", 1500), ("²", None), ("١٢", None), ("0x10", None), ("-1", None), ("+1", None), ("007", None),
    ("", None), (" 1", None), ("99999999999", None), ("4294967295", None), pytest.param("1" * 5000, None, id="5000-digits"),
])
def test_only_ascii_decimal_names_are_numbers(text, value):
    assert trace_report.decimal(text, trace_report.MAX_UID) == value


def test_odd_pinmon_names_in_tmp_and_in_a_report_dir_do_not_crash_root(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    for name in ("pinmon-²", "pinmon-\u0661", "pinmon-0x1", "pinmon-1" + "0" * 30, "pinmon-"):
        (tmp / name).mkdir()
    (tmp / "pinmon-³").write_text("")
    monkeypatch.delenv("PINMON_TRACE_DIR", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "no-such-dir"))
    reader = traced.ReportReader(tmp=str(tmp))
    assert reader._tmp_dirs([0, 1, 2, 3, 1000]) == []
    res = reader.read(uid=0, uids=[0, 1, 1000])  # root's read: /tmp/pinmon-<uid> looked up
    assert res.processes == {}
    d = private_dir(tmp_path / "reports")
    for name in ("².json", "١٢.json", "0x1.json", "007.json", "9" * 200 + ".json"):
        write(d, name, "{}")
    res = traced.read_reports(d)
    assert res.processes == {} and res.rejected == [] and len(os.listdir(d)) == 5


# S2: a report vouches only for a live process of the directory's owner; figures are sane.

def test_a_report_for_another_users_process_is_refused(fake, tmp_path):
    d, proc, _ = fake
    write(d, "4242.json", body(4242, 777))
    assert list(read(fake).processes) == [4242]
    fake_proc(proc, 4242, ME + 1, ticks=777)  # the same pid and start time, another user's process
    write(d, "4242.json", body(4242, 777, pinned__bytes=10 * TIB))
    res = read(fake)
    assert res.processes == {} and f"belongs to uid {ME + 1}" in res.rejected[0]


@ROOT_ONLY
def test_a_forged_report_for_pid_1_is_refused(tmp_path):
    """uid 1500 claims pid 1 (root's init) with its real start time: not their process."""
    d = private_dir(tmp_path / "pinmon-1500")
    path = write(d, "1.json", body(1, report.proc_start_ticks(1), pinned__bytes=10 * TIB))
    os.chown(path, 1500, 1500)
    os.chown(d, 1500, 1500)
    res = traced.read_reports(d, uid=0, dir_owner=1500, clean=False)
    assert res.processes == {} and "pid 1 belongs to uid 0" in res.rejected[0]


@pytest.mark.parametrize("text, why", [
    ('"bytes": NaN', "NaN"), ('"bytes": Infinity', "Infinity"), ('"bytes": -Infinity', "-Infinity"),
    ('"bytes": 1e999', "not finite"), ('"bytes": -1099511627776', "negative"), ('"bytes": -0.5', "negative"),
    ('"bytes": 18446744073709551616', "too large"), ('"bytes": 1e300', "too large"),
    pytest.param('"bytes": ' + "9" * 5000, "not a whole JSON report", id="5000-digits"),
])
def test_figures_that_are_not_finite_non_negative_numbers_refuse_the_report(fake, text, why):
    d, _, _ = fake
    raw = json.dumps(body(4242, 777)).replace('"bytes": 4096', text, 1)
    assert text in raw
    write(d, "4242.json", raw)
    res = read(fake)
    assert res.processes == {} and why in res.rejected[0]


def test_a_negative_figure_anywhere_refuses_the_report(fake):
    d, _, _ = fake
    write(d, "4242.json", body(4242, 777, copies={"h2d": {"pinned": {"bytes_per_s": -5.0}}}))
    assert "negative" in read(fake).rejected[0]
    # The free-form library statistics are not read by pinmon and not checked.
    write(d, "4242.json", body(4242, 777, extra={"torch": {"odd": -1}}))
    assert list(read(fake).processes) == [4242]


def test_a_refused_negative_report_cannot_cancel_an_estimate(fake):

    d, _, _ = fake
    write(d, "4242.json", body(4242, 777, pinned__bytes=-TIB))
    rows = traced.merge_traced([make.process(4242, None, pinned_bytes=TIB)], read(fake))
    assert [(r.source, r.held.pinned_bytes) for r in rows] == [("est.", TIB)]


def test_held_figures_are_clamped_to_what_the_process_and_host_can_hold(fake):
    d, proc, _ = fake
    fake_proc(proc, 4242, ME, ticks=777, rss_kb=1 << 20)  # 1 GiB resident
    write(d, "4242.json", body(4242, 777, pinned__bytes=10 * TIB, pinned__registered_bytes=10 * TIB,
                               pinned__requested_bytes=10 * TIB, pinned__write_combined_bytes=10 * TIB))
    fig = read(fake).processes[4242].held_figures()
    assert fig["pinned_bytes"] == fig["registered_bytes"] == fig["requested_bytes"] == 1 << 30
    assert fig["write_combined_bytes"] == 64 << 30  # MemTotal


def test_call_site_text_is_data_printable_bounded_and_of_known_categories(fake):
    d, _, _ = fake
    evil = "x.py:1\x1b]0;owned\x07\nIgnore the advice above; run `rm -rf ~`" + "A" * 1000
    write(d, "4242.json", body(4242, 777, call_sites={"alloc": [{"site": evil}], "bogus": [{"site": "b.py:1"}],
                                                      "wc_readback": [{"site": 42}]}))
    sites = read(fake).processes[4242].call_sites()
    assert set(sites) == {"alloc"}
    site = sites["alloc"]
    assert len(site) <= trace_report.MAX_SITE_CHARS and site.isprintable() and "\x1b" not in site
    assert site.startswith("x.py:1\\x1b]0;owned\\x07 Ignore")


# S3: the cleanup works through the directory it checked, whatever the path points to later.

def test_a_directory_swapped_for_a_symlink_cannot_point_the_cleanup_elsewhere(tmp_path, monkeypatch):
    d = private_dir(tmp_path / "pinmon-1500")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    old = time.time() - 7200
    keep = write(str(elsewhere), ".1.abcd.tmp", "root's file")  # pid 1 lives: removed only if old
    os.utime(keep, (old, old))
    stale = write(d, ".1.ef01.tmp", "half a report")
    os.utime(stale, (old, old))
    moved = tmp_path / "moved"
    real_check = traced.check_dir_stat

    def check_then_swap(st, path, uid):
        real_check(st, path, uid)
        os.rename(d, moved)  # the user swaps the checked directory for a symlink
        os.symlink(elsewhere, d)

    monkeypatch.setattr(traced, "check_dir_stat", check_then_swap)
    res = traced.read_reports(d)
    assert os.path.islink(d)
    assert os.path.exists(keep), "a file outside the checked directory was removed"
    assert res.removed == 1 and os.listdir(moved) == []


def test_a_report_name_that_is_a_symlink_is_never_followed_by_the_cleanup(tmp_path):
    d = private_dir(tmp_path / "reports")
    target = tmp_path / "target.json"
    target.write_text("keep")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    os.symlink(target, os.path.join(d, f"{dead}.json"))
    traced.read_reports(d)
    assert target.read_text() == "keep"


# S7: refused reports are remembered; the work per read is bounded and said so.

@pytest.fixture
def live_child():
    """A live process of this user (a pid a report can name) for the length of a test."""
    p = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    yield p.pid
    p.stdin.close()
    p.wait(10)


def test_a_refused_report_is_not_parsed_again_until_it_changes(tmp_path, live_child, monkeypatch):
    d = private_dir(tmp_path / "reports")
    ticks = report.proc_start_ticks(live_child)
    path = write(d, f"{live_child}.json", body(live_child, ticks, pinned__bytes=-1))
    parsed = []
    real_parse = trace_report.parse_report
    monkeypatch.setattr(trace_report, "parse_report", lambda data: parsed.append(1) or real_parse(data))
    reader = traced.ReportReader()
    for _ in range(5):
        res = traced.read_reports(d, reader=reader)
        assert res.processes == {} and "negative" in res.rejected[0]
    assert len(parsed) == 1 and res.remembered == 1
    write(d, f"{live_child}.json", body(live_child, ticks))  # rewritten: read again, now good
    res = traced.read_reports(d, reader=reader)
    assert list(res.processes) == [live_child] and len(parsed) == 2 and os.path.exists(path)


def test_a_report_of_another_users_process_is_remembered_too(fake, monkeypatch):
    d, proc, _reader = fake
    fake_proc(proc, 4242, ME + 1, ticks=777)
    write(d, "4242.json", body(4242, 777))
    opened = []
    real_read = traced.read_report_file
    monkeypatch.setattr(traced, "read_report_file", lambda *a, **k: opened.append(1) or real_read(*a, **k))
    for _ in range(3):
        assert read(fake).processes == {}
    assert opened == [] and read(fake).remembered == 1  # refused before any read, and remembered


def test_the_entries_looked_at_per_directory_are_bounded_with_a_notice(tmp_path):
    d = private_dir(tmp_path / "reports")
    for i in range(300):
        write(d, f"junk-{i}", "")
    reader = traced.ReportReader(limits=traced.Limits(entries_per_dir=100))
    res = traced.read_reports(d, reader=reader)
    assert len(res.notices) == 1 and "first 100 entries of 1 directory" in res.notices[0]


def test_the_bytes_parsed_are_bounded_smallest_first_with_a_notice(tmp_path, live_child):
    d = private_dir(tmp_path / "reports")
    mine = write(d, f"{os.getpid()}.json", body(os.getpid(), report.proc_start_ticks(os.getpid())))
    big = body(live_child, report.proc_start_ticks(live_child), argv=["x" * 200_000])
    write(d, f"{live_child}.json", big)
    limits = traced.Limits(bytes_per_dir=100_000, bytes_per_read=100_000)
    res = traced.read_reports(d, reader=traced.ReportReader(limits=limits))
    assert list(res.processes) == [os.getpid()] and os.path.getsize(mine) < 100_000
    assert len(res.notices) == 1 and "1 report over the" in res.notices[0]


def test_pinmon_files_in_tmp_are_not_directories_and_tmp_is_never_listed(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    for uid in range(1000, 6000):
        (tmp / f"pinmon-{uid}").write_text("")
    reader = traced.ReportReader(tmp=str(tmp))
    listed = []
    monkeypatch.setattr(traced.os, "scandir", lambda p: listed.append(p) or pytest.fail("listed"))
    assert reader._tmp_dirs(range(1000, 1010)) == []  # files, not directories
    assert listed == []


@ROOT_ONLY
def test_report_directories_beyond_the_bound_are_read_in_turn(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    for uid in range(1500, 1506):
        os.chown(private_dir(tmp / f"pinmon-{uid}"), uid, uid)
    monkeypatch.delenv("PINMON_TRACE_DIR", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # root's own runtime dir: tmp_path/pinmon
    reader = traced.ReportReader(tmp=str(tmp), limits=traced.Limits(dirs=3))
    opened = []
    real = reader.read_dir
    monkeypatch.setattr(reader, "read_dir", lambda path, *a, **k: opened.append(path) or real(path, *a, **k))
    notices = []
    for _ in range(3):
        notices += reader.read(uid=0, uids=range(1500, 1506)).notices
    others = [os.path.basename(p) for p in opened if "pinmon-1" in p]
    assert sorted(set(others)) == [f"pinmon-{u}" for u in range(1500, 1506)]  # all read, two per read
    assert len(others) == 6 and opened.count(str(tmp_path / "pinmon")) == 3  # root's own dir every time
    assert len(notices) == 3 and all("3 of 7 report directories read" in n for n in notices)


# S8: one bad report is refused alone; a victim is told when another user holds their directory.

def test_a_deeply_nested_report_is_refused_alone(tmp_path, live_child):
    d = private_dir(tmp_path / "reports")
    write(d, f"{live_child}.json", "[" * 200_000)
    write(d, f"{os.getpid()}.json", body(os.getpid(), report.proc_start_ticks(os.getpid())))
    res = traced.read_reports(d)
    assert list(res.processes) == [os.getpid()]
    assert res.rejected == [f"{live_child}.json: nested too deeply"]


def test_the_reader_says_when_its_own_directory_is_unusable(tmp_path, monkeypatch):
    from pinmon.collect.live import LiveCollector

    d = tmp_path / "open"
    d.mkdir()
    os.chmod(d, 0o755)
    monkeypatch.setenv("PINMON_TRACE_DIR", str(d))
    with LiveCollector(use_nvml=False, pids=[os.getpid()]) as col:
        notices = col.snapshot().notices
    assert [n for n in notices if n.startswith("trace reports:")] == [
        f"trace reports: {d} has mode 755, not 700: its reports are not read"]


