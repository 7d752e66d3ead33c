"""Which processes to attach to, the libcuda file each maps, and each file opened safely.

A process maps libcuda when its maps hold an executable mapping of a file named ``libcuda.so*``.
Files are keyed by (device, inode) as the kernel reports them: a container's libcuda bind-mounted
from the host is the host's file (one probe set for both), a container's own copy is another file
(a probe set of its own).

The file is opened through ``/proc/PID/map_files/START-END``: the kernel hands over the very file
the process mapped, wherever its mount namespace put it, and no path inside the container is walked
(root only). Where that is not possible, the path the maps name is resolved inside the process's
root (``/proc/PID/root``) with ``openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)``, which keeps
every link inside that root, and the file is accepted only if its inode is the one the maps show.
Probes are then defined on ``/proc/<pinmon's pid>/fd/N`` of that descriptor, which the kernel resolves
to the same open file.
"""
from __future__ import annotations

import ctypes
import errno
import os
import re
import stat
from dataclasses import dataclass, field

from ..collect.processes.procmaps import Mapping
from ..units import printable
from .classify import read_process_maps

LIBCUDA_NAME = re.compile(r"^libcuda\.so(\.[0-9]+)*$")
MAX_THREADS = 1 << 16
SYS_OPENAT2 = 437
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_IN_ROOT = 0x10


@dataclass
class LibraryFile:
    fd: int
    dev: int
    ino: int
    path: str                         # printable, as the first process mapping it named it
    pids: list[int] = field(default_factory=list)


def libcuda_mapping(mappings: list[Mapping]) -> Mapping | None:
    """The executable mapping of a libcuda file, if the process has one."""
    for m in mappings:
        if m.perms[2] == "x" and LIBCUDA_NAME.match(os.path.basename(m.path.replace(" (deleted)", ""))):
            return m
    return None


def list_pids(proc_root: str = "/proc") -> list[int]:
    try:
        return sorted(int(n) for n in os.listdir(proc_root) if n.isdigit())
    except OSError:
        return []


def cuda_pids(proc_root: str = "/proc", own_pid: int | None = None) -> list[int]:
    """Every process (but pinmon itself) whose maps name a libcuda file, by pid."""
    own = os.getpid() if own_pid is None else own_pid
    return [p for p in list_pids(proc_root) if p != own and maps_libcuda(p, proc_root)]


def maps_libcuda(pid: int, proc_root: str = "/proc") -> bool:
    """A cheap look first: whether the maps text names libcuda at all."""
    try:
        fd = os.open(os.path.join(proc_root, str(pid), "maps"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return False
            if b"libcuda.so" in chunk:
                return True
    except OSError:
        return False
    finally:
        os.close(fd)


def comm(pid: int, proc_root: str = "/proc") -> str | None:
    """A process's name as the kernel keeps it (``/proc/PID/comm``, at most 16 bytes): untrusted text."""
    try:
        with open(os.path.join(proc_root, str(pid), "comm"), "rb") as f:
            return f.read(64).decode("utf-8", "replace").strip() or None
    except OSError:
        return None


def threads(pid: int, proc_root: str = "/proc") -> list[int]:
    try:
        names = os.listdir(os.path.join(proc_root, str(pid), "task"))
    except OSError:
        return []
    return [int(n) for n in names[:MAX_THREADS] if n.isdigit()]


def _open_in_root(root: str, path: str) -> int:
    """``path`` resolved inside directory ``root`` (openat2 RESOLVE_IN_ROOT); OSError as open raises."""

    class OpenHow(ctypes.Structure):
        _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        how = OpenHow(os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
        fd = libc.syscall(ctypes.c_long(SYS_OPENAT2), ctypes.c_int(root_fd), os.fsencode(path.lstrip("/")),
                          ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
        if fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return int(fd)
    finally:
        os.close(root_fd)


def open_mapped_file(pid: int, m: Mapping, proc_root: str = "/proc") -> tuple[int | None, str | None]:
    """An fd of the file mapping ``m`` of process ``pid`` shows, checked regular and the maps' inode;
    (None, why) where it cannot be opened so."""
    why = "cannot open it"
    try:
        fd = os.open(os.path.join(proc_root, str(pid), "map_files", f"{m.start:x}-{m.end:x}"),
                     os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        why = f"map_files: {os.strerror(e.errno) if e.errno else e}"
        path = m.path.replace(" (deleted)", "")
        try:
            fd = _open_in_root(os.path.join(proc_root, str(pid), "root"), path)
        except OSError as e2:
            if e2.errno in (errno.ENOSYS, errno.EINVAL, errno.E2BIG):
                return None, why + "; openat2 not available"
            return None, why + f"; in its root: {os.strerror(e2.errno) if e2.errno else e2}"
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        return None, os.strerror(e.errno) if e.errno else str(e)
    if not stat.S_ISREG(st.st_mode) or (m.inode and st.st_ino != m.inode):
        os.close(fd)
        return None, "not the file the process maps (refused)"
    return fd, None


@dataclass
class Targets:
    files: dict[tuple[int, int], LibraryFile]
    pid_file: dict[int, tuple[int, int]]      # pid -> the key of the file it maps
    failed: dict[int, str]

    def close(self) -> None:
        for f in self.files.values():
            try:
                os.close(f.fd)
            except OSError:
                pass
        self.files.clear()


def find_targets(pids: list[int] | None, proc_root: str = "/proc", own_pid: int | None = None) -> Targets:
    """The processes to attach to (``pids``, or every process that maps libcuda) and their files."""
    own = os.getpid() if own_pid is None else own_pid
    out = Targets({}, {}, {})
    candidates = pids if pids is not None else cuda_pids(proc_root, own)
    for pid in candidates:
        maps = read_process_maps(pid, proc_root)
        if maps is None:
            out.failed[pid] = "no such process, or its maps cannot be read"
            continue
        m = libcuda_mapping(maps)
        if m is None:
            out.failed[pid] = "it does not map libcuda"
            continue
        existing = next((k for k, f in out.files.items() if k[1] == m.inode), None)
        if existing is not None and _same_file(out.files[existing].fd, pid, m, proc_root):
            out.files[existing].pids.append(pid)
            out.pid_file[pid] = existing
            continue
        fd, why = open_mapped_file(pid, m, proc_root)
        if fd is None:
            out.failed[pid] = f"its libcuda ({printable(m.path, 120)}): {why}"
            continue
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        if key in out.files:
            os.close(fd)
            out.files[key].pids.append(pid)
        else:
            out.files[key] = LibraryFile(fd, st.st_dev, st.st_ino, printable(m.path, 200), [pid])
        out.pid_file[pid] = key
    return out


def _same_file(fd: int, pid: int, m: Mapping, proc_root: str) -> bool:
    """Whether process ``pid``'s mapping ``m`` is the file already open at ``fd`` (map_files' stat)."""
    try:
        st = os.stat(os.path.join(proc_root, str(pid), "map_files", f"{m.start:x}-{m.end:x}"))
        mine = os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)
