"""Files named by the user (config, saved snapshots, recordings, saved maps), read with bounds.

Only regular files are read: a FIFO would block and ``/dev/zero`` never ends, so both are refused
before a byte is read (the file is opened non-blocking, then checked with ``fstat``). Whole-file reads
stop at a size cap; line reads (plain or gzip) work through bounded chunks with caps on the length
and the number of lines, so a small gzip that inflates to gigabytes fails after a bounded amount of
work and memory. Every problem is an ``InputError`` whose message is one line naming the file (and
the line, where there is one). Caps are in ``pinmon.limits``.
"""
from __future__ import annotations

import gzip
import io
import os
import re
import stat
import zlib
from typing import Protocol

from ..limits import MAX_LINE_BYTES, MAX_RECORDING_LINES
from ..units import fmt_bytes

CHUNK_BYTES = 1 << 20
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) \
    | getattr(os, "O_NOCTTY", 0)
_NOT_BLANK = re.compile(rb"[^ \t\r\n\x0b\x0c]")
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class ByteReader(Protocol):
    """Bytes read a chunk at a time: a regular file, or the gzip stream over one."""

    def read1(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


class InputError(ValueError):
    """A file that cannot be used; the message is one line naming it."""


class TooLarge(InputError):
    """The file is over a size cap (it may still be read line by line)."""


class Damaged(InputError):
    """Compressed data that is corrupt or ends early: what was read before it is good."""


def _reason(e: OSError) -> str:
    return e.strerror or str(e)


def open_regular(path: str) -> io.BufferedReader:
    """``path`` opened for binary reading, if it is a regular file; InputError otherwise."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        reason = _reason(e) if isinstance(e, OSError) else "not a valid path"
        raise InputError(f"{path}: cannot read it ({reason})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise InputError(f"{path}: is {kind}, not a regular file")
        # Blocking reads again: a regular file never blocks, and buffered reads expect it.
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class _OwningGzipFile(gzip.GzipFile):
    """A GzipFile that closes the file it reads from (GzipFile leaves a passed ``fileobj`` open)."""

    def __init__(self, raw: io.BufferedReader):
        self._raw = raw
        super().__init__(fileobj=raw, mode="rb")

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def open_maybe_gzip(path: str) -> ByteReader:
    """A regular file's decompressed bytes when its name ends in .gz, its bytes otherwise."""
    raw = open_regular(path)
    if path.endswith(".gz"):
        return _OwningGzipFile(raw)
    return raw


def _read(f: ByteReader, n: int, path: str, after: str) -> bytes:
    """Up to ``n`` bytes, b"" at the end; gzip and I/O faults as InputError (``after`` says where in
    the file). ``read1``: the bytes decompressed before a gzip stream breaks off come back first."""
    try:
        return f.read1(n)
    except EOFError:
        raise Damaged(f"{path}: compressed data ends early{after}") from None
    except (gzip.BadGzipFile, zlib.error) as e:
        raise Damaged(f"{path}: corrupt gzip data{after} ({' '.join(str(e).split())})") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read it{after} ({_reason(e)})") from None


def read_capped_buffer(path: str, max_bytes: int, what: str) -> bytearray:
    """The whole (decompressed, for .gz) content of a regular file of at most ``max_bytes``, in one
    buffer grown in place: the file is held once, not as chunks and their join."""
    f = open_maybe_gzip(path)
    data = bytearray()
    try:
        while len(data) <= max_bytes:
            chunk = _read(f, min(CHUNK_BYTES, max_bytes + 1 - len(data)), path, "")
            if not chunk:
                break
            data += chunk
    finally:
        _close(f)
    if len(data) > max_bytes:
        raise TooLarge(f"{path}: larger than {fmt_bytes(max_bytes, 0)}, too large for {what}")
    return data


def read_capped(path: str, max_bytes: int, what: str) -> bytes:
    """``read_capped_buffer`` as bytes."""
    return bytes(read_capped_buffer(path, max_bytes, what))


def is_blank(data: bytes | bytearray) -> bool:
    """Whether ``data`` holds nothing but blanks (looked at without a copy)."""
    return _NOT_BLANK.search(data) is None


def _close(f: ByteReader) -> None:
    try:
        f.close()
    except (OSError, EOFError, zlib.error):
        pass


def _rstrip_in_place(line: bytearray) -> None:
    """Cut ``line``'s trailing blanks without copying the line: look at a tail twice as long each time."""
    k = 64
    while True:
        tail = bytes(line[-k:])
        kept = len(tail.rstrip())
        if kept or k >= len(line):
            del line[len(line) - len(tail) + kept:]
            return
        k *= 2


class LineReader:
    """The non-blank lines of a text file (gzip when its name ends in .gz), as bytes without the
    line break (a line longer than a chunk as a ``bytearray``, which compares and parses alike). ``line_no`` is the number of the line last returned. At most ``max_line_bytes`` per
    line and ``max_lines`` lines (blank ones count: a file of nothing but line breaks ends quickly)."""

    def __init__(self, path: str, max_line_bytes: int = MAX_LINE_BYTES,
                 max_lines: int = MAX_RECORDING_LINES):
        self.path = path
        self.max_line_bytes = max_line_bytes
        self.max_lines = max_lines
        self.line_no = 0
        self._f: ByteReader | None = open_maybe_gzip(path)
        self._buf = b""
        self._pos = 0
        self._eof = False

    def _after(self) -> str:
        return f" after line {self.line_no}" if self.line_no else ""

    def _fill(self) -> bytes:
        """The next chunk, b"" at the end of the file."""
        if self._eof or self._f is None:
            return b""
        chunk = _read(self._f, CHUNK_BYTES, self.path, self._after())
        if not chunk:
            self._eof = True
        return chunk

    def _count(self, newlines: int) -> None:
        self.line_no += newlines
        if self.line_no > self.max_lines:
            raise InputError(f"{self.path}: more than {self.max_lines:,} lines")

    def _too_long(self) -> InputError:
        return InputError(f"{self.path}:{self.line_no + 1}: line longer than"
                          f" {fmt_bytes(self.max_line_bytes, 0)}")

    def next_line(self) -> bytes | None:
        """The next non-blank line, or None at the end of the file. Raises InputError."""
        while True:
            buf, pos = self._buf, self._pos
            m = _NOT_BLANK.search(buf, pos)
            if m is None:  # only blanks left in this chunk
                self._count(buf.count(b"\n", pos))
                self._buf, self._pos = self._fill(), 0
                if not self._buf:
                    return None
                continue
            start = m.start()
            self._count(buf.count(b"\n", pos, start))
            end = buf.find(b"\n", start)
            if end >= 0:
                if end - start > self.max_line_bytes:
                    raise self._too_long()
                self._pos = end + 1
                self._count(1)
                return buf[start:end]
            return self._long_line(buf[start:])

    def _long_line(self, head: bytes) -> bytes | None:
        """A line that runs past the chunk in hand: gather chunks until its line break, in one buffer
        that grows in place (a list of chunks joined at the end would hold the line twice)."""
        line = bytearray(head)
        while True:
            if len(line) > self.max_line_bytes:
                raise self._too_long()
            chunk = self._fill()
            if not chunk:  # the last line, without a line break
                self._buf, self._pos = b"", 0
                self._count(1)
                _rstrip_in_place(line)
                return line or None  # type: ignore[return-value]  # bytes-like: bytearray
            end = chunk.find(b"\n")
            if end < 0:
                line += chunk
                continue
            if len(line) + end > self.max_line_bytes:
                raise self._too_long()
            line += memoryview(chunk)[:end]
            self._buf, self._pos = chunk, end + 1
            self._count(1)
            return line  # type: ignore[return-value]

    def close(self) -> None:
        f, self._f = self._f, None
        if f is not None:
            _close(f)
