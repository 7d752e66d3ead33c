"""Which kernel objects a pinned-looking mapping really is: the live scan's ``accept`` check.

A line of ``/proc/PID/maps`` names a path as the process's mount namespace sees it, and the device
and inode of the mapped file as the kernel knows them. Only the latter can be trusted:

- CUDA's pinned buffers are shared anonymous memory: the kernel backs each with a file of its own
  internal shmem mount and names it ``/dev/zero (deleted)``. That mount's device is learned here by
  making such a mapping (one page) in pinmon itself and reading its line: a ``zero`` file on a tmpfs
  that a user mounted in a namespace of their own shows another device.
- CUDA's write-combined buffers are mappings of the NVIDIA control device. A mapping counts if its
  device and inode are those of the host's ``/dev/nvidiactl`` (stat in pinmon's namespace); a
  container whose runtime made its own device node shows another (device, inode), so for that case
  the mapped file itself is looked at through ``/proc/PID/map_files/`` (root only): it must be a
  character device with the control device's number. A regular file named ``nvidiactl`` never is.

Where pinmon cannot learn the shmem device, no ``/dev/zero`` mapping counts; without a host
``/dev/nvidiactl`` (no driver, or pinmon in a container without the device) only the ``map_files``
check can accept a write-combined mapping.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import stat
from dataclasses import dataclass
from typing import Callable, Optional

from ..rawfile import read_bytes
from .procmaps import NVIDIACTL_PATH, PINNED_PATH, Mapping, parse_maps

# The NVIDIA driver's fixed character device numbers: major 195, the control device is minor 255.
NVIDIA_MAJOR = 195
NVIDIACTL_MINOR = 255


def maps_dev(st_dev: int) -> str:
    """A device number as /proc/PID/maps prints it ("%02x:%02x", major:minor)."""
    return f"{os.major(st_dev):02x}:{os.minor(st_dev):02x}"


@dataclass(frozen=True)
class KernelObjects:
    """The identities a live mapping is checked against; None where pinmon could not learn one."""

    shmem_dev: Optional[str]                      # the kernel's shmem mount, as maps prints it
    nvidiactl: Optional[tuple[str, int]]          # (device as maps prints it, inode) of /dev/nvidiactl
    nvidiactl_rdev: int = os.makedev(NVIDIA_MAJOR, NVIDIACTL_MINOR)

    def accepter(self, pid: Optional[int], proc_root: str = "/proc",
                 stat_mapped: Optional[Callable[[str], os.stat_result]] = None) -> Callable[[Mapping], bool]:
        """``accept(mapping)`` for one process's maps (``pid`` None: no map_files fallback)."""
        stat_mapped = stat_mapped or os.stat

        def accept(m: Mapping) -> bool:
            if m.path == PINNED_PATH:
                return self.shmem_dev is not None and m.dev == self.shmem_dev
            if m.path == NVIDIACTL_PATH:
                if self.nvidiactl is not None and (m.dev, m.inode) == self.nvidiactl:
                    return True
                if pid is None:
                    return False
                # Another node of the same device (a container's own /dev): ask the kernel what the
                # mapped file is. Only root may; anyone else's unmatched mapping is not counted.
                try:
                    st = stat_mapped(os.path.join(proc_root, str(pid), "map_files", f"{m.start:x}-{m.end:x}"))
                except (OSError, ValueError):
                    return False
                return stat.S_ISCHR(st.st_mode) and st.st_rdev == self.nvidiactl_rdev
            return False

        return accept


def own_shmem_dev(proc_root: str = "/proc") -> Optional[str]:
    """The device of the kernel's shmem mount: a one-page shared anonymous mapping of pinmon's own,
    found in its own maps by its address."""
    try:
        m = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_SHARED)
    except (OSError, ValueError):
        return None
    try:
        buf = ctypes.c_char.from_buffer(m)
        try:
            address = ctypes.addressof(buf)
        finally:
            del buf  # the mapping cannot close while a ctypes object exports its buffer
        try:
            text = read_bytes(os.path.join(proc_root, "self", "maps")).decode("ascii", "replace")
        except OSError:
            return None
        for mapping in parse_maps(text):
            if mapping.start == address and mapping.path == PINNED_PATH:
                return mapping.dev
        return None
    finally:
        m.close()


def nvidiactl_identity(host_root: str = "/") -> tuple[Optional[tuple[str, int]], Optional[int]]:
    """((device as maps prints it, inode), rdev) of the host's /dev/nvidiactl; Nones without it."""
    try:
        st = os.stat(os.path.join(host_root, "dev", "nvidiactl"))
    except (OSError, ValueError):
        return None, None
    if not stat.S_ISCHR(st.st_mode):
        return None, None
    return (maps_dev(st.st_dev), st.st_ino), st.st_rdev


def learn(host_root: str = "/", proc_root: str = "/proc") -> KernelObjects:
    """The identities on this machine (read once: neither changes while the system runs)."""
    ctl, rdev = nvidiactl_identity(host_root)
    objects = KernelObjects(shmem_dev=own_shmem_dev(proc_root), nvidiactl=ctl)
    if rdev is not None and rdev != objects.nvidiactl_rdev:
        objects = KernelObjects(objects.shmem_dev, ctl, rdev)
    return objects
