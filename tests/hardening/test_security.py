"""Security: no shell built from input, the exporter binds to loopback by default, the tracer's report
directory and files are private, symlinks are refused, other users' reports are read only by root.
"""
from __future__ import annotations

import os
import re
import stat

import pytest

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "pinmon")
SHELL = re.compile(r"shell\s*=\s*True|os\.system\s*\(|os\.popen\s*\(|commands\.getoutput|pty\.spawn\s*\(\s*['\"]")


def test_no_shell_commands_anywhere_in_the_package():
    hits = []
    for d, _dirs, files in os.walk(PKG):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(d, name)
                with open(path, encoding="utf-8") as f:
                    for n, line in enumerate(f, 1):
                        if SHELL.search(line):
                            hits.append(f"{os.path.relpath(path, PKG)}:{n}: {line.strip()}")
    assert hits == []


# --- exporter ---------------------------------------------------------------------------------------

export = pytest.importorskip("pinmon.export.server", reason="no exporter in this tree")


def test_exporter_listens_on_loopback_by_default():
    from pinmon.cli import build_parser

    assert export.DEFAULT_LISTEN.startswith("127.0.0.1:")
    args = build_parser().parse_args(["export"])
    assert args.listen[0] == "127.0.0.1"


# --- tracer report files ----------------------------------------------------------------------------

report = pytest.importorskip("pinmon.trace.report", reason="no tracer in this tree")
traced = pytest.importorskip("pinmon.collect.traced", reason="no tracer reader in this tree")
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make files of another user")


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


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


def test_writing_over_a_planted_symlink_never_follows_it(tmp_path):
    d = report.ensure_dir(str(tmp_path / "pinmon"))
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    os.symlink(victim, os.path.join(d, "4242.json"))
    path = report.write_report(d, 4242, {"schema": report.TRACE_SCHEMA, "pid": 4242})
    assert victim.read_text() == "keep me" and not os.path.islink(path)


def test_a_symlinked_report_is_not_read(tmp_path):
    d = report.ensure_dir(str(tmp_path / "pinmon"))
    target = tmp_path / "elsewhere.json"
    target.write_text('{"schema": "pinmon.trace/1", "pid": %d}' % os.getpid())
    os.chmod(target, 0o600)
    os.symlink(target, os.path.join(d, f"{os.getpid()}.json"))
    with pytest.raises(ValueError):
        traced._read_one(os.path.join(d, f"{os.getpid()}.json"), os.getuid())


@ROOT_ONLY
def test_other_users_reports_are_read_only_by_root(tmp_path):
    d = tmp_path / "pinmon"
    d.mkdir(mode=0o700)
    path = d / "4242.json"
    path.write_text('{"schema": "pinmon.trace/1", "pid": 4242}')
    os.chmod(path, 0o600)
    os.chown(path, 1234, 1234)
    with pytest.raises(ValueError, match="owned by uid 1234"):
        traced._read_one(str(path), 1000)  # another ordinary user
    assert traced._read_one(str(path), 0)["pid"] == 4242  # root reads every user's report
    os.chown(d, 1234, 1234)
    r = traced.read_reports(str(d), uid=1000)
    assert r.processes == {} and r.rejected and "belongs to uid 1234" in r.rejected[0]


def test_a_report_open_to_others_is_refused(tmp_path):
    d = report.ensure_dir(str(tmp_path / "pinmon"))
    path = os.path.join(d, "4242.json")
    with open(path, "w") as f:
        f.write('{"schema": "pinmon.trace/1", "pid": 4242}')
    os.chmod(path, 0o644)
    with pytest.raises(ValueError, match="open to others"):
        traced._read_one(path, os.getuid())
