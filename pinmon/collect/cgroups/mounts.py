"""Where the memory controller's cgroup hierarchy is mounted, from ``/proc/self/mountinfo``.

- cgroup v2 (unified): a ``cgroup2`` mount, usually ``/sys/fs/cgroup`` (``/sys/fs/cgroup/unified``
  on a hybrid host, where it holds no controller that matters here).
- cgroup v1: the ``cgroup`` mount whose super options name ``memory``, usually
  ``/sys/fs/cgroup/memory``.

A controller is bound to one hierarchy at a time, so where a v1 memory mount exists memory is
there, and the v2 mount is used only where no v1 memory mount is.

A mount's *root* (the fourth field) is the cgroup it shows at its mount point: ``/`` for the
host's mount, or a container's own cgroup when the runtime bind-mounted only that (Docker on v1).
``to_dir`` maps a path from /proc/PID/cgroup to a directory under the mount point, and refuses a
path outside the mount's root or with ``..`` components (a process outside the reader's cgroup
namespace). Every path is joined under ``root`` so tests can point the reader at a fake tree.
"""
from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass

from .safe_read import read_file

MAX_MOUNTINFO_BYTES = 4 << 20  # a few thousand mounts (a busy container host) at ~150 bytes each
_OCTAL = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    """A cgroup hierarchy's mount: ``mount_point`` (joined under the reader's root) shows the cgroup
    ``cgroup_root``."""

    mount_point: str
    cgroup_root: str


@dataclass(frozen=True)
class CgroupMounts:
    v2: Mount | None = None
    v1_memory: Mount | None = None

    @property
    def memory_version(self) -> int | None:
        """The hierarchy that holds the memory controller: 1, 2, or None (neither mounted)."""
        return 1 if self.v1_memory else 2 if self.v2 else None


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash in paths as \040, \011, \012, \134
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str, root: str = "/") -> CgroupMounts:
    """The cgroup mounts in mountinfo ``text``; of several mounts of one hierarchy, the one showing
    the widest cgroup (the shortest root), then the first."""
    v2: Mount | None = None
    v1: Mount | None = None
    for line in text.splitlines():
        fields = line.split()
        try:
            sep = fields.index("-")
        except ValueError:
            continue
        if sep < 6 or len(fields) < sep + 3:
            continue
        cg_root, point = _unescape(fields[3]), _unescape(fields[4])
        fstype, options = fields[sep + 1], fields[sep + 3] if len(fields) > sep + 3 else ""
        mount = Mount(os.path.join(root, point.lstrip("/")), cg_root)
        if fstype == "cgroup2":
            if v2 is None or len(cg_root) < len(v2.cgroup_root):
                v2 = mount
        elif fstype == "cgroup" and "memory" in options.split(","):  # noqa: SIM102  (shaped as the cgroup2 branch)
            if v1 is None or len(cg_root) < len(v1.cgroup_root):
                v1 = mount
    return CgroupMounts(v2, v1)


def read_mounts(root: str = "/") -> tuple[CgroupMounts, str | None]:
    """(the cgroup mounts, None) or (empty mounts, why) from ``root``/proc/self/mountinfo."""
    got = read_file(os.path.join(root, "proc/self/mountinfo"), MAX_MOUNTINFO_BYTES)
    if got.data is None:
        return CgroupMounts(), f"/proc/self/mountinfo: {got.reason}"
    return parse_mountinfo(got.data.decode("utf-8", errors="replace"), root), None


def to_dir(mount: Mount, cgroup_path: str) -> tuple[str | None, str | None]:
    """(directory of ``cgroup_path`` under ``mount``, None) or (None, why not)."""
    if not cgroup_path.startswith("/") or "\0" in cgroup_path:
        return None, "not a cgroup path"
    parts = [p for p in cgroup_path.split("/") if p]
    if ".." in parts or "." in parts:
        return None, "outside this cgroup namespace"
    path = "/" + "/".join(parts)
    base = mount.cgroup_root.rstrip("/")
    if base and path != base and not path.startswith(base + "/"):
        return None, "outside the mounted cgroup"
    rel = path[len(base):].lstrip("/")
    return (posixpath.join(mount.mount_point, rel) if rel else mount.mount_point), None
