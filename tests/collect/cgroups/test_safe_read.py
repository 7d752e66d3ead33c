"""The traps a file's owner can plant for root's reader, each on both ways of walking a path
(openat2 where the kernel has it, and the portable walk): a link to a host file as the file, a
linked directory on the path, a FIFO, a device node, a huge file, "..", names with a slash or NUL."""
from __future__ import annotations

import os
import stat
import threading

import pytest

from pinmon.collect.cgroups import safe_read
from pinmon.collect.cgroups.safe_read import list_beneath, read_beneath, read_file

WALKS = [pytest.param(True, id="openat2"), pytest.param(False, id="walk")]


def _write(path, data=b"ok"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


@pytest.fixture
def state(tmp_path):
    """A runtime's state dir with one container, and a host secret outside it."""
    base = tmp_path / "state"
    _write(str(base / "c1" / "config.json"), b'{"ok": 1}')
    _write(str(tmp_path / "host" / "shadow"), b"root:SECRET")
    return tmp_path


def test_openat2_is_there_on_this_kernel():
    # The kernel here (5.6+) has openat2, so the parametrised tests exercise both walks.
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert safe_read._OPENAT2.usable
        d = safe_read._OPENAT2.open_dir(fd, "tmp")
        os.close(d)
    except NotImplementedError:
        pytest.skip("openat2 not available on this kernel")
    finally:
        os.close(fd)


@pytest.mark.parametrize("openat2", WALKS)
def test_plain_read(state, openat2):
    got = read_beneath(str(state / "state"), ["c1", "config.json"], 1024, use_openat2=openat2)
    assert got.ok and got.data == b'{"ok": 1}' and got.reason is None


@pytest.mark.parametrize("openat2", WALKS)
def test_a_linked_file_to_a_host_file_is_refused(state, openat2):
    link = state / "state" / "c1" / "config.json"
    os.unlink(link)
    os.symlink(str(state / "host" / "shadow"), link)
    got = read_beneath(str(state / "state"), ["c1", "config.json"], 1024, use_openat2=openat2)
    assert got.data is None and got.reason == "a symbolic link (refused)"
    os.unlink(link)
    os.symlink("../../host/shadow", link)  # relative, climbing out
    got = read_beneath(str(state / "state"), ["c1", "config.json"], 1024, use_openat2=openat2)
    assert got.data is None and "link" in got.reason


@pytest.mark.parametrize("openat2", WALKS)
def test_a_linked_directory_on_the_path_is_refused(state, openat2):
    _write(str(state / "host" / "etc" / "config.json"), b"HOST")
    os.symlink(str(state / "host" / "etc"), state / "state" / "c2")
    got = read_beneath(str(state / "state"), ["c2", "config.json"], 1024, use_openat2=openat2)
    assert got.data is None and got.reason == "a link on the path (refused)"
    # deeper: a link in the middle of a longer path
    os.makedirs(state / "state" / "c3")
    os.symlink(str(state / "host"), state / "state" / "c3" / "userdata")
    _write(str(state / "host" / "x.json"), b"HOST")
    got = read_beneath(str(state / "state"), ["c3", "userdata", "x.json"], 1024, use_openat2=openat2)
    assert got.data is None and got.reason == "a link on the path (refused)"


@pytest.mark.parametrize("openat2", WALKS)
def test_a_fifo_is_refused_without_blocking(state, openat2):
    os.unlink(state / "state" / "c1" / "config.json")
    os.mkfifo(state / "state" / "c1" / "config.json")
    out = []
    t = threading.Thread(target=lambda: out.append(
        read_beneath(str(state / "state"), ["c1", "config.json"], 1024, use_openat2=openat2)), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "the read blocked on a FIFO"
    assert out[0].data is None and out[0].reason == "not a regular file"


@pytest.mark.parametrize("openat2", WALKS)
def test_a_device_node_is_refused_unopened(state, openat2):
    path = state / "state" / "c1" / "config.json"
    os.unlink(path)
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
    except PermissionError:
        pytest.skip("cannot make a device node here")
    got = read_beneath(str(state / "state"), ["c1", "config.json"], 1024, use_openat2=openat2)
    assert got.data is None and got.reason == "not a regular file"


@pytest.mark.parametrize("openat2", WALKS)
def test_a_huge_file_is_refused_not_cut(state, openat2):
    _write(str(state / "state" / "c1" / "config.json"), b"x" * 5000)
    got = read_beneath(str(state / "state"), ["c1", "config.json"], 4096, use_openat2=openat2)
    assert got.data is None and got.reason == "larger than 4096 bytes"
    got = read_beneath(str(state / "state"), ["c1", "config.json"], 5000, use_openat2=openat2)
    assert got.ok and len(got.data) == 5000


@pytest.mark.parametrize("parts", [[".."], ["c1", "..", "c1", "config.json"], ["c1/config.json"],
                                   ["", "config.json"], ["."], ["c1", "con\0fig"], [], ["a"] * 40])
def test_bad_parts_are_refused_before_anything_is_opened(state, parts):
    got = read_beneath(str(state / "state"), parts, 1024)
    assert got.data is None and got.reason == "bad path (refused)"


def test_missing_and_not_a_directory(state):
    assert read_beneath(str(state / "state"), ["c9", "config.json"], 1024).reason == "missing"
    assert read_beneath(str(state / "nowhere"), ["c1"], 1024).reason == "missing"
    got = read_beneath(str(state / "state"), ["c1", "config.json", "x"], 1024)
    assert got.reason == "not a directory on the path"


def test_the_trusted_base_may_itself_be_a_link(state):
    # An administrator's /var/lib/docker -> /data/docker is honoured; only what is below is checked.
    os.symlink(str(state / "state"), state / "base-link")
    assert read_beneath(str(state / "base-link"), ["c1", "config.json"], 1024).ok


@pytest.mark.parametrize("openat2", WALKS)
def test_the_walk_without_openat2_works_when_the_kernel_lacks_it(state, monkeypatch, openat2):
    class NoOpenat2(safe_read._Openat2):
        def open_dir(self, dir_fd, rel):
            self.usable = False
            raise NotImplementedError

    monkeypatch.setattr(safe_read, "_OPENAT2", NoOpenat2())
    assert read_beneath(str(state / "state"), ["c1", "config.json"], 1024, use_openat2=openat2).ok
    assert not safe_read._OPENAT2.usable or not openat2


def test_read_file_refuses_a_link_as_the_last_component(state):
    os.symlink(str(state / "host" / "shadow"), state / "link")
    assert read_file(str(state / "link"), 1024).reason == "a symbolic link (refused)"
    assert read_file(str(state / "host" / "shadow"), 1024).data == b"root:SECRET"


@pytest.mark.parametrize("openat2", WALKS)
def test_listing_gives_names_only_and_refuses_a_linked_directory(state, openat2):
    os.symlink(str(state / "host" / "shadow"), state / "state" / "evil.log")
    names, why = list_beneath(str(state / "state"), [], 100, use_openat2=openat2)
    assert why is None and sorted(names) == ["c1", "evil.log"]
    os.symlink(str(state / "host"), state / "state" / "hostdir")
    names, why = list_beneath(str(state / "state"), ["hostdir"], 100, use_openat2=openat2)
    assert names is None and why == "a link on the path (refused)"
    names, _ = list_beneath(str(state / "state"), [], 1, use_openat2=openat2)
    assert len(names) == 1


@pytest.mark.parametrize("openat2", WALKS)
def test_a_link_that_stays_inside_the_base_is_refused_too(state, openat2):
    # No link at all: a link inside the state dir today can be swapped for one outside it tomorrow.
    os.symlink("c1", state / "state" / "c4")
    got = read_beneath(str(state / "state"), ["c4", "config.json"], 1024, use_openat2=openat2)
    assert got.data is None and got.reason == "a link on the path (refused)"
    _write(str(state / "state" / "c1" / "userdata" / "config.json"))
    got = read_beneath(str(state / "state"), ["c4", "userdata", "config.json"], 1024, use_openat2=openat2)
    assert got.data is None and got.reason == "a link on the path (refused)"
