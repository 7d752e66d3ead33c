"""Whether a group's cgroup sits in a subtree handed to a user: a directory on its path, above the
group's own, that root does not own.

Only root can make a cgroup in a directory root owns (cgroupfs directories are 0755), so a pod's
slice or a container's scope whose parents all belong to root was made by root (the kubelet, a
runtime, systemd, slurmd). A user who owns a directory (systemd's ``Delegate=``, a v1 directory an
administrator ``chown``ed, rootless Podman under ``user@UID.service``) makes what they like below it,
named after any pod or container on the node. The group's own directory is not looked at: a runtime
may hand a container its own cgroup (user namespaces) without that making its name the user's.

``DelegationCheck.uid(paths)`` walks from the memory hierarchy's mount down to the group's parent
with ``lstat`` (no link followed; cgroupfs has none), and gives the owner of the first directory root
does not own, or None. Answers are kept per path for ``RECHECK_S`` (who owns a directory does not
change while it exists; a path removed and made again is looked at again after that time).
A path that cannot be looked at (outside this cgroup namespace, missing) gives None: the pure rule
of ``ownership.py`` (a ``user@UID.service`` ancestor) still applies.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable

from .mounts import CgroupMounts, to_dir
from .ownership import CgroupPaths

RECHECK_S = 60.0
MAX_KEPT = 8192


class DelegationCheck:
    """``uid(paths)``: the user owning a directory above the group's cgroup, or None."""

    def __init__(self, mounts: CgroupMounts, clock: Callable[[], float] = time.monotonic,
                 recheck_s: float = RECHECK_S):
        self.mounts = mounts
        self._clock = clock
        self.recheck_s = recheck_s
        self._kept: dict[str, tuple[float, int | None]] = {}
        self.walks = 0  # since creation: for tests

    def _path(self, paths: CgroupPaths) -> tuple[object | None, str | None]:
        if self.mounts.v1_memory is not None:
            return self.mounts.v1_memory, paths.v1_memory
        if self.mounts.v2 is not None:
            return self.mounts.v2, paths.v2
        return None, None

    def uid(self, paths: CgroupPaths) -> int | None:
        mount, path = self._path(paths)
        if mount is None or path is None:
            return None
        now = self._clock()
        kept = self._kept.get(path)
        if kept is not None and now - kept[0] < self.recheck_s:
            return kept[1]
        found = self._walk(mount, path)
        if len(self._kept) >= MAX_KEPT:
            self._kept.clear()
        self._kept[path] = (now, found)
        return found

    def _walk(self, mount, path: str) -> int | None:
        self.walks += 1
        directory, _why = to_dir(mount, path)
        if directory is None:
            return None
        top = mount.mount_point.rstrip("/") or "/"
        rel = os.path.relpath(directory, top)
        if rel == ".":
            return None
        parts = rel.split("/")[:-1]  # the group's own directory is not looked at
        d = top
        for part in parts:
            d = os.path.join(d, part)
            try:
                st = os.lstat(d)
            except OSError:
                return None
            if st.st_uid != 0:
                return st.st_uid
        return None
