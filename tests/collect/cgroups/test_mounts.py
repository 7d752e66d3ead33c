"""Mount discovery from mountinfo fixtures (v2, v1, hybrid, a container's own v1 mount), and the
mapping of /proc/PID/cgroup paths to directories under a mount."""
from __future__ import annotations

import os

from pinmon.collect.cgroups.mounts import Mount, parse_mountinfo, read_mounts, to_dir

from .fakecg import mountinfo, write


def test_v2():
    m = parse_mountinfo(mountinfo("v2"))
    assert m.v2 == Mount("/sys/fs/cgroup", "/") and m.v1_memory is None and m.memory_version == 2


def test_v1_memory_mount_is_found_among_the_controllers():
    m = parse_mountinfo(mountinfo("v1_only"))
    assert m.v1_memory == Mount("/sys/fs/cgroup/memory", "/") and m.v2 is None and m.memory_version == 1


def test_hybrid_reads_memory_on_v1():
    m = parse_mountinfo(mountinfo("hybrid"))
    assert m.v2 == Mount("/sys/fs/cgroup/unified", "/")
    assert m.v1_memory == Mount("/sys/fs/cgroup/memory", "/") and m.memory_version == 1


def test_root_prefix_and_escapes():
    m = parse_mountinfo(mountinfo("escaped"), root="/fake")
    assert m.v1_memory == Mount("/fake/srv/cg mem", "/")


def test_no_cgroup_mount():
    m = parse_mountinfo(mountinfo("no_cgroup"))
    assert m.v2 is None and m.v1_memory is None and m.memory_version is None


def test_the_widest_of_two_mounts_of_one_hierarchy():
    assert parse_mountinfo(mountinfo("two_v2_mounts")).v2 == Mount("/sys/fs/cgroup", "/")


def test_junk_lines_are_skipped():
    text = "garbage\n1 2 3\n- - -\n" + mountinfo("v2")
    assert parse_mountinfo(text).v2 == Mount("/sys/fs/cgroup", "/")


def test_read_mounts_from_a_root(tmp_path):
    write(os.path.join(tmp_path, "proc/self/mountinfo"), mountinfo("v2"))
    m, why = read_mounts(str(tmp_path))
    assert why is None and m.v2 == Mount(os.path.join(str(tmp_path), "sys/fs/cgroup"), "/")
    m, why = read_mounts(str(tmp_path / "nowhere"))
    assert m.memory_version is None and "missing" in why


def test_a_container_mount_shows_only_its_own_cgroup():
    m = parse_mountinfo(mountinfo("docker_v1_container"))
    cid = "a42d519714d616e9411dbceec4b52808bd6b1ee53e6f6497a281d655357d8b71"
    assert to_dir(m.v1_memory, f"/docker/{cid}") == ("/sys/fs/cgroup/memory", None)
    assert to_dir(m.v1_memory, f"/docker/{cid}/sub") == ("/sys/fs/cgroup/memory/sub", None)
    assert to_dir(m.v1_memory, f"/docker/{cid}x") == (None, "outside the mounted cgroup")
    assert to_dir(m.v1_memory, "/system.slice") == (None, "outside the mounted cgroup")


def test_paths_outside_the_namespace_or_malformed_are_refused():
    mount = Mount("/sys/fs/cgroup", "/")
    assert to_dir(mount, "/")[0] == "/sys/fs/cgroup"
    assert to_dir(mount, "/a//b/")[0] == "/sys/fs/cgroup/a/b"
    assert to_dir(mount, "/../../kubepods.slice") == (None, "outside this cgroup namespace")
    assert to_dir(mount, "/a/./b")[1] == "outside this cgroup namespace"
    assert to_dir(mount, "relative")[1] == "not a cgroup path"
    assert to_dir(mount, "/a\0b")[1] == "not a cgroup path"
