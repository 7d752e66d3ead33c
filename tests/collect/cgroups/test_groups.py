"""Groups in the live snapshot, end to end on real cgroups (root; v1 here, v2 where delegated): a
process pinning known bytes (io_uring) in a group with a small limit makes ``pinned-cgroup-share``
critical while the host stays OK, and an OOM kill in a group that pinned makes ``cgroup-oom-kills``."""
from __future__ import annotations

import hashlib

import pytest

from pinmon.advise import advise
from pinmon.collect.live import LiveCollector

from .realcg import PIN_AND_WAIT, Child, group_of, memory_cgroup, pinned_in_docker_scope, snapshot_until

MIB = 1 << 20
CID = hashlib.sha256(b"pinmon group test").hexdigest()

GROW = """
import mmap
m = mmap.mmap(-1, {n})
for i in range(0, {n}, mmap.PAGESIZE):
    m[i] = 1
"""


# Pins pages: one worker runs every test that pins or reads the host-wide pinned count, one at a time
# (test_kernel_pins.py measures that count moving by exactly its own pages).
@pytest.mark.xdist_group("host-pinned-pages")
def test_a_group_pinning_most_of_its_limit_is_critical_while_the_host_is_ok():
    pinned, limit = 64 * MIB, 96 * MIB
    snap, pid = pinned_in_docker_scope(CID, pinned, limit)
    g = group_of(snap, pid)
    assert g is not None, snap.processes
    assert g.kind == "docker" and g.owner.container_id == CID and g.limit.limit_bytes == limit
    assert g.held.vm_pinned_bytes == pinned and g.held.bytes == pinned and g.processes == 1
    row = next(p for p in snap.processes if p.pid == pid)
    assert row.held.vm_pinned_bytes == pinned and row.identity.cgroup == g.key
    findings = advise([snap])
    (share,) = [f for f in findings if f.rule == "pinned-cgroup-share"]
    assert share.severity == "critical" and share.subject == f"Docker container {g.name.removeprefix('docker ')}"
    assert share.values["memory_limit_bytes"] == limit and share.values["pinned_bytes"] == pinned
    assert "66%" in share.message or "67%" in share.message
    assert not [f for f in findings if f.rule == "pinned-ram-share"]  # the host is nowhere near
    # The io_uring pages are explained by the process's VmPin: nothing unattributed for them.
    assert "pinned-unattributed" not in {f.rule for f in findings}


@pytest.mark.xdist_group("host-pinned-pages")
def test_an_oom_kill_in_a_group_that_pinned_is_critical():
    with memory_cgroup(48 * MIB) as cg:
        with Child(PIN_AND_WAIT.format(n=32 * MIB, then=GROW.format(n=64 * MIB))) as child:
            cg.add(child.pid)
            child.send()
            said = child.line()
            if said.startswith("unavailable"):
                pytest.skip(said)
            with LiveCollector(use_nvml=False, kernel_read_every_s=0) as col:
                col.groups.memory.recheck_s = 0.0  # OOM counts read every snapshot, not every 5 s
                history = [snapshot_until(col, lambda s: (group_of(s, child.pid) is not None
                                                           and group_of(s, child.pid).held.vm_pinned_bytes))]
                g = group_of(history[0], child.pid)
                if g.limit.oom_kills is None:
                    pytest.skip(f"this kernel counts no OOM kills per cgroup: {g.notes}")
                assert not [f for f in advise(history) if f.rule == "cgroup-oom-kills"]
                child.send()  # it grows past its limit with 32 MiB it cannot give back
                assert child.wait() == -9
                history.append(snapshot_until(col, lambda s: any(
                    x.key == g.key and x.limit.oom_kills is not None and x.limit.oom_kills > g.limit.oom_kills for x in s.cgroups)))
    gone = next(x for x in history[-1].cgroups if x.key == g.key)
    assert gone.processes == 0 and gone.limit.oom_kills == gone.limit.oom_kills_at_start + 1
    (f,) = [f for f in advise(history) if f.rule == "cgroup-oom-kills"]
    assert f.severity == "critical" and f.values["oom_kills"] == 1
    assert f.values["held_pinned_bytes"] >= 32 * MIB and "cannot take those pages back" in f.advice


def test_a_groups_pages_are_held_to_its_memory_in_use_vmpin_first():
    from pinmon.collect.cgroups.groups import held_within
    from pinmon.model import HeldMemory

    held = HeldMemory(pinned_bytes=200 * MIB, write_combined_bytes=MIB, vm_pinned_bytes=5 * MIB)
    assert held_within(held, None) == held and held_within(held, 300 * MIB) == held
    low = held_within(held, 8 * MIB)
    # The charged pages (pinned and VmPin) come to the usage; write-combined pages are the driver's.
    assert (low.vm_pinned_bytes, low.pinned_bytes, low.write_combined_bytes, low.capped) == (5 * MIB, 3 * MIB, MIB, True)
    assert low.bytes == 9 * MIB
    only_vm = held_within(HeldMemory(vm_pinned_bytes=10 * MIB), 4 * MIB)
    assert (only_vm.vm_pinned_bytes, only_vm.pinned_bytes, only_vm.capped) == (4 * MIB, None, True)


def test_an_owner_kind_the_model_lacks_is_unknown():
    from pinmon.collect.cgroups.groups import group_kind

    assert group_kind("slurm") == "slurm" and group_kind("bad") == "unknown"
