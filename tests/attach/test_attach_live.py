"""AttachSession on this machine's kernel: real uprobes on a gcc-built stand-in libcuda, called by a
child process that was started before the attach. Exact counts, bytes and kinds; allocations and
registrations; threads started later; other processes left out; the event budget; and every way an
attach ends leaving nothing behind (SIGKILL then a later run, another tool's probes untouched, an
exception mid-attach, SIGTERM, SIGHUP, Ctrl-C).

These share the kernel's tracefs, so they run in one xdist group, one after another."""
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from pinmon.attach import AttachError, AttachSession, Budget
from pinmon.attach.classify import PAGEABLE, PINNED, WRITE_COMBINED
from pinmon.attach.probes import listed_events
from pinmon.attach.symbols import read_symbols
from pinmon.attach.tracefs import open_tracefs
from tests.attach.standin import CUDA, Child, mine, ours, why_not

WHY = why_not()
pytestmark = [pytest.mark.skipif(WHY is not None, reason=WHY or ""), pytest.mark.xdist_group("tracefs")]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIB = 1 << 20



@pytest.mark.parametrize("reader", ["raw", "text"])
def test_exact_counts_bytes_and_kinds(child, reader):
    pinned, pageable = {"buf": "pinned"}, {"buf": "pageable"}
    with AttachSession([child.pid], is_cuda=CUDA, reader=reader) as s:
        assert s.attach_s is not None
        child.call("cuMemcpyHtoD_v2", 0x1000, pinned, 8 * MIB, n=40, rate=200)
        child.call("cuMemcpyDtoHAsync_v2_ptsz", pageable, 0x1000, 4096, 0, n=30)
        child.call("cuMemcpyAsync", {"buf": "pageable", "off": 64}, 0x200001000, 777, 0, n=3)
        child.call("cuMemcpy", 0x200001000, {"buf": "pinned", "off": 8}, 5, n=2, thread=True)
        desc = {"desc": "2d", "fields": {"16": ["u32", 1], "24": ["u64", pinned], "72": ["u32", 2],
                                         "88": ["u64", 0x200002000], "112": ["u64", 1000], "120": ["u64", 7]}}
        child.call("cuMemcpy2DAsync_v2", desc, 0, n=4)
        child.call("cuMemcpyDtoD_v2", 0x1000, 0x2000, 123, n=2)
        child.call("cuMemcpyPeerAsync", 0x1000, 0, 0x2000, 0, 999, 0)
        child.call("cuMemcpyHtoD", 0x1000, pinned, (1 << 32) - 1)   # legacy: a 32-bit size
        r = s.run(0.3)
    p = r.processes[child.pid]
    got = {(x.direction, x.memory): (x.count, x.bytes) for x in p.stats}
    assert got == {("h2d", PINNED): (40 + 2 + 4 + 1, 40 * 8 * MIB + 10 + 4 * 7000 + (1 << 32) - 1),
                   ("d2h", PAGEABLE): (30 + 3, 30 * 4096 + 3 * 777)}
    h2d = p.stat("h2d", PINNED)
    assert h2d.size_p50_bytes == 8 * MIB and h2d.size_max_bytes == (1 << 32) - 1
    assert h2d.bytes_per_s == pytest.approx(h2d.bytes / r.enabled_s)
    assert r.enabled_s == pytest.approx(r.window_s)
    assert (p.device.count, p.device.bytes, p.peer.count, p.peer.bytes) == (2, 246, 1, 999)
    assert p.pageable_may_be_registered
    assert r.lost_events == 0 and not r.failed and r.sampled is None
    assert mine() == (False, False)


def test_allocations_registrations_and_a_write_combined_readback(child):
    with AttachSession([child.pid], is_cuda=lambda pid, maps: False) as s:   # nothing pinned by the maps alone
        child.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 100)        # shared, but not a CUDA process
        child.call("cuMemHostAlloc", {"out": "wc"}, 3 * MIB, 0x4)            # write-combined
        child.call("cuMemcpyDtoH_v2", {"buf": "wc", "off": 4096}, 0x1000, 5000, n=2)
        child.call("cuMemAllocHost_v2", {"out": "p"}, MIB + 1)
        s.pump()  # the session reads every 0.1 s: the allocation's mapping is found while it exists
        child.call("cuMemcpyHtoDAsync_v2", 0x1000, {"buf": "p"}, 64, 0, n=3)
        child.call("cuMemHostRegister_v2", {"buf": "pageable", "off": MIB}, 2 * MIB, 0x1)
        child.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pageable", "off": MIB + 10}, 11, n=5)
        child.call("cuMemHostUnregister", {"buf": "pageable", "off": MIB})
        child.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pageable", "off": MIB + 10}, 13)
        child.call("cuMemFreeHost", {"buf": "p"})
        r = s.run(0.3)
    p = r.processes[child.pid]
    got = {(x.direction, x.memory): (x.count, x.bytes) for x in p.stats}
    assert got == {("h2d", PAGEABLE): (2, 113), ("d2h", WRITE_COMBINED): (2, 10000), ("h2d", PINNED): (8, 192 + 55)}
    a = p.allocations
    assert (a.count, a.bytes, a.median_bytes, a.size_max_bytes, a.frees) == (2, 4 * MIB + 1, MIB + 1, 3 * MIB, 1)
    assert a.flags == {"writecombined": 1, "default": 1}
    assert (a.registrations, a.registered_bytes, a.registration_max_bytes, a.registration_flags,
            a.unregistrations) == (1, 2 * MIB, 2 * MIB, {"portable": 1}, 1)


def test_a_batch_shares_the_call_event_and_its_first_copies_are_measured(child):
    pinned, pageable = {"buf": "pinned"}, {"buf": "pageable"}
    with AttachSession([child.pid], is_cuda=CUDA) as s:
        assert s.defined == ["call_0"]
        # three copies: pinned -> device, device -> pageable, pinned -> device (the third is past the fetched two)
        child.call("cuMemcpyBatchAsync_v2", {"u64s": [0x200001000, pageable, 0x200002000]},
                   {"u64s": [pinned, 0x200003000, pinned]}, {"u64s": [1000, 2000, 4000]}, 3, 0, 0, 0, 0, 0, n=5)
        child.call("cuMemcpyBatchAsync", {"u64s": [0x200001000]}, {"u64s": [pinned]}, {"u64s": [300]}, 1, 0, 0, 0, 0, 0)
        r = s.run(0.2)
    p = r.processes[child.pid]
    got = {(x.direction, x.memory): (x.count, x.bytes) for x in p.stats}
    assert got == {("h2d", PINNED): (6, 5 * 1000 + 300), ("d2h", PAGEABLE): (5, 5 * 2000)}
    assert (p.batch_calls, p.batch_copies, p.batch_copies_unmeasured) == (6, 16, 5)


def test_only_the_attached_processes_are_counted(lib):
    a, b = Child(lib), Child(lib)
    try:
        with AttachSession([a.pid], is_cuda=CUDA) as s:
            b.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 4096, n=20)
            a.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 4096, n=3, thread=True)
            r = s.run(0.2)
        assert set(r.processes) == {a.pid}
        assert r.processes[a.pid].stat("h2d", PINNED).count == 3
        with AttachSession(None, is_cuda=CUDA) as s:      # every process that maps a libcuda
            b.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 4096, n=2)
            a.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 4096, n=1)
            r = s.run(0.2)
        assert {a.pid, b.pid} <= set(r.processes)
        assert (r.processes[a.pid].stat("h2d", PINNED).count, r.processes[b.pid].stat("h2d", PINNED).count) == (1, 2)
        assert len([f for f in r.files if a.pid in f.pids]) == 1 and any(b.pid in f.pids for f in r.files)
    finally:
        a.close()
        b.close()


def test_one_file_one_probe_set_a_copy_its_own(lib, tmp_path):
    link = tmp_path / "libcuda.so.1"
    os.link(lib, link)                     # the same inode by another path (a bind mount's view)
    other = tmp_path / "copy"
    other.mkdir()
    shutil.copy(lib, other / "libcuda.so.1")   # a container's own copy
    a, b, c = Child(lib), Child(str(link)), Child(str(other / "libcuda.so.1"))
    try:
        with AttachSession([a.pid, b.pid, c.pid], is_cuda=CUDA) as s:
            for ch in (a, b, c):
                ch.call("cuMemcpyDtoH_v2", {"buf": "pageable"}, 0x1000, 10)
            r = s.run(0.2)
        assert sorted(sorted(f.pids) for f in r.files) == sorted([sorted([a.pid, b.pid]), [c.pid]])
        for ch in (a, b, c):
            assert r.processes[ch.pid].stat("d2h", PAGEABLE).count == 1
    finally:
        for ch in (a, b, c):
            ch.close()


def test_over_the_event_budget_the_probes_are_sampled_or_stopped(child):
    for over in ("sample", "stop"):
        with AttachSession([child.pid], is_cuda=CUDA, budget=Budget(max_events_per_s=200, over=over)) as s:
            child.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 4096, n=2500, rate=1000)
            r = s.run(0.5)
        if over == "sample":
            assert r.sampled is not None and r.sampled < 0.9 and not r.stopped_early
        else:
            assert r.stopped_early and r.enabled_s < r.window_s
        assert any("events/s" in n for n in r.notices)
    assert mine() == (False, False)


def test_made_up_sizes_cannot_claim_more_than_a_link_moves(child):
    # A process that calls libcuda itself with made-up arguments changes only its own figures: a size past
    # any real copy is not counted as bytes, and its rate is held to what a link can move.
    with AttachSession([child.pid], is_cuda=CUDA) as s:
        child.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 1 << 62, n=5)
        child.call("cuMemcpyDtoH_v2", {"buf": "pinned"}, 0x1000, 1 << 47, n=2000)
        r = s.run(0.2)
    p = r.processes[child.pid]
    h2d, d2h = p.stat("h2d", PINNED), p.stat("d2h", PINNED)
    assert (h2d.bytes, h2d.unknown_size_count) == (0, 5)
    assert d2h.bytes_per_s <= Budget().max_copy_bytes_per_s and d2h.bytes <= Budget().max_copy_bytes_per_s * r.window_s + 1
    assert any("more than any link" in n for n in p.notes)


# --- what an attach leaves behind ------------------------------------------------------------------

ATTACHER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from pinmon.attach import AttachSession, SignalReceived
    with AttachSession([{pid}], is_cuda=lambda p, m: True) as s:
        try:
            print("attached", flush=True)
            s.run(60)
        except (SignalReceived, KeyboardInterrupt) as e:
            print("interrupted", type(e).__name__, flush=True)
            raise SystemExit(3)
""")


def start_attacher(pid):
    p = subprocess.Popen([sys.executable, "-c", ATTACHER.format(root=ROOT, pid=pid)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert p.stdout.readline().strip() == "attached", p.stderr.read()
    return p


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["TERM", "HUP", "INT"])
def test_a_signal_detaches(child, sig):
    p = start_attacher(child.pid)
    group = f"pinmon_{p.pid}"
    assert group in ours()[0]
    p.send_signal(sig)
    assert p.wait(30) == 3
    groups, instances = ours()
    assert group not in groups and group not in instances


def test_a_killed_attach_is_cleaned_by_the_next_and_other_tools_are_untouched(child, lib):
    fs = open_tracefs()
    other = f"othertool_{os.getpid()}"
    fd = os.open(lib, os.O_RDONLY)
    off = read_symbols(fd).offsets["cuMemcpyHtoD_v2"]
    os.close(fd)
    fs.append("uprobe_events", f"p:{other}/probe {lib}:0x{off:x} n=%dx:u64")
    try:
        p = start_attacher(child.pid)
        group = f"pinmon_{p.pid}"
        p.kill()
        p.wait(30)
        groups, instances = ours()
        assert group in groups and group in instances          # left behind by SIGKILL
        with AttachSession([child.pid], is_cuda=CUDA) as s:
            assert any(group in n for n in s.notices)
            assert group not in ours()[0] and group not in ours()[1]
            child.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 7)
            r = s.run(0.2)
        assert r.processes[child.pid].stat("h2d", PINNED).count == 1
        assert other in listed_events(fs)                      # another tool's group stays
    finally:
        fs.append("uprobe_events", f"-:{other}/probe")


def test_an_exception_mid_attach_removes_everything(child, monkeypatch):
    calls = {"n": 0}
    real = AttachSession._enable

    def enable_then_fail(self, f):
        real(self, f)
        calls["n"] += 1
        raise RuntimeError("boom")
    monkeypatch.setattr(AttachSession, "_enable", enable_then_fail)
    with pytest.raises(RuntimeError):
        with AttachSession([child.pid], is_cuda=CUDA):
            pass
    assert calls["n"] == 1 and mine() == (False, False)


def test_a_file_the_kernel_refuses_fails_alone(lib, tmp_path):
    # As squashfs answers on the GPU box: EINVAL for a probe on that file. Another file still works.
    other = tmp_path / "ok"
    other.mkdir()
    shutil.copy(lib, other / "libcuda.so.1")
    a, b = Child(lib), Child(str(other / "libcuda.so.1"))
    refused_ino = os.stat(lib).st_ino

    class Refusing(type(open_tracefs())):
        def append(self, rel, line):
            fd_path = line.split(" ")[1].rsplit(":", 1)[0] if line.startswith("p:") else None
            if fd_path and os.stat(fd_path).st_ino == refused_ino:
                raise OSError(22, os.strerror(22))
            return super().append(rel, line)
    try:
        with AttachSession([a.pid, b.pid], is_cuda=CUDA, tracefs=Refusing(open_tracefs().root)) as s:
            b.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 3)
            r = s.run(0.2)
        assert "squashfs" in r.failed[a.pid] and a.pid not in r.processes
        assert r.processes[b.pid].stat("h2d", PINNED).count == 1
        assert next(f for f in r.files if a.pid in f.pids).refused
        with pytest.raises(AttachError, match="EINVAL"):
            with AttachSession([a.pid], is_cuda=CUDA, tracefs=Refusing(open_tracefs().root)):
                pass
        assert mine() == (False, False)
    finally:
        a.close()
        b.close()


def test_attach_and_detach_leave_no_probe_of_this_process(child):
    with AttachSession([child.pid], is_cuda=CUDA) as s:
        assert mine() == (True, True) and sum(len(f.probes) for f in s.files) >= 85 and s.defined == ["call_0"]
    assert mine() == (False, False)
    assert s.detach_s is not None


def test_a_pid_that_maps_no_libcuda_is_refused_in_one_line():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(AttachError, match="does not map libcuda"):
            AttachSession([sleeper.pid]).attach()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert mine() == (False, False)


def test_the_raw_reader_is_timed_on_the_mono_clock(child):
    with AttachSession([child.pid], is_cuda=CUDA) as s:
        assert s.mono_clock
        before = time.monotonic()
        child.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, 3)
        batch = s.reader.read()
        assert batch.raw and batch.records and all(before <= ts <= time.monotonic() for ts, _ in batch.records)


def test_the_hand_tool_prints_json_or_one_line(child):
    out = subprocess.run([sys.executable, "-m", "pinmon.attach", str(child.pid), "--seconds", "0.3"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = __import__("json").loads(out.stdout)
    assert str(child.pid) in doc["processes"] and doc["detach_s"] is not None
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        out = subprocess.run([sys.executable, "-m", "pinmon.attach", str(sleeper.pid)], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "does not map libcuda" in out.stderr
    assert mine() == (False, False)
