"""Host memory readers on fake /proc and /sys trees: meminfo, cgroup v1/v2 limits, containers."""
import os

from pinmon.collect.host import memory as host_mod
from pinmon.collect.host.memory import (
    HostMemoryReader,
    cgroup_memory_limit,
    parse_cgroup_limit,
    parse_meminfo,
    read_host_memory,
)

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
    assert parse_cgroup_limit("max\n") is None
    assert parse_cgroup_limit("9223372036854771712\n") is None  # v1 "unlimited"
    assert parse_cgroup_limit("17179869184\n") == 16 * GIB
    assert parse_cgroup_limit("junk") is None
    assert parse_cgroup_limit(None) is None


def test_v2_container_limit_is_effective(tmp_path):
    root = v2_tree(tmp_path, "", 16 * GIB, 10 * GIB)
    fields, notices = read_host_memory(root)
    assert fields["effective_mem_limit_bytes"] == 16 * GIB
    assert fields["cgroup_limit_bytes"] == 16 * GIB
    assert fields["mem_total_bytes"] == 131961788 * 1024
    # Available is bounded by the room left under the cgroup limit, not the host's MemAvailable.
    assert fields["mem_available_bytes"] == 6 * GIB
    assert fields["swap_used_bytes"] == 4 * 1024
    assert notices == []


def test_v2_nested_cgroup_takes_tightest_ancestor(tmp_path):
    root = str(tmp_path)
    write(root, "proc/self/cgroup", "0::/a/b\n")
    write(root, "sys/fs/cgroup/a/memory.max", str(8 * GIB))
    write(root, "sys/fs/cgroup/a/b/memory.max", "max\n")
    assert cgroup_memory_limit(root) == 8 * GIB


def test_v1_limit(tmp_path):
    root = str(tmp_path)
    write(root, "proc/self/cgroup", "12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n")
    write(root, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", str(4 * GIB))
    assert cgroup_memory_limit(root) == 4 * GIB


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


def test_the_live_reader_walks_the_cgroups_again_only_after_the_recheck(tmp_path):
    root = v2_tree(tmp_path, "a", 16 * GIB, 10 * GIB)
    now = [100.0]
    reader = HostMemoryReader(root, clock=lambda: now[0])
    assert reader.read() == read_host_memory(root)
    # Usage and meminfo are read every time; a new limit is seen at the next walk.
    write(root, "sys/fs/cgroup/a/memory.current", str(12 * GIB))
    write(root, "sys/fs/cgroup/a/memory.max", str(32 * GIB))
    now[0] += 1
    fields, _ = reader.read()
    assert fields["mem_available_bytes"] == 4 * GIB and fields["cgroup_limit_bytes"] == 16 * GIB
    now[0] += host_mod.CGROUP_RECHECK_S
    fields, _ = reader.read()
    assert fields["cgroup_limit_bytes"] == 32 * GIB and fields["mem_available_bytes"] == 20 * GIB
    assert reader.read() == read_host_memory(root)


def test_parse_meminfo_skips_figures_past_64_bits():
    text = f"MemTotal: {'9' * 400} kB\nMemAvailable: 1024 kB\n"
    assert parse_meminfo(text) == {"MemAvailable": 1024 * 1024}
