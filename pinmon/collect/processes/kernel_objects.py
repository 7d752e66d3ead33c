"""Which kernel objects a mapping really is: the live scan's checks of a process's mappings.

A line of ``/proc/PID/maps`` names a path as the process's mount namespace sees it, and the device
and inode of the mapped file as the kernel knows them. Only the latter can be trusted:

- A CUDA process maps the NVIDIA driver's character devices (``/dev/nvidiactl``, ``/dev/nvidia0``...,
  major 195). For a mapping of a device node, maps prints the device and inode of the file system that
  holds the node (devtmpfs, "00:05"), never the device's own number (measured: a node ``c 1 5`` on ext4
  mapped privately reads ``fe:00 2301970``, its ``map_files`` entry stats as a character device 1:5). So
  a mapping is a real NVIDIA device when its (device, inode) is one of the host's ``/dev/nvidia*`` nodes
  of major 195 (stat in pinmon's namespace), or, for a container's own nodes, when the mapped file
  itself, looked at through ``/proc/PID/map_files/`` (root only), is a character device of major 195.
  A regular file named ``/dev/nvidia0`` (a tmpfs on ``/dev`` in a user namespace, Docker's writable
  ``/dev``) never is, so it cannot make a process's shared memory count as pinned.
- CUDA's pinned buffers are shared anonymous memory: the kernel backs each with a file of its own
  internal shmem mount and names it ``/dev/zero (deleted)``. That mount's device is learned here by
  making such a mapping (one page) in pinmon itself and reading its line: a ``zero`` file on a tmpfs
  that a user mounted in a namespace of their own shows another device.
- CUDA's write-combined buffers are mappings of the NVIDIA control device. A mapping counts if its
  device and inode are those of the host's ``/dev/nvidiactl``, or if ``map_files`` shows a character
  device with the control device's number (195:255). A regular file named ``nvidiactl`` never is.

Where pinmon cannot learn the shmem device, no ``/dev/zero`` mapping counts; without host
``/dev/nvidia*`` nodes (no driver, or pinmon in a container without the devices) only the
``map_files`` check can accept a device or a write-combined mapping. The ``map_files`` check stats one
mapping per mapped file, at most ``MAX_FILES_ASKED`` files a process: a process that maps one planted
file ten thousand times costs one stat.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass

from ..rawfile import read_bytes
from .procmaps import NVIDIACTL_PATH, PINNED_PATH, Mapping, parse_maps

# The NVIDIA driver's fixed character device numbers: major 195, the control device is minor 255.
NVIDIA_MAJOR = 195
NVIDIACTL_MINOR = 255
NVIDIA_PATH_PREFIX = "/dev/nvidia"
# Distinct mapped files of one process whose map_files entry is looked at, at most.
MAX_FILES_ASKED = 16


def maps_dev(st_dev: int) -> str:
    """A device number as /proc/PID/maps prints it ("%02x:%02x", major:minor)."""
    return f"{os.major(st_dev):02x}:{os.minor(st_dev):02x}"


@dataclass(frozen=True)
class KernelObjects:
    """The identities a live mapping is checked against; None where pinmon could not learn one."""

    shmem_dev: str | None                      # the kernel's shmem mount, as maps prints it
    nvidiactl: tuple[str, int] | None          # (device as maps prints it, inode) of /dev/nvidiactl
    nvidiactl_rdev: int = os.makedev(NVIDIA_MAJOR, NVIDIACTL_MINOR)
    # (device as maps prints it, inode) of each host /dev/nvidia* node of major 195
    nvidia_nodes: frozenset = frozenset()

    def device_check(self, pid: int | None, proc_root: str = "/proc",
                     stat_mapped: Callable[[str], os.stat_result] | None = None) -> Callable[[Mapping], bool]:
        """``is_device(mapping)`` for one process's maps: whether a ``/dev/nvidia*`` mapping is a real
        NVIDIA character device (``pid`` None: only the host's nodes count). Each mapped file is asked
        of the kernel once, and at most ``MAX_FILES_ASKED`` files."""
        stat_mapped = stat_mapped or os.stat
        known = self.nvidia_nodes | ({self.nvidiactl} if self.nvidiactl is not None else frozenset())
        asked: dict[tuple[str, int], bool] = {}

        def is_device(m: Mapping) -> bool:
            if not m.path.startswith(NVIDIA_PATH_PREFIX):
                return False
            node = (m.dev, m.inode)
            if node in known:
                return True
            if pid is None:
                return False
            if node in asked:
                return asked[node]
            if len(asked) >= MAX_FILES_ASKED:
                return False
            try:
                st = stat_mapped(os.path.join(proc_root, str(pid), "map_files", f"{m.start:x}-{m.end:x}"))
                real = stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == NVIDIA_MAJOR
            except (OSError, ValueError):
                real = False
            asked[node] = real
            return real

        return is_device

    def accepter(self, pid: int | None, proc_root: str = "/proc",
                 stat_mapped: Callable[[str], os.stat_result] | None = None) -> Callable[[Mapping], bool]:
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


def own_shmem_dev(proc_root: str = "/proc") -> str | None:
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


def nvidiactl_identity(host_root: str = "/") -> tuple[tuple[str, int] | None, int | None]:
    """((device as maps prints it, inode), rdev) of the host's /dev/nvidiactl; Nones without it."""
    try:
        st = os.stat(os.path.join(host_root, "dev", "nvidiactl"))
    except (OSError, ValueError):
        return None, None
    if not stat.S_ISCHR(st.st_mode):
        return None, None
    return (maps_dev(st.st_dev), st.st_ino), st.st_rdev


def nvidia_nodes(host_root: str = "/", limit: int = 1024) -> frozenset:
    """(device as maps prints it, inode) of each ``/dev/nvidia*`` character device of major 195 on the
    host (``nvidia0``..., ``nvidiactl``, ``nvidia-modeset``; ``nvidia-uvm``'s major is not fixed and it
    is not needed: every CUDA process maps the control device)."""
    dev = os.path.join(host_root, "dev")
    out = set()
    try:
        names = [n for n in os.listdir(dev) if n.startswith("nvidia")][:limit]
    except (OSError, ValueError):
        return frozenset()
    for name in names:
        try:
            st = os.lstat(os.path.join(dev, name))
        except (OSError, ValueError):
            continue
        if stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == NVIDIA_MAJOR:
            out.add((maps_dev(st.st_dev), st.st_ino))
    return frozenset(out)


def learn(host_root: str = "/", proc_root: str = "/proc") -> KernelObjects:
    """The identities on this machine (read once: none changes while the system runs; a driver loaded
    later is found through ``map_files``)."""
    ctl, rdev = nvidiactl_identity(host_root)
    return KernelObjects(shmem_dev=own_shmem_dev(proc_root), nvidiactl=ctl,
                         nvidiactl_rdev=rdev if rdev is not None else os.makedev(NVIDIA_MAJOR, NVIDIACTL_MINOR),
                         nvidia_nodes=nvidia_nodes(host_root))
