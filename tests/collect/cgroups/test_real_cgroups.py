"""On real cgroups made for the test (v1 memory here, v2 where mounted with the memory controller):
the limit, usage and owner of a process moved into one, an OOM kill counted, and io_uring's pinned
pages charged to the pinning process's cgroup and counted in its VmPin."""
from __future__ import annotations

import hashlib
import os

import pytest

from pinmon.collect.cgroups.limits import CgroupMemoryReader
from pinmon.collect.cgroups.ownership import KIND_DOCKER, CgroupPaths
from pinmon.collect.cgroups.proc_owner import read_owner
from pinmon.collect.cgroups.vmpin import parse_vmpin
from pinmon.collect.host.memory import parse_meminfo

from .realcg import Child, memory_cgroup

MIB = 1 << 20
CID = hashlib.sha256(b"pinmon real cgroup test").hexdigest()

TOUCH = """
import mmap, sys
m = mmap.mmap(-1, {n})
for i in range(0, {n}, mmap.PAGESIZE):
    m[i] = 1
print("ready", flush=True)
sys.stdin.readline()
"""

PIN = """
import sys
from tests.iouring import PinnedBuffer, Unavailable
try:
    with PinnedBuffer({n}):
        print("pinned", flush=True)
        sys.stdin.readline()
except Unavailable as e:
    print("unavailable " + str(e), flush=True)
"""


def test_limit_usage_and_owner_of_a_process_in_a_real_cgroup():
    with memory_cgroup(256 * MIB) as job:
        scope = job.child(f"docker-{CID}.scope")  # no limit of its own: the parent's binds
        with Child(TOUCH.format(n=16 * MIB)) as child:
            scope.add(child.pid)
            child.send()
            assert child.line() == "ready"
            owner = read_owner(child.pid)
            assert owner.kind == KIND_DOCKER and owner.container_id == CID
            group = owner.cgroup.v1_memory if scope.version == 1 else owner.cgroup.v2
            assert group == scope.path
            got = CgroupMemoryReader().read([owner.cgroup])[owner.cgroup]
            assert got.version == scope.version and got.path == scope.path
            assert got.limit_bytes == 256 * MIB and got.limit_path == job.path
            assert got.current_bytes is not None and got.current_bytes >= 16 * MIB
            assert got.current_bytes == pytest.approx(scope.usage_bytes(), abs=4 * MIB)
            assert got.oom_kills == 0
            child.send()
            assert child.wait() == 0


def test_an_oom_kill_in_a_real_cgroup_is_counted():
    with memory_cgroup(32 * MIB) as cg:
        reader = CgroupMemoryReader(recheck_s=0.0)
        group = _group(cg)
        before = reader.read_one(group)
        if before.oom_kills is None:
            pytest.skip(f"this kernel counts no OOM kills per cgroup: {before.notes}")
        with Child(TOUCH.format(n=64 * MIB)) as child:
            cg.add(child.pid)
            child.send()
            rc = child.wait()
        assert rc == -9, "the child outgrew its 32 MiB limit and should have been OOM-killed"
        after = reader.read_one(group)
        assert after.oom_kills == before.oom_kills + 1
        assert after.limit_bytes == 32 * MIB


# Pins pages or reads the host-wide pinned count: one worker runs all such tests, one at a time.
@pytest.mark.xdist_group("host-pinned-pages")
def test_io_uring_pins_are_charged_to_the_pinning_process_cgroup_and_shown_in_vmpin():
    pinned = 64 * MIB
    limit = 96 * MIB
    with memory_cgroup(limit) as cg:
        with Child(PIN.format(n=pinned)) as child:
            cg.add(child.pid)
            reader = CgroupMemoryReader(recheck_s=0.0)
            group = _group(cg)
            before = reader.read_one(group).current_bytes
            child.send()
            said = child.line()
            if said.startswith("unavailable"):
                pytest.skip(said)
            assert said == "pinned"
            got = reader.read_one(group)
            with open(f"/proc/{child.pid}/status") as f:
                vmpin = parse_vmpin(f.read())
            assert vmpin == pinned
            # the buffer's pages are charged here, and cannot leave: 64 of the cgroup's 96 MiB
            assert pinned <= got.current_bytes - before < pinned + 16 * MIB
            assert vmpin / got.limit_bytes > 0.5
            # while the host is nowhere near its 50% pinned share
            with open("/proc/meminfo") as f:
                total = parse_meminfo(f.read())["MemTotal"]
            assert vmpin / total < 0.3
            child.send()
            assert child.wait() == 0


def _group(cg):
    return CgroupPaths(v1_memory=cg.path) if cg.version == 1 else CgroupPaths(v2=cg.path)


def test_a_cgroup_removed_and_made_again_is_read_afresh():
    # A kept file of a removed cgroup fails its reads (ENODEV); the reader opens the path again.
    with memory_cgroup(64 * MIB) as job:
        scope = job.child("again")
        scope.set_limit(16 * MIB)
        group = _group(scope)
        with CgroupMemoryReader(recheck_s=0.0) as reader:
            assert reader.read_one(group).limit_bytes == 16 * MIB
            assert reader.open_files > 0
            os.rmdir(scope.directory)
            gone = reader.read_one(group)
            assert gone.current_bytes is None and gone.limit_bytes == 64 * MIB
            os.mkdir(scope.directory)
            scope.set_limit(8 * MIB)
            back = reader.read_one(group)
            assert back.limit_bytes == 8 * MIB and back.current_bytes == 0
