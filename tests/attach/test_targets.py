"""targets: a container's own libcuda is opened inside its root, never through a link out of it, and
only if it is the inode the maps show; which mapping is libcuda's."""
import os

from pinmon.attach.targets import libcuda_mapping, open_mapped_file
from pinmon.collect.processes.procmaps import Mapping, parse_maps


def fake_proc(tmp_path):
    root = tmp_path / "proc" / "5" / "root"
    (root / "usr" / "lib").mkdir(parents=True)
    return tmp_path / "proc", root


def test_a_link_out_of_the_container_is_resolved_inside_it(tmp_path):
    proc, root = fake_proc(tmp_path)
    host_file = tmp_path / "host-secret"
    host_file.write_bytes(b"host")
    # The container's libcuda is an absolute link: inside its root it names a missing file.
    (root / "usr" / "lib" / "libcuda.so.1").symlink_to(str(host_file))
    m = Mapping(0x1000, 0x2000, "r-xp", "/usr/lib/libcuda.so.1", 0, "00:01", os.stat(host_file).st_ino)
    fd, why = open_mapped_file(5, m, str(proc))
    assert fd is None and "No such file" in why
    # ... and a link that stays inside is followed there, checked against the maps' inode.
    inside = root / "usr" / "lib" / "real.so"
    inside.write_bytes(b"\x7fELF")
    (root / "usr" / "lib" / "libcuda.so.1").unlink()
    (root / "usr" / "lib" / "libcuda.so.1").symlink_to("/usr/lib/real.so")
    fd, why = open_mapped_file(5, m, str(proc))
    assert fd is None and "not the file" in why          # another inode than the maps name
    fd, why = open_mapped_file(5, Mapping(0x1000, 0x2000, "r-xp", "/usr/lib/libcuda.so.1", 0, "00:01",
                                          os.stat(inside).st_ino), str(proc))
    try:
        assert why is None and os.fstat(fd).st_ino == os.stat(inside).st_ino
    finally:
        os.close(fd)


def test_the_libcuda_mapping_is_the_executable_one():
    maps = parse_maps("7f00-7f10 r--p 00000000 08:01 5 /usr/lib/libcuda.so.580.159.04\n"
                      "7f10-7f20 r-xp 00001000 08:01 5 /usr/lib/libcuda.so.580.159.04\n"
                      "7f20-7f30 r-xp 00001000 08:01 6 /usr/lib/libcudart.so.12\n")
    assert libcuda_mapping(maps).start == 0x7f10
    assert libcuda_mapping(parse_maps("7f20-7f30 r-xp 00001000 08:01 6 /usr/lib/libcudart.so.12\n")) is None
