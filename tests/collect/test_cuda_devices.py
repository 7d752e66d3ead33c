"""A CUDA process is one that maps a real NVIDIA character device (major 195), never a file named
``/dev/nvidia0``: what the kernel writes for a device mapping, read on real files, and the attack of a
planted regular file in a mount namespace of one's own, on the real /proc."""
from __future__ import annotations

import mmap
import os
import shutil
import stat
import subprocess
import sys

import pytest

from pinmon.collect.live import LiveCollector
from pinmon.collect.processes.kernel_objects import MAX_FILES_ASKED, NVIDIA_MAJOR, KernelObjects, learn, maps_dev
from pinmon.collect.processes.procmaps import Mapping, estimate_pinned, parse_maps
from pinmon.collect.processes.scan import ProcessScanner

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mknod, map_files, mount namespaces)")
MIB = 1 << 20
OBJECTS = KernelObjects(shmem_dev="00:01", nvidiactl=("00:05", 77), nvidia_nodes=frozenset({("00:05", 80)}))
CUDA_PROCESS = (
    "7f3a00000000-7f3a00200000 rw-s 00000000 00:05 80 /dev/nvidia0\n"
    "7f3b00000000-7f3b10000000 rw-s 00000000 00:01 9001 /dev/zero (deleted)\n"
)


class _St:
    def __init__(self, mode: int, rdev: int = 0):
        self.st_mode, self.st_rdev = mode, rdev


def _char(major: int, minor: int = 0) -> _St:
    return _St(stat.S_IFCHR | 0o666, os.makedev(major, minor))


def _own_mapping_of(path: str) -> Mapping:
    """pinmon's own mapping of ``path``, as /proc/self/maps writes it."""
    for m in parse_maps(open("/proc/self/maps").read()):
        if m.path == path:
            return m
    raise AssertionError(f"{path} is not mapped")


@ROOT_ONLY
@pytest.mark.hardening
def test_maps_writes_the_nodes_file_system_not_the_device_number_and_map_files_tells_the_device(tmp_path):
    # A character device node (the numbers of /dev/zero, which can be mapped) on an ordinary file
    # system: maps prints the device and inode of that file system, map_files stats as the device.
    node = str(tmp_path / "nvidia0")
    os.mknod(node, stat.S_IFCHR | 0o600, os.makedev(1, 5))
    fd = os.open(node, os.O_RDWR)
    try:
        m = mmap.mmap(fd, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE)
        try:
            st = os.stat(node)
            mapped = _own_mapping_of(node)
            assert (mapped.dev, mapped.inode) == (maps_dev(st.st_dev), st.st_ino)
            assert mapped.dev != maps_dev(st.st_rdev)
            seen = os.stat(f"/proc/self/map_files/{mapped.start:x}-{mapped.end:x}")
            assert stat.S_ISCHR(seen.st_mode) and seen.st_rdev == os.makedev(1, 5)
            # Named as a namespace would show it: a character device, but not the driver's.
            as_nvidia = Mapping(mapped.start, mapped.end, mapped.perms, "/dev/nvidia0", 0, mapped.dev, mapped.inode)
            assert not KernelObjects(None, None).device_check(os.getpid())(as_nvidia)
        finally:
            m.close()
    finally:
        os.close(fd)


@pytest.mark.hardening
def test_a_regular_file_named_dev_nvidia0_is_no_device_on_real_map_files(tmp_path):
    path = str(tmp_path / "nvidia0")
    with open(path, "wb") as f:
        f.truncate(mmap.PAGESIZE)
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), mmap.PAGESIZE) as m:
        mapped = _own_mapping_of(path)
        as_nvidia = Mapping(mapped.start, mapped.end, "rw-s", "/dev/nvidia0", 0, mapped.dev, mapped.inode)
        assert not learn().device_check(os.getpid())(as_nvidia)
        m[0] = 1


@pytest.mark.hardening
def test_the_device_check_asks_the_kernel_what_each_mapped_file_is():
    maps = parse_maps(CUDA_PROCESS.replace("00:05 80", "00:99 3"))  # a container's own node
    dev = maps[0]

    def check(answer):
        return OBJECTS.device_check(4242, stat_mapped=lambda path: answer)(dev)

    assert check(_char(NVIDIA_MAJOR))
    assert not check(_char(1, 5))                        # another character device
    assert not check(_St(stat.S_IFREG | 0o600, os.makedev(NVIDIA_MAJOR, 0)))  # a planted file
    assert not OBJECTS.device_check(None)(dev)           # no map_files to ask: only the host's nodes
    assert OBJECTS.device_check(None)(parse_maps(CUDA_PROCESS)[0])  # the host's own node
    assert not OBJECTS.device_check(4242, stat_mapped=lambda p: _char(NVIDIA_MAJOR))(maps[1])  # not /dev/nvidia*


@pytest.mark.hardening
def test_one_planted_file_mapped_ten_thousand_times_is_asked_of_the_kernel_once():
    asked = []

    def regular(path):
        asked.append(path)
        return _St(stat.S_IFREG | 0o600)

    lines = "".join(f"{0x7f0000000000 + i * 0x2000:x}-{0x7f0000001000 + i * 0x2000:x} rw-s 00000000 00:99 3"
                    f" /dev/nvidia0\n" for i in range(10_000))
    files = "".join(f"{0x7e0000000000 + i * 0x2000:x}-{0x7e0000001000 + i * 0x2000:x} rw-s 00000000 00:99"
                    f" {100 + i} /dev/nvidia{i}\n" for i in range(100))
    est = estimate_pinned(lines + files + CUDA_PROCESS.splitlines(True)[1],
                          OBJECTS.accepter(4242), OBJECTS.device_check(4242, stat_mapped=regular))
    assert not est.is_cuda
    assert len(asked) == MAX_FILES_ASKED


def test_a_saved_maps_file_is_taken_as_its_paths_say():
    assert estimate_pinned(CUDA_PROCESS.replace("00:05 80", "00:99 3")).is_cuda


# The attack: a tmpfs on /dev in a mount namespace of one's own, a regular file /dev/nvidia0 mapped,
# and 64 MiB of ordinary shared memory (MAP_SHARED | MAP_ANONYMOUS: the kernel's own shmem, which maps
# names "/dev/zero (deleted)", as it names CUDA's pinned buffers).
PLANTED_DEVICE = r"""
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
MS_REC, MS_PRIVATE = 16384, 1 << 18
assert libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0
assert libc.mount(b"tmpfs", b"/dev", b"tmpfs", 0, None) == 0, ctypes.get_errno()
fd = os.open("/dev/nvidia0", os.O_RDWR | os.O_CREAT, 0o600)
os.ftruncate(fd, 1 << 20)
device = mmap.mmap(fd, 1 << 20)
shared = mmap.mmap(-1, 64 << 20, flags=mmap.MAP_SHARED)
shared.write(b"x" * (64 << 20))  # resident: it passes the cap by RssShmem
print("ready", flush=True)
sys.stdin.read()
"""


@ROOT_ONLY
@pytest.mark.hardening
def test_a_planted_dev_nvidia0_makes_no_cuda_process_on_the_real_proc():
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1)")
    if learn().shmem_dev is None:
        pytest.skip("the kernel's shmem device could not be learned here")
    p = subprocess.Popen(["unshare", "-m", sys.executable, "-c", PLANTED_DEVICE],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if p.stdout.readline().strip() != "ready":
            pytest.skip(f"no mount namespace here: {p.stderr.read()[-300:]}")
        pid = p.pid  # unshare execs python in place
        maps = open(f"/proc/{pid}/maps").read()
        assert "/dev/nvidia0" in maps and "/dev/zero (deleted)" in maps
        naive = ProcessScanner(pids=[pid])
        naive.objects = None  # taken as the paths say: 64 MiB of "pinned" memory
        (row,) = naive.scan().processes
        assert row.held.pinned_bytes == 64 * MIB
        assert ProcessScanner(pids=[pid]).scan().processes == []
        with LiveCollector(use_nvml=False, pids=[pid], kernel_read_every_s=0, oom_lookback_s=0) as col:
            snap = col.snapshot()
        assert snap.processes == () and snap.host.pinned_bytes_est == 0
    finally:
        p.stdin.close()
        p.kill()
        p.wait(10)


@pytest.mark.hardening
def test_a_process_that_maps_no_device_is_not_parsed_again_until_its_address_space_changes(tmp_path, monkeypatch):
    import pinmon.collect.processes.scan as mod

    d = tmp_path / "4242"
    d.mkdir()
    (d / "maps").write_text(CUDA_PROCESS.replace("00:05 80", "00:99 3"))  # a node pinmon cannot vouch for
    (d / "statm").write_text("1000 10 0 0 0 0 0\n")
    parsed = []
    real = mod.estimate_pinned
    monkeypatch.setattr(mod, "estimate_pinned", lambda text, *checks: parsed.append(1) or real(text, *checks))
    sc = ProcessScanner(proc_root=str(tmp_path), objects=OBJECTS)
    assert sc.scan().processes == [] and sc.scan().processes == []
    assert len(parsed) == 1
    (d / "statm").write_text("2000 10 0 0 0 0 0\n")
    sc.scan()
    assert len(parsed) == 2
