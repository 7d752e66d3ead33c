"""Host memory readers on fake /proc and /sys trees: meminfo, cgroup v1/v2 limits (through the one
limit walker: mountinfo, 0 a limit), containers."""
import os

from pinmon.collect.cgroups import limits as limits_mod
from pinmon.collect.cgroups.limits import parse_limit
from pinmon.collect.host import memory as host_mod
from pinmon.collect.host.memory import (
    HostMemoryReader,
    cgroup_memory_limit,
    parse_meminfo,
    read_host_memory,
)

from .cgroups.fakecg import mountinfo

GIB = 1 << 30

MEMINFO = """MemTotal:       131961788 kB
MemFree:        100000000 kB
MemAvailable:   120000000 kB
SwapTotal:        4194304 kB
SwapFree:         4194300 kB
Shmem:               7836 kB
Mlocked:             7020 kB
HugePages_Total:        0
"""


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def v2_tree(tmp_path, cgroup: str, limit: int, usage: int) -> str:
    """A fake root: MEMINFO, this process in cgroup v2 ``/cgroup`` with ``limit`` and ``usage``."""
    root = str(tmp_path)
    write(root, "proc/meminfo", MEMINFO)
    write(root, "proc/self/mountinfo", mountinfo("v2"))
    write(root, "proc/self/cgroup", f"0::/{cgroup}\n")
    write(root, os.path.join("sys/fs/cgroup", cgroup, "memory.max"), str(limit))
    write(root, os.path.join("sys/fs/cgroup", cgroup, "memory.current"), str(usage))
    return root


def test_parse_meminfo_units_and_junk():
    info = parse_meminfo(MEMINFO + "Bogus\nX: abc kB\nNeg: -5 kB\n: 3\n")
    assert info["MemTotal"] == 131961788 * 1024
    assert info["HugePages_Total"] == 0
    assert "X" not in info and "Neg" not in info


def test_cgroup_limit_values():
    # The one parser of limits (collect/cgroups/limits.py): "max" and v1's huge value are no limit,
    # 0 is a limit of zero bytes on both versions.
    assert parse_limit("max\n") == (None, True)
    assert parse_limit("9223372036854771712\n") == (None, True)  # v1 "unlimited"
    assert parse_limit("17179869184\n") == (16 * GIB, True)
    assert parse_limit("0\n") == (0, True)
    assert parse_limit("junk")[0] is None and parse_limit(None)[0] is None


def test_v2_container_limit_is_effective(tmp_path):
    # In a container the cgroup namespace shows its own cgroup as "/" at the mount's root.
    root = v2_tree(tmp_path, "", 16 * GIB, 10 * GIB)
    fields, notices = read_host_memory(root)
    assert fields["effective_mem_limit_bytes"] == 16 * GIB
    assert fields["cgroup_limit_bytes"] == 16 * GIB
    assert fields["mem_total_bytes"] == 131961788 * 1024
    # Available is bounded by the room left under the cgroup limit, not the host's MemAvailable.
    assert fields["mem_available_bytes"] == 6 * GIB
    assert fields["swap_used_bytes"] == 4 * 1024
    assert notices == []


def test_the_room_left_is_under_the_cgroup_that_sets_the_limit(tmp_path):
    root = v2_tree(tmp_path, "job/step", 0, GIB)
    write(root, "sys/fs/cgroup/job/step/memory.max", "max\n")
    write(root, "sys/fs/cgroup/job/memory.max", str(16 * GIB))
    write(root, "sys/fs/cgroup/job/memory.current", str(12 * GIB))  # its other steps use more
    fields, _ = read_host_memory(root)
    assert fields["cgroup_limit_bytes"] == 16 * GIB and fields["mem_available_bytes"] == 4 * GIB


def test_v2_nested_cgroup_takes_tightest_ancestor(tmp_path):
    root = v2_tree(tmp_path, "a/b", 0, 0)
    write(root, "sys/fs/cgroup/a/memory.max", str(8 * GIB))
    write(root, "sys/fs/cgroup/a/b/memory.max", "max\n")
    assert cgroup_memory_limit(root) == 8 * GIB


def test_v1_memory_controller_found_through_mountinfo(tmp_path):
    root = str(tmp_path)
    write(root, "proc/self/mountinfo", mountinfo("v1_only"))
    write(root, "proc/self/cgroup", "12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n")
    write(root, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", str(4 * GIB))
    assert cgroup_memory_limit(root) == 4 * GIB


def test_a_limit_of_zero_is_a_limit_on_both_versions(tmp_path):
    # v2 memory.max 0 and v1 memory.limit_in_bytes 0 are real limits (nothing can be charged): the
    # host reader and the group reader say the same.
    root = v2_tree(tmp_path / "v2", "z", 0, 0)
    assert cgroup_memory_limit(root) == 0
    fields, _ = read_host_memory(root)
    assert fields["cgroup_limit_bytes"] == 0 and fields["effective_mem_limit_bytes"] == 0
    assert fields["mem_available_bytes"] == 0
    v1 = str(tmp_path / "v1")
    write(v1, "proc/self/mountinfo", mountinfo("v1_only"))
    write(v1, "proc/self/cgroup", "4:memory:/z\n0::/\n")
    write(v1, "sys/fs/cgroup/memory/z/memory.limit_in_bytes", "0\n")
    assert cgroup_memory_limit(v1) == 0


def test_the_hierarchy_that_holds_memory_is_read_not_a_fixed_path(tmp_path):
    # A hybrid host: the unified mount sits at /sys/fs/cgroup/unified and holds no memory controller,
    # memory is on v1. A v2-first walk at /sys/fs/cgroup read files that are not there.
    root = str(tmp_path)
    write(root, "proc/meminfo", MEMINFO)
    write(root, "proc/self/mountinfo", mountinfo("hybrid"))
    write(root, "proc/self/cgroup", "11:memory:/job\n0::/job\n")
    write(root, "sys/fs/cgroup/job/memory.max", str(GIB))  # a decoy where no mount shows it
    write(root, "sys/fs/cgroup/memory/job/memory.limit_in_bytes", str(2 * GIB))
    write(root, "sys/fs/cgroup/memory/job/memory.usage_in_bytes", str(GIB // 2))
    fields, _ = read_host_memory(root)
    assert fields["cgroup_limit_bytes"] == 2 * GIB


def test_no_cgroup_no_limit_and_missing_meminfo_is_a_notice(tmp_path):
    fields, notices = read_host_memory(str(tmp_path))
    assert fields["effective_mem_limit_bytes"] is None
    assert fields["mem_total_bytes"] is None
    assert notices and "meminfo" in notices[0]


def test_real_machine_reads():
    fields, _ = read_host_memory("/")
    assert fields["mem_total_bytes"] > 0
    assert fields["effective_mem_limit_bytes"] <= fields["mem_total_bytes"]


def test_parse_meminfo_with_keys_parses_only_those():
    info = parse_meminfo(MEMINFO, frozenset({"MemTotal", "Shmem"}))
    assert info == {"MemTotal": 131961788 * 1024, "Shmem": 7836 * 1024}


def test_the_live_reader_reads_usage_every_time_and_the_limit_after_the_recheck(tmp_path):
    root = v2_tree(tmp_path, "a", 16 * GIB, 10 * GIB)
    now = [100.0]
    reader = HostMemoryReader(root, clock=lambda: now[0])
    assert reader.read() == read_host_memory(root)
    # Usage and meminfo are read every time; a new limit is seen after the walker's recheck.
    write(root, "sys/fs/cgroup/a/memory.current", str(12 * GIB))
    write(root, "sys/fs/cgroup/a/memory.max", str(32 * GIB))
    now[0] += 1
    fields, _ = reader.read()
    assert fields["mem_available_bytes"] == 4 * GIB and fields["cgroup_limit_bytes"] == 16 * GIB
    now[0] += limits_mod.LIMITS_RECHECK_S
    fields, _ = reader.read()
    assert fields["cgroup_limit_bytes"] == 32 * GIB and fields["mem_available_bytes"] == 20 * GIB
    assert reader.read() == read_host_memory(root)
    reader.close()
    assert host_mod.CGROUP_RECHECK_S > 0


def test_parse_meminfo_skips_figures_past_64_bits():
    text = f"MemTotal: {'9' * 400} kB\nMemAvailable: 1024 kB\n"
    assert parse_meminfo(text) == {"MemAvailable": 1024 * 1024}
