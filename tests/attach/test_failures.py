"""Each reason attaching cannot work is one line (AttachError), decided before anything is written:
not root, a kernel locked down, tracefs not mountable, no uprobe events in the kernel. And the
pieces that decide them: the mounts table, the lockdown file, the stale-group rules."""
import errno

import pytest

from pinmon.attach import AttachError, AttachSession
from pinmon.attach.probes import clean_stale, holds_instance
from pinmon.attach.tracefs import Tracefs, TracefsError, lockdown_mode, mounted_tracefs, open_tracefs, preflight


def test_not_root(tmp_path):
    with pytest.raises(AttachError, match="needs root"):
        AttachSession([1], euid=1000, tracefs=Tracefs(str(tmp_path))).attach()


@pytest.mark.parametrize("mode,refused", [("none [integrity] confidentiality", False),
                                          ("none integrity [confidentiality]", True), ("[none]", False)])
def test_lockdown(tmp_path, mode, refused):
    f = tmp_path / "lockdown"
    f.write_text(mode + "\n")
    assert (preflight(0, str(f)) is not None) == refused
    if refused:
        with pytest.raises(AttachError, match="locked down"):
            AttachSession([1], euid=0, lockdown_path=str(f), tracefs=Tracefs(str(tmp_path))).attach()
    assert lockdown_mode(str(tmp_path / "missing")) is None


def test_no_uprobes_in_the_kernel(tmp_path):
    (tmp_path / "instances").mkdir()   # a tracefs without uprobe_events
    with pytest.raises(AttachError, match="no uprobe events"):
        AttachSession([1], euid=0, lockdown_path=str(tmp_path / "none"), tracefs=Tracefs(str(tmp_path))).attach()


def test_tracefs_found_mounted_or_mounted_here_or_one_line(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text("proc /proc proc rw 0 0\nnodev /sys/kernel/debug/tracing tracefs rw 0 0\n")
    assert open_tracefs(str(mounts), mount=lambda p: pytest.fail("mounted")).root == "/sys/kernel/debug/tracing"
    mounts.write_text("proc /proc proc rw 0 0\n")
    done = []
    assert open_tracefs(str(mounts), mount=done.append).root == "/sys/kernel/tracing" and done

    def refuse(path):
        raise OSError(errno.EPERM, "Operation not permitted")
    with pytest.raises(TracefsError, match="mounting it at /sys/kernel/tracing failed: Operation not permitted"):
        open_tracefs(str(mounts), mount=refuse)
    assert mounted_tracefs("a /x\\040y tracefs rw 0 0\n") == ["/x y"]


def test_stale_rules_on_a_fake_tracefs(tmp_path):
    # A fake tracefs: groups of a dead pinmon (removed), of a live process that holds no instance
    # (removed), of pinmon itself (removed) and of another tool (kept).
    (tmp_path / "instances" / "pinmon_999999").mkdir(parents=True)
    (tmp_path / "uprobe_events").write_text(
        "p:pinmon_999999/a /x:0x1\np:pinmon_1/b /x:0x2\np:pinmon_4242/c /x:0x3\np:othertool_1/d /x:0x4\n")
    written = []

    class Fake(Tracefs):
        def append(self, rel, line):
            written.append(line)
    proc = tmp_path / "proc"
    (proc / "1" / "fd").mkdir(parents=True)       # pid 1 is alive and holds no instance fd
    (proc / "4242").mkdir()
    removed, errors = clean_stale(Fake(str(tmp_path)), own_pid=4242, proc_root=str(proc))
    assert sorted(removed) == ["pinmon_1", "pinmon_4242", "pinmon_999999"] and not errors
    assert sorted(written) == ["-:pinmon_1/b", "-:pinmon_4242/c", "-:pinmon_999999/a"]
    assert not (tmp_path / "instances" / "pinmon_999999").exists()


def test_a_live_pinmon_is_one_that_holds_its_instance(tmp_path):
    fd_dir = tmp_path / "7" / "fd"
    fd_dir.mkdir(parents=True)
    (fd_dir / "3").symlink_to("/sys/kernel/tracing/instances/pinmon_7/per_cpu/cpu0/trace_pipe_raw")
    assert holds_instance(7, "pinmon_7", str(tmp_path))
    assert not holds_instance(7, "pinmon_8", str(tmp_path))
    assert not holds_instance(8, "pinmon_8", str(tmp_path))
