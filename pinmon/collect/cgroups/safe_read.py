"""Reading files that someone else controls: regular files only, no links, a size bound, no raise.

Root reads what containers and their owners write: a runtime's state file carries names from a pod
spec, and a rootless container's state sits in its user's home. Three rules make such a read safe:

- **No link is followed below a trusted directory.** ``read_beneath(base, parts)`` opens ``base``
  (a directory pinmon names, e.g. ``/run/containerd``; an administrator's link there is honoured)
  and then every component of ``parts`` relative to it, refusing links: with ``openat2`` and
  ``RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH`` where the kernel has it (5.6+, one call for the whole
  directory path), else one ``openat(O_NOFOLLOW | O_DIRECTORY)`` per directory. ``..``, ``.``,
  empty parts and parts with a slash or a NUL are refused before anything is opened.
- **Regular files only.** The last component is looked at with ``fstatat(AT_SYMLINK_NOFOLLOW)``
  before it is opened, so a FIFO (which would block an open) or a device node (whose open can act)
  is refused unopened; it is then opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked again with
  ``fstat`` (same inode, still a regular file), which closes the gap between the two.
- **A size bound.** At most ``max_bytes`` are read; a longer file is refused, not cut (a cut JSON
  document would not parse anyway, and a cut figure would be wrong).

Every failure is a ``ReadResult`` with ``data`` None and a short ``reason``, never an exception.
``read_file`` and ``open_regular`` are for the kernel's own file systems (cgroupfs, /proc), read
every second: no link a user can plant, no FIFO or device node there, so one ``open`` with
``O_NOFOLLOW | O_NONBLOCK`` and an ``fstat`` suffice.
"""
from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

_OPEN_FILE = (os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
              | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
_OPEN_DIR = (os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_DIRECTORY", 0)
             | getattr(os, "O_NOFOLLOW", 0))
_OPEN_BASE = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_DIRECTORY", 0)

# openat2(2): the same number on every architecture (new system calls share one table).
SYS_OPENAT2 = 437
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_AT_FDCWD = -100

MAX_PARTS = 32  # deeper than any runtime's state layout


@dataclass(frozen=True)
class ReadResult:
    """The bytes read, or None and why not (``reason``: a few words for a notice or a test)."""

    data: bytes | None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.data is not None


def _why(e: OSError) -> str:
    if e.errno == errno.ENOENT:
        return "missing"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if e.errno in (errno.ELOOP, errno.EXDEV):
        return "a link on the path (refused)"
    if e.errno == errno.ENOTDIR:
        return "not a directory on the path"
    return os.strerror(e.errno) if e.errno else str(e)


def _valid_part(part: str) -> bool:
    return (isinstance(part, str) and part not in ("", ".", "..") and "/" not in part
            and "\0" not in part)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _Openat2:
    """``openat2`` through libc's ``syscall``; ``usable`` turns False for good on ENOSYS (a kernel
    before 5.6, or a seccomp filter that hides it) or on a libc without ``syscall``."""

    def __init__(self) -> None:
        self.usable = True
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            self._syscall = libc.syscall
            self._syscall.restype = ctypes.c_long
        except (OSError, AttributeError):
            self.usable = False

    def open_dir(self, dir_fd: int, rel: str) -> int:
        """An fd of directory ``rel`` below ``dir_fd``, no link followed; OSError as open raises;
        NotImplementedError when openat2 is not there (the caller walks instead)."""
        how = _OpenHow(_OPEN_DIR, 0, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH)
        fd = self._syscall(ctypes.c_long(SYS_OPENAT2), ctypes.c_int(dir_fd), os.fsencode(rel),
                           ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
        if fd < 0:
            e = ctypes.get_errno()
            if e in (errno.ENOSYS, errno.E2BIG, errno.EINVAL):
                self.usable = False
                raise NotImplementedError
            raise OSError(e, os.strerror(e))
        return fd


_OPENAT2 = _Openat2()


def _read_open_file(fd: int, max_bytes: int) -> ReadResult:
    chunks, left = [], max_bytes + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        return ReadResult(None, f"larger than {max_bytes} bytes")
    return ReadResult(data)


def _read_entry(dir_fd: int | None, name: str, max_bytes: int) -> ReadResult:
    """``name`` (relative to ``dir_fd``, or a path when None) as a regular file, not a link."""
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except (OSError, ValueError) as e:
        return ReadResult(None, _why(e) if isinstance(e, OSError) else "bad name")
    if stat.S_ISLNK(before.st_mode):
        return ReadResult(None, "a symbolic link (refused)")
    if not stat.S_ISREG(before.st_mode):
        return ReadResult(None, "not a regular file")
    try:
        fd = os.open(name, _OPEN_FILE, dir_fd=dir_fd)
    except OSError as e:
        return ReadResult(None, _why(e))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            return ReadResult(None, "replaced while opened (refused)")
        return _read_open_file(fd, max_bytes)
    except OSError as e:
        return ReadResult(None, _why(e))
    finally:
        os.close(fd)


def read_file(path: str, max_bytes: int) -> ReadResult:
    """A file of a kernel file system (cgroupfs, /proc), read every second: no link as the last
    component (``O_NOFOLLOW``), regular (``fstat``), bounded. Those file systems hold no FIFO or
    device node, so the open needs no look first; ``O_NONBLOCK`` keeps a FIFO planted in a fake
    tree from blocking, and ``fstat`` refuses it."""
    fd = open_regular(path)
    if isinstance(fd, ReadResult):
        return fd
    try:
        return _read_open_file(fd, max_bytes)
    except OSError as e:
        return ReadResult(None, _why(e))
    finally:
        os.close(fd)


def open_regular(path: str):
    """An fd of ``path`` opened as ``read_file`` opens it (the caller closes it), or a ReadResult
    saying why not."""
    try:
        fd = os.open(path, _OPEN_FILE)
    except (OSError, ValueError) as e:
        if isinstance(e, OSError) and e.errno == errno.ELOOP:
            return ReadResult(None, "a symbolic link (refused)")
        return ReadResult(None, _why(e) if isinstance(e, OSError) else "bad name")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return ReadResult(None, "not a regular file")
    except OSError as e:
        os.close(fd)
        return ReadResult(None, _why(e))
    return fd


def _walk(base_fd: int, dirs: Sequence[str], use_openat2: bool) -> int:
    """An fd of ``base/dirs...``, no link followed; the caller closes it. OSError as open raises."""
    if not dirs:
        return os.dup(base_fd)
    if use_openat2 and _OPENAT2.usable:
        try:
            return _OPENAT2.open_dir(base_fd, "/".join(dirs))
        except NotImplementedError:
            pass
    fd = os.dup(base_fd)
    try:
        for part in dirs:
            nxt = os.open(part, _OPEN_DIR, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _explain(base_fd: int, dirs: Sequence[str]) -> str:
    """Why ``dirs`` below ``base_fd`` cannot be walked: the first link or non-directory on it
    (``open`` says ENOTDIR for a link opened with O_DIRECTORY, which would hide the link)."""
    fd = os.dup(base_fd)
    try:
        for part in dirs:
            st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                return "a link on the path (refused)"
            if not stat.S_ISDIR(st.st_mode):
                return "not a directory on the path"
            nxt = os.open(part, _OPEN_DIR, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError as e:
        return _why(e)
    finally:
        os.close(fd)
    return "changed while walked"


def _walk_or_why(base_fd: int, dirs: Sequence[str], use_openat2: bool) -> tuple[int | None, str | None]:
    try:
        return _walk(base_fd, dirs, use_openat2), None
    except OSError as e:
        return None, _explain(base_fd, dirs) if e.errno == errno.ENOTDIR else _why(e)


def read_beneath(base: str, parts: Sequence[str], max_bytes: int, *, use_openat2: bool = True) -> ReadResult:
    """``base/parts[0]/.../parts[-1]`` as a regular file, bounded, with no link followed below
    ``base``. ``use_openat2=False`` takes the portable walk (the tests run both)."""
    parts = list(parts)
    if not parts or len(parts) > MAX_PARTS or not all(_valid_part(p) for p in parts):
        return ReadResult(None, "bad path (refused)")
    try:
        base_fd = os.open(base, _OPEN_BASE)
    except (OSError, ValueError) as e:
        return ReadResult(None, _why(e) if isinstance(e, OSError) else "bad name")
    try:
        dir_fd, why = _walk_or_why(base_fd, parts[:-1], use_openat2)
        if dir_fd is None:
            return ReadResult(None, why)
        try:
            return _read_entry(dir_fd, parts[-1], max_bytes)
        finally:
            os.close(dir_fd)
    finally:
        os.close(base_fd)


def list_beneath(base: str, parts: Sequence[str], max_entries: int, *,
                 use_openat2: bool = True) -> tuple[list[str] | None, str | None]:
    """The names in directory ``base/parts...`` (no link followed below ``base``), at most
    ``max_entries`` of them; (None, reason) where it cannot be listed. Names only: nothing listed
    is opened or followed."""
    parts = list(parts)
    if len(parts) > MAX_PARTS or not all(_valid_part(p) for p in parts):
        return None, "bad path (refused)"
    try:
        base_fd = os.open(base, _OPEN_BASE)
    except (OSError, ValueError) as e:
        return None, _why(e) if isinstance(e, OSError) else "bad name"
    try:
        dir_fd, why = _walk_or_why(base_fd, parts, use_openat2)
        if dir_fd is None:
            return None, why
        try:
            names: list[str] = []
            with os.scandir(dir_fd) as it:
                for entry in it:
                    if len(names) >= max_entries:
                        break
                    names.append(entry.name)
            return names, None
        except OSError as e:
            return None, _why(e)
        finally:
            os.close(dir_fd)
    finally:
        os.close(base_fd)
