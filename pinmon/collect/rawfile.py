"""Small files read whole with plain ``os.open``/``os.read``: /proc and cgroup files are read every
second, and a text file object costs more than the read itself."""
from __future__ import annotations

import os

READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
READ_CHUNK = 1 << 16


def read_to_end(fd: int) -> bytes:
    """Everything left to read from ``fd`` (a /proc file is built as it is read: read until empty)."""
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, READ_CHUNK)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def read_bytes(path: str) -> bytes:
    """The whole file at ``path``; OSError (and ValueError for a NUL in the path) as ``os.open`` raises."""
    fd = os.open(path, READ_FLAGS)
    try:
        return read_to_end(fd)
    finally:
        os.close(fd)
