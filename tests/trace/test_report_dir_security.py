"""The tracer's report directory and files are private: the directory 0700 and refused when it is a
symlink or open to others, reports 0600 and never written through a planted symlink; ``pinmon trace``
says once, on stderr, when its reports cannot be written (and tells a victim whose directory another
user made), and keeps the program's exit code.

The reading side (what root's collector makes of what others write) is
tests/collect/test_traced_security.py.
"""
from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from pinmon.collect.traced import reader as traced
from pinmon.trace import report_file as report

pytestmark = pytest.mark.hardening

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make files of another user")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def private_dir(path) -> str:
    os.mkdir(path, 0o700)
    os.chmod(path, 0o700)
    return str(path)


def test_report_dir_is_0700_and_files_0600(tmp_path):
    d = report.ensure_dir(str(tmp_path / "pinmon"))
    assert mode(d) == 0o700
    path = report.write_report(d, 4242, {"schema": report.TRACE_SCHEMA, "pid": 4242})
    assert mode(path) == 0o600


def test_a_symlinked_or_open_report_dir_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(report.UnsafeDirError, match="symlink"):
        report.ensure_dir(str(link))
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o755)
    with pytest.raises(report.UnsafeDirError, match="mode"):
        report.ensure_dir(str(open_dir))
    # The reader opens the directory O_NOFOLLOW: a symlink is refused even to a good directory.
    os.chmod(real, 0o700)
    res = traced.read_reports(str(link))
    assert res.processes == {} and "symlink" in res.rejected[0]


def test_writing_over_a_planted_symlink_never_follows_it(tmp_path):
    d = report.ensure_dir(str(tmp_path / "pinmon"))
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    os.symlink(victim, os.path.join(d, "4242.json"))
    path = report.write_report(d, 4242, {"schema": report.TRACE_SCHEMA, "pid": 4242})
    assert victim.read_text() == "keep me" and not os.path.islink(path)


def pinmon_trace(*args, env=None, cwd=REPO):
    e = dict(os.environ)
    e.pop("PINMON_TRACE_DIR", None)
    e["PINMON_TRACE_ENGINE"] = "hooks"  # no line on the CUPTI engine: these tests count the warnings
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "pinmon", "trace", *args], capture_output=True, text=True,
                          timeout=60, env=e, cwd=cwd)


EXIT3 = ["--", sys.executable, "-c", "import sys; print('ran'); sys.exit(3)"]


@pytest.mark.parametrize("setup, expect", [
    (lambda t: ["--dir", str(t / "nonexistent" / "x")], "cannot create"),
    (lambda t: (os.mkdir(t / "open", 0o755), os.chmod(t / "open", 0o755), ["--dir", str(t / "open")])[-1],
     "mode 755"),
    (lambda t: (os.symlink(t, t / "link"), ["--dir", str(t / "link")])[-1], "symlink"),
])
def test_trace_warns_once_when_reports_cannot_be_written_and_keeps_the_exit_code(tmp_path, setup, expect):
    r = pinmon_trace(*setup(tmp_path), *EXIT3)
    assert r.returncode == 3 and r.stdout == "ran\n"
    assert r.stderr.count("\n") == 1 and "warning: no reports will be written" in r.stderr and expect in r.stderr


def test_trace_warns_when_the_default_dir_is_not_usable(tmp_path):
    xdg = tmp_path / "xdg"
    xdg.mkdir()
    (xdg / "pinmon").mkdir(mode=0o777)
    os.chmod(xdg / "pinmon", 0o777)
    r = pinmon_trace(*EXIT3, env={"XDG_RUNTIME_DIR": str(xdg)})
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "mode 777" in r.stderr
    good = pinmon_trace("--dir", str(tmp_path / "fresh"), *EXIT3)
    assert good.returncode == 3 and good.stderr == "" and mode(tmp_path / "fresh") == 0o700


@ROOT_ONLY
def test_trace_tells_the_victim_when_another_user_made_their_directory(tmp_path):
    d = private_dir(tmp_path / "pinmon-victim")
    os.chown(d, 1500, 1500)  # made by uid 1500 before the victim (root here) traced anything
    r = pinmon_trace("--dir", d, *EXIT3)
    assert r.returncode == 3 and r.stderr.count("\n") == 1
    assert "belongs to uid 1500" in r.stderr and "another user" in r.stderr


def test_python_m_pinmon_trace_warns_too(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pinmon.trace", "-c"], capture_output=True, text=True,
                       env=dict(os.environ, PINMON_TRACE_DIR=str(tmp_path / "no" / "dir")), cwd=REPO, timeout=60)
    assert "warning: no reports will be written" in r.stderr and r.stderr.count("warning") == 1
