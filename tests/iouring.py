"""A CPU-only way to pin a known number of pages: io_uring registered buffers.

``io_uring_register(IORING_REGISTER_BUFFERS)`` pins the buffer's pages with ``pin_user_pages``
(FOLL_PIN), exactly as the CUDA driver pins for ``cudaHostAlloc`` and ``cudaHostRegister``, so the
kernel's ``nr_foll_pin_acquired`` rises by the buffer's pages. ``close`` unregisters them first
(``IORING_UNREGISTER_BUFFERS``), which unpins them before it returns: closing the ring alone unpins
them asynchronously, in the kernel's ring teardown, which a loaded box was seen to delay past the
next measurement. The buffer is a private anonymous mapping with huge pages
turned off: io_uring keeps one pin per huge page when it coalesces a huge-page buffer, which would
not be one pin per 4 KiB page.

``io_uring_setup`` (425) and ``io_uring_register`` (427) have the same numbers on every
architecture. ``Unavailable`` is raised where the kernel or a sandbox refuses them (ENOSYS, EPERM,
EACCES, or ``kernel.io_uring_disabled``), so tests can skip with the reason.
"""
from __future__ import annotations

import ctypes
import errno
import mmap
import os

SYS_IO_URING_SETUP = 425
SYS_IO_URING_REGISTER = 427
IORING_REGISTER_BUFFERS = 0
IORING_UNREGISTER_BUFFERS = 1
_PARAMS_BYTES = 120  # sizeof(struct io_uring_params)


class Unavailable(Exception):
    """io_uring cannot be used here; the message says why."""


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


class PinnedBuffer:
    """``nbytes`` pinned by io_uring while the with block runs; ``pages`` is how many it pins."""

    def __init__(self, nbytes: int, syscall=None):
        page = mmap.PAGESIZE
        self.nbytes = (int(nbytes) + page - 1) // page * page
        self.pages = self.nbytes // page
        self._syscall = syscall or _libc().syscall
        self._ring = -1
        self._map = None
        self._anchor = None

    def __enter__(self) -> PinnedBuffer:
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, *args) -> int:
        rc = self._syscall(*args)
        if rc < 0:
            e = ctypes.get_errno()
            if e in (errno.ENOSYS, errno.EPERM, errno.EACCES):
                raise Unavailable(f"io_uring refused here: {errno.errorcode.get(e, e)} ({os.strerror(e)})")
            raise OSError(e, os.strerror(e))
        return rc

    def open(self) -> None:
        params = (ctypes.c_char * _PARAMS_BYTES)()
        self._ring = self._call(ctypes.c_long(SYS_IO_URING_SETUP), ctypes.c_uint(4), params)
        self._map = mmap.mmap(-1, self.nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(self._map, "madvise") and hasattr(mmap, "MADV_NOHUGEPAGE"):
            self._map.madvise(mmap.MADV_NOHUGEPAGE)
        self._anchor = ctypes.c_char.from_buffer(self._map)
        iov = _Iovec(ctypes.addressof(self._anchor), self.nbytes)
        self._call(ctypes.c_long(SYS_IO_URING_REGISTER), ctypes.c_int(self._ring),
                   ctypes.c_uint(IORING_REGISTER_BUFFERS), ctypes.byref(iov), ctypes.c_uint(1))

    def close(self) -> None:
        """Unpin the buffer (synchronously), close the ring and unmap the buffer."""
        ring, self._ring = self._ring, -1
        if ring >= 0:
            if self._map is not None:
                # Fails (ENXIO) where nothing was registered: the close below is all there is then.
                self._syscall(ctypes.c_long(SYS_IO_URING_REGISTER), ctypes.c_int(ring),
                              ctypes.c_uint(IORING_UNREGISTER_BUFFERS), None, ctypes.c_uint(0))
            os.close(ring)
        self._anchor = None  # the export must go before the mapping can close
        m, self._map = self._map, None
        if m is not None:
            m.close()
