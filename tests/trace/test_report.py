"""Report files: schema, atomic replacement, 0700/0600 permissions, refusal of unsafe directories."""
import json
import os
import stat
import threading

import pytest

from pinmon.trace import report_file as R
from pinmon.trace.state import TracerState
from tests.waiting import wait_until


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_report_has_identity_and_figures(report_dir):
    w = R.ReportWriter(TracerState().report, directory=report_dir)
    assert w.write_once()
    data = json.load(open(os.path.join(report_dir, f"{os.getpid()}.json")))
    assert data["schema"] == "pinmon.trace/1" and data["pid"] == os.getpid() and data["uid"] == os.getuid()
    assert data["start_ticks"] == R.proc_start_ticks(os.getpid()) and data["start_ticks"] > 0
    assert data["final"] is False and isinstance(data["time"], float)
    for key in ("pinned", "allocs", "copies", "wc", "call_sites", "pageable_copy_bytes_per_s"):
        assert key in data
    assert mode(os.path.join(report_dir, f"{os.getpid()}.json")) == 0o600
    assert [n for n in os.listdir(report_dir) if n.endswith(".tmp")] == []


def test_directory_is_created_0700(tmp_path):
    d = str(tmp_path / "new")
    os.umask(0o022)
    assert R.ensure_dir(d) == d and mode(d) == 0o700


def test_symlinked_directory_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(R.UnsafeDirError, match="symlink"):
        R.ensure_dir(str(link))
    w = R.ReportWriter(TracerState().report, directory=str(link))
    assert not w.write_once() and "symlink" in w.error
    assert os.listdir(real) == []


def test_open_mode_is_refused(tmp_path):
    d = tmp_path / "open"
    d.mkdir()
    os.chmod(d, 0o755)
    with pytest.raises(R.UnsafeDirError, match="mode 755"):
        R.ensure_dir(str(d))


def test_wrong_owner_is_refused(tmp_path):
    d = tmp_path / "theirs"
    d.mkdir(mode=0o700)
    if os.getuid() == 0:
        os.chown(d, 12345, 12345)
        with pytest.raises(R.UnsafeDirError, match="uid 12345"):
            R.ensure_dir(str(d))
    else:
        with pytest.raises(R.UnsafeDirError, match="belongs to uid"):
            R.check_dir(str(d), uid=os.getuid() + 1)


def test_a_symlink_in_place_of_the_report_is_replaced_not_followed(report_dir, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, os.path.join(report_dir, "42.json"))
    R.write_report(report_dir, 42, {"x": 1})
    assert victim.read_text() == "keep"
    assert not os.path.islink(os.path.join(report_dir, "42.json"))


def test_runtime_dir_choice(tmp_path):
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    uid = os.getuid()
    assert R.runtime_dir(uid, {"XDG_RUNTIME_DIR": str(xdg)}) == str(xdg / "pinmon")
    assert R.runtime_dir(uid, {}) == f"/tmp/pinmon-{uid}"
    assert R.runtime_dir(uid + 1, {"XDG_RUNTIME_DIR": str(xdg)}) == f"/tmp/pinmon-{uid + 1}"  # not theirs
    assert R.runtime_dir(uid, {"XDG_RUNTIME_DIR": "relative"}) == f"/tmp/pinmon-{uid}"


def test_readers_never_see_half_a_report(report_dir):
    """A reader racing many rewrites always parses a whole report."""
    stop = threading.Event()
    big = {"pad": "x" * 200_000}

    def writer():
        i = 0
        while not stop.is_set():
            R.write_report(report_dir, 7, {**big, "i": i})
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        path = os.path.join(report_dir, "7.json")
        seen = [0]

        def parsed_200():  # a half report fails json.loads, which ends the wait at once
            try:
                with open(path) as f:
                    json.loads(f.read())
                seen[0] += 1
            except FileNotFoundError:
                pass
            return seen[0] >= 200

        wait_until(parsed_200, interval_s=0, what="200 whole reports read")
    finally:
        stop.set()
        t.join()


def test_proc_start_ticks_handles_odd_names(tmp_path):
    (tmp_path / "9").mkdir()
    (tmp_path / "9" / "stat").write_text("9 (a) b) (c) S " + " ".join(str(i) for i in range(4, 30)) + "\n")
    assert R.proc_start_ticks(9, str(tmp_path)) == 22
    assert R.proc_start_ticks(10, str(tmp_path)) is None


def test_rates_and_median(report_dir):
    t = [1000.0]
    st = TracerState(clock=lambda: t[0])
    for i in range(40):
        st.record_alloc(0x1000 * (i + 1), 4096)
    t[0] += 2.0
    r = st.report()
    assert r["allocs"]["per_s"] == pytest.approx(20.0) and r["allocs"]["median_bytes"] == 4096
    t[0] += 10.0  # nothing new in the last window: the rate falls to zero
    st.report()
    t[0] += 0.5
    assert st.report()["allocs"]["per_s"] == 0.0
