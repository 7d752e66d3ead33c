"""Figures an ordinary user could forge or distort in root's view: a report's write-combined bytes,
repeated or planted mappings, reports written for thread ids, /tmp flooded with directories.

Each attack runs against the live collector (a fake /proc tree, or the real one where the attack
needs real processes), and the host's totals, the findings and the exit code must stay what the
kernel says.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading

import pytest

from pinmon.advise import advise
from pinmon.collect.live import LiveCollector
from pinmon.collect.processes.kernel_objects import KernelObjects, learn
from pinmon.collect.processes.procmaps import estimate_mappings, parse_maps
from pinmon.collect.processes.scan import ProcessScanner
from pinmon.collect.traced import reader as traced
from pinmon.collect.traced.report_checks import proc_identity
from pinmon.trace import report_file as R
from tests.trace.fakeproc import fake_proc

pytestmark = pytest.mark.hardening

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
ME = os.getuid()
MIB, GIB = 1 << 20, 1 << 30
# The host's nodes: /dev/nvidia0 (00:06 140, the CUDA line below) and /dev/nvidiactl (00:06 142).
TRUSTED = KernelObjects(shmem_dev="00:01", nvidiactl=("00:06", 142), nvidia_nodes=frozenset({("00:06", 140)}))


def private_dir(path) -> str:
    os.makedirs(path, 0o700)
    os.chmod(path, 0o700)
    return str(path)


def write_report(d, pid, ticks, **pinned) -> None:
    body = {"schema": "pinmon.trace/1", "pid": pid, "start_ticks": ticks, "pinned": pinned}
    path = os.path.join(d, f"{pid}.json")
    with open(path, "w") as f:
        json.dump(body, f)
    os.chmod(path, 0o600)


def host_tree(tmp_path, mem_kib=64 * MIB // 1024 * 1024, shmem_kib=None, pinned_pages=None):
    """A fake host root: meminfo (64 GiB by default), optional Shmem and FOLL_PIN counters."""
    host = tmp_path / "host"
    (host / "proc").mkdir(parents=True)
    lines = [f"MemTotal: {mem_kib} kB", f"MemAvailable: {mem_kib // 2} kB"]
    if shmem_kib is not None:
        lines.append(f"Shmem: {shmem_kib} kB")
    (host / "proc" / "meminfo").write_text("\n".join(lines) + "\n")
    if pinned_pages is not None:
        (host / "proc" / "vmstat").write_text(f"nr_foll_pin_acquired {pinned_pages}\nnr_foll_pin_released 0\n")
    return str(host)


def snapshot(host, proc, objects=None, pids=None):
    with LiveCollector(use_nvml=False, host_root=host, proc_root=proc, pids=pids,
                       kernel_read_every_s=0) as col:
        if objects is not None:
            col.scanner.objects = objects
        return col.snapshot()


def fake_cuda_proc(proc, pid, maps, rss_shmem_kib=0, rss_file_kib=0, ticks=777):
    fake_proc(proc, pid, ME, ticks=ticks, rss_kb=64 * 1024 * 1024)
    with open(os.path.join(str(proc), str(pid), "status"), "a") as f:
        f.write(f"RssFile:\t{rss_file_kib} kB\nRssShmem:\t{rss_shmem_kib} kB\n")
    with open(os.path.join(str(proc), str(pid), "maps"), "w") as f:
        f.write(maps)


def lines(n, first, size, dev, inode, path, offset=0):
    out = []
    for i in range(n):
        start = first + i * (size + 0x1000)
        out.append(f"{start:x}-{start + size:x} rw-s {offset:08x} {dev} {inode} {path}\n")
    return "".join(out)


CUDA = "7f3a00000000-7f3a00200000 rw-s 00000000 00:06 140 /dev/nvidia0\n"


# --- A1: a report's write-combined bytes ---------------------------------------------------------

def test_a_reports_write_combined_bytes_never_reach_the_host_total(tmp_path, monkeypatch):
    proc = tmp_path / "proc"
    proc.mkdir()
    fake_proc(proc, 4241, ME, ticks=777)  # a sleeper: no CUDA mapping at all, its report is not taken
    fake_cuda_proc(proc, 4242, CUDA)      # a CUDA process without a write-combined mapping
    d = private_dir(tmp_path / "reports")
    write_report(d, 4241, 777, bytes=0, write_combined_bytes=9 * 10**18)
    write_report(d, 4242, 777, bytes=0, write_combined_bytes=9 * 10**18)
    monkeypatch.setenv("PINMON_TRACE_DIR", d)
    snap = snapshot(host_tree(tmp_path), str(proc))
    (row,) = snap.processes
    assert row.pid == 4242 and row.source == "traced" and row.held.write_combined_bytes == 0 and row.held.capped
    assert snap.host.write_combined_bytes_est == 0 and snap.host.pinned_bytes_total == 0
    assert not [f for f in advise([snap]) if f.rule == "pinned-ram-share"]


def test_a_reports_write_combined_bytes_are_held_to_the_processs_control_device_mappings(tmp_path, monkeypatch):
    proc = tmp_path / "proc"
    proc.mkdir()
    wc = lines(1, 0x7f4000000000, 128 * MIB, "00:06", 142, "/dev/nvidiactl")
    fake_cuda_proc(proc, 4242, CUDA + wc, rss_file_kib=129 * 1024)
    d = private_dir(tmp_path / "reports")
    write_report(d, 4242, 777, bytes=0, write_combined_bytes=9 * 10**18)
    monkeypatch.setenv("PINMON_TRACE_DIR", d)
    snap = snapshot(host_tree(tmp_path), str(proc), objects=TRUSTED)
    (row,) = snap.processes
    assert row.held.write_combined_bytes == 128 * MIB and snap.host.write_combined_bytes_est == 128 * MIB


@pytest.mark.skipif(sys.platform != "linux", reason="/proc")
def test_check_stays_ok_for_a_forged_report_of_a_real_sleeper(tmp_path):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        d = private_dir(tmp_path / "reports")
        write_report(d, sleeper.pid, R.proc_start_ticks(sleeper.pid), bytes=0, write_combined_bytes=9 * 10**18)
        env = dict(os.environ, PINMON_TRACE_DIR=d)
        # --oom-lookback 0: another test's OOM kill in the kernel's log would make the check critical.
        out = subprocess.run([sys.executable, "-m", "pinmon", "check", "--json", "--window", "0.05",
                              "--oom-lookback", "0"], capture_output=True, text=True, env=env, timeout=120)
        doc = json.loads(out.stdout)
        # A sleeper maps no NVIDIA device: its report is not taken at all.
        assert not [p for p in doc["snapshot"]["processes"] if p["pid"] == sleeper.pid]
        assert doc["snapshot"]["host"]["write_combined_bytes_est"] == 0
        assert "pinned-ram-share" not in {f["rule"] for f in doc["findings"]}
        assert out.returncode in (0, 1), out.stderr  # never critical for it
    finally:
        sleeper.kill()
        sleeper.wait()


# --- A2: repeated and planted mappings ------------------------------------------------------------

def test_one_object_mapped_200_times_counts_once_and_planted_devices_not_at_all(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    size = 64 * MIB
    maps = (CUDA
            + lines(200, 0x7f5000000000, size, "00:01", 77, "/dev/zero (deleted)")      # the real shmem mount
            + lines(200, 0x7f6000000000, size, "00:2a", 5, "/dev/zero (deleted)")      # a user's tmpfs
            + lines(200, 0x7f7000000000, size, "00:2a", 9, "/dev/nvidiactl"))          # a planted file
    fake_cuda_proc(proc, 4242, maps, rss_shmem_kib=25 * GIB // 1024, rss_file_kib=13 * GIB // 1024)
    host = host_tree(tmp_path, shmem_kib=73 * 1024)
    snap = snapshot(host, str(proc), objects=TRUSTED)
    (row,) = snap.processes
    assert row.held.pinned_bytes == size and row.held.write_combined_bytes == 0
    assert snap.host.pinned_bytes_est == size and snap.host.write_combined_bytes_est == 0
    assert not [f for f in advise([snap]) if f.severity == "critical"]
    # Taken as they read (what a saved maps file gets), the planted files are 12.5 GiB write-combined:
    naive = snapshot(host, str(proc))
    assert naive.processes[0].held.write_combined_bytes > 10 * GIB


def test_the_pinned_estimate_never_exceeds_the_hosts_shmem(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    maps = CUDA + lines(4, 0x7f5000000000, 512 * MIB, "00:01", 77, "/dev/zero (deleted)")
    for i, pid in enumerate((11, 12)):
        fake_cuda_proc(proc, pid, maps.replace(" 77 ", f" {77 + i} "), rss_shmem_kib=2 * GIB // 1024)
    snap = snapshot(host_tree(tmp_path, shmem_kib=73 * 1024), str(proc), objects=TRUSTED)
    assert snap.host.pinned_bytes_est == 73 * MIB


def test_numa_placement_of_a_repeated_mapping_adds_up_to_the_row_at_most():
    from pinmon.collect.host.numa import within

    assert within({"0": 200 * GIB, "1": 50 * GIB}, GIB) == {"0": GIB * 4 // 5, "1": GIB // 5}
    assert within({"0": GIB}, 2 * GIB) == {"0": GIB}


NAMESPACE_ATTACK = r"""
import ctypes, mmap, os, subprocess, sys, time
libc = ctypes.CDLL(None, use_errno=True)
MS_REC, MS_PRIVATE = 16384, 1 << 18
assert libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0
assert libc.mount(b"tmpfs", b"/dev", b"tmpfs", 0, None) == 0, ctypes.get_errno()
size, n = 16 << 20, int(sys.argv[1])
keep = []
for name in ("nvidia0", "nvidiactl", "zero"):
    fd = os.open("/dev/" + name, os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, size)
    keep.append(fd)
os.unlink("/dev/zero")  # maps now says "/dev/zero (deleted)"
maps = [mmap.mmap(keep[0], size)]
for fd in keep[1:]:
    for _ in range(n):
        m = mmap.mmap(fd, size)
        m.write(b"x" * size)  # populated: counted resident (RssShmem) once per mapping
        maps.append(m)
print("ready", flush=True)
sys.stdin.read()
"""


@ROOT_ONLY
def test_a_planted_dev_in_a_mount_namespace_shows_no_pinned_memory_on_the_real_proc(tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1)")
    if learn().shmem_dev is None:
        pytest.skip("the kernel's shmem device could not be learned here")
    p = subprocess.Popen(["unshare", "-m", sys.executable, "-c", NAMESPACE_ATTACK, "40"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        if line.strip() != "ready":
            pytest.skip(f"no mount namespace here: {p.stderr.read()[-300:]}")
        pid = p.pid
        # unshare execs python in place: the pid is the attacker's process.
        # Its planted /dev/nvidia0 is no NVIDIA device: not a CUDA process at all.
        assert ProcessScanner(pids=[pid]).scan().processes == []
        # Were it one, its planted zero and nvidiactl files would count nothing.
        objects = learn()
        process = parse_maps(open(f"/proc/{pid}/maps").read())
        est = estimate_mappings(process, objects.accepter(pid), lambda m: m.path == "/dev/nvidia0")
        assert est.is_cuda and est.pinned_bytes == 0 and est.write_combined_bytes == 0
        naive = ProcessScanner(pids=[pid], objects=KernelObjects(None, None))
        naive.objects = None  # taken as they read: the planted control device is 640 MiB write-combined
        (row,) = naive.scan().processes
        assert row.held.pinned_bytes == 16 * MIB and row.held.write_combined_bytes >= 600 * MIB
    finally:
        p.stdin.close()
        p.kill()
        p.wait(10)


def test_the_kernels_shmem_device_is_learned_from_pinmons_own_mapping():
    objects = learn()
    if objects.shmem_dev is None:
        pytest.skip("no /proc/self/maps here")
    major, minor = objects.shmem_dev.split(":")
    assert int(major, 16) >= 0 and int(minor, 16) >= 0


def test_a_control_device_mapping_of_a_containers_own_node_is_asked_of_the_kernel():
    from pinmon.collect.processes.procmaps import Mapping

    class St:
        def __init__(self, mode, rdev):
            self.st_mode, self.st_rdev = mode, rdev

    m = Mapping(0x7f0000000000, 0x7f0008000000, "rw-s", "/dev/nvidiactl", 0, "00:99", 3)
    char = 0o020600
    ok = TRUSTED.accepter(4242, stat_mapped=lambda path: St(char, os.makedev(195, 255)))
    assert ok(m)
    wrong_device = TRUSTED.accepter(4242, stat_mapped=lambda path: St(char, os.makedev(1, 5)))
    regular = TRUSTED.accepter(4242, stat_mapped=lambda path: St(0o100600, os.makedev(195, 255)))

    def denied(path):
        raise PermissionError(path)

    assert not wrong_device(m) and not regular(m) and not TRUSTED.accepter(4242, stat_mapped=denied)(m)
    assert not TRUSTED.accepter(None)(m)


# --- A3: thread ids --------------------------------------------------------------------------------

def test_a_thread_id_is_not_a_process(tmp_path):
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        tid = t.native_id
        assert tid != os.getpid() and os.path.isdir(f"/proc/{tid}")
        assert proc_identity(tid) is None and proc_identity(os.getpid()) is not None
        d = private_dir(tmp_path / "reports")
        write_report(d, tid, R.proc_start_ticks(tid), bytes=GIB)
        res = traced.read_reports(d, clean=False)
        assert res.processes == {}
    finally:
        stop.set()
        t.join()


def test_reports_for_twenty_threads_add_no_rows(tmp_path, monkeypatch):
    proc = tmp_path / "proc"
    proc.mkdir()
    fake_proc(proc, 4000, ME, ticks=777)
    d = private_dir(tmp_path / "reports")
    for tid in range(4001, 4021):
        fake_proc(proc, tid, ME, ticks=777, tgid=4000)
        write_report(d, tid, 777, bytes=160 * MIB)
    monkeypatch.setenv("PINMON_TRACE_DIR", d)
    snap = snapshot(host_tree(tmp_path), str(proc))
    assert snap.processes == ()


def test_reports_never_shrink_what_no_mapping_explains(tmp_path, monkeypatch):
    # The kernel counts 1.5 GiB pinned; no process maps any of it. A user's report claims 1.5 GiB
    # registered for their own sleeper: the warning must stay, and the row is held to the kernel's count.
    proc = tmp_path / "proc"
    proc.mkdir()
    fake_cuda_proc(proc, 4242, CUDA)  # a CUDA process that maps no pinned memory
    d = private_dir(tmp_path / "reports")
    write_report(d, 4242, 777, bytes=3 * GIB // 2, registered_bytes=3 * GIB // 2)
    monkeypatch.setenv("PINMON_TRACE_DIR", d)
    host = host_tree(tmp_path, pinned_pages=(3 * GIB // 2) // os.sysconf("SC_PAGE_SIZE"))
    snap = snapshot(host, str(proc))
    assert snap.host.unattributed_pinned_bytes == 3 * GIB // 2
    assert "pinned-unattributed" in {f.rule for f in advise([snap])}
    write_report(d, 4242, 777, bytes=5 * GIB, registered_bytes=5 * GIB)  # more than the kernel counts
    (row,) = snapshot(host, str(proc)).processes
    assert row.held.pinned_bytes == 3 * GIB // 2 and row.held.registered_bytes == 3 * GIB // 2 and row.held.capped


# --- A4: /tmp flooded with directories ------------------------------------------------------------

@ROOT_ONLY
def test_a_flood_of_pinmon_directories_in_tmp_cannot_hide_a_victims_reports(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    attacker, victim = 1600, 45000
    for n in range(1000, 6000):  # sorted before the victim's, owned by the attacker
        os.mkdir(tmp / f"pinmon-{n}")
        os.chown(tmp / f"pinmon-{n}", attacker, attacker)
    d = private_dir(tmp / f"pinmon-{victim}")
    proc = tmp_path / "proc"
    proc.mkdir()
    fake_proc(proc, 4242, victim, ticks=777)
    write_report(d, 4242, 777, bytes=MIB)
    os.chown(os.path.join(d, "4242.json"), victim, victim)
    os.chown(d, victim, victim)
    reader = traced.ReportReader(proc_root=str(proc), clean=False, tmp=str(tmp))
    for _ in range(3):
        res = reader.read(uid=0, uids={0, attacker, victim})
        assert list(res.processes) == [4242] and not res.notices


def test_the_collector_hands_the_uids_of_live_processes_to_the_reader(tmp_path, monkeypatch):
    seen = []
    real = traced.read_all
    monkeypatch.setattr("pinmon.collect.live.read_all",
                        lambda **kw: seen.append(set(kw.get("uids", ()))) or real(**kw))
    with LiveCollector(use_nvml=False, pids=[os.getpid()]) as col:
        col.snapshot()
    assert seen and os.stat(f"/proc/{os.getpid()}").st_uid in seen[0]
