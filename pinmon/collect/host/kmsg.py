"""The kernel's log, record by record, from ``/dev/kmsg``: read without blocking, each record once.

``/dev/kmsg`` (root, or CAP_SYSLOG where ``kernel.dmesg_restrict`` is set) hands out one record per
``read``: ``PRIO,SEQ,USEC,FLAGS[,...];TEXT`` then continuation lines `` KEY=VALUE`` (a device's
subsystem and the like, not read here). ``PRIO`` is ``facility << 3 | level``; the kernel's own
records have facility 0, and a record a program writes into ``/dev/kmsg`` never does (the kernel
makes its facility ``LOG_USER``), so only facility 0 is kept: no program can put a line in front of
the OOM parser. ``USEC`` is microseconds of ``CLOCK_MONOTONIC`` at the message (since boot, without
suspend); ``SEQ`` counts records. In ``TEXT`` the kernel writes bytes below 0x20, from 0x7f up and the
backslash as ``\\xNN``, so a record is one line; ``unescape`` gives the bytes back.

A file descriptor of ``/dev/kmsg`` starts at the oldest record in the ring and moves on as it is
read, so ``KmsgReader`` keeps one open: the first ``read_new`` reads the ring (a few thousand
records), every later one only what the kernel logged since (usually nothing: one ``read`` that
answers EAGAIN). ``EPIPE`` says records were overwritten before they were read: the next read goes
on from the oldest one left, and ``lost`` counts the calls that saw it. A call reads at most
``MAX_RECORDS_PER_CALL`` records (the rest wait for the next one), and ``last_seq`` drops a record
already seen (a reopened descriptor starts at the ring's start again).

Not root, no ``/dev/kmsg`` (a container without it), or a kernel that refuses it: ``read_new`` gives
no record and ``notice`` says why, once; nothing raises.
"""
from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

KMSG = "/dev/kmsg"
# The kernel's largest record as /dev/kmsg writes it (CONSOLE_EXT_LOG_MAX, 8 KiB): a smaller buffer
# makes read fail with EINVAL.
RECORD_BUFFER_BYTES = 8192 + 256
MAX_RECORDS_PER_CALL = 200_000   # the largest rings (log_buf_len=16M) hold ~200,000 records
MAX_TEXT_BYTES = 8192            # a record's text kept (escaped form): the kernel's record is at most that
KERNEL_FACILITY = 0
_ESCAPE = re.compile(rb"\\x([0-9a-fA-F]{2})")
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class KmsgRecord:
    """One record of the kernel's log: its sequence number, its time (microseconds of
    ``CLOCK_MONOTONIC``), its level (0 emergency .. 7 debug) and its text (escaped, as read)."""

    seq: int
    usec: int
    level: int
    text: bytes


def unescape(text: bytes) -> bytes:
    """The bytes the kernel escaped as ``\\xNN`` in a record's text."""
    return _ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), text) if b"\\x" in text else text


def parse_record(data: bytes) -> KmsgRecord | None:
    """One record read from /dev/kmsg -> ``KmsgRecord``; None for a record that is not the kernel's
    own (a program wrote it) or that does not parse."""
    header, sep, rest = data.partition(b";")
    if not sep:
        return None
    fields = header.split(b",")
    if len(fields) < 4 or not all(f.isdigit() and len(f) <= 20 for f in fields[:3]):
        return None
    prio, seq, usec = int(fields[0]), int(fields[1]), int(fields[2])
    if prio >> 3 != KERNEL_FACILITY:
        return None
    text = rest.split(b"\n", 1)[0]
    return KmsgRecord(seq, usec, prio & 7, text[:MAX_TEXT_BYTES])


class KmsgReader:
    """``read_new()``: the kernel's records not read before (its own, facility 0), oldest first.
    ``opener`` opens the log (tests pass a fake); ``path`` is /dev/kmsg."""

    def __init__(self, path: str = KMSG, opener: Callable[[str, int], int] = os.open,
                 reader: Callable[[int, int], bytes] = os.read):
        self.path = path
        self._open = opener
        self._read = reader
        self._fd: int | None = None
        self.notice: str | None = None  # why the log cannot be read; None while it can
        self.last_seq: int | None = None
        self.lost = 0          # reads that found records overwritten before pinmon read them
        self.records_read = 0  # since creation: for tests and the bench

    def _ensure_open(self) -> bool:
        if self._fd is not None:
            return True
        if self.notice is not None:
            return False  # said once; a log pinmon may not read stays so
        try:
            self._fd = self._open(self.path, _OPEN_FLAGS)
        except OSError as e:
            why = ("permission denied (root or CAP_SYSLOG reads it)" if e.errno in (errno.EACCES, errno.EPERM)
                   else "missing" if e.errno == errno.ENOENT else os.strerror(e.errno or 0) or str(e))
            self.notice = f"kernel log: {self.path}: {why}; OOM kills of gone groups are not reported"
            return False
        return True

    def read_new(self, wanted: tuple[bytes, ...] | None = None) -> Iterator[KmsgRecord]:
        """The records logged since the last call (at most ``MAX_RECORDS_PER_CALL``); with ``wanted``,
        only those holding one of its byte strings (the rest are read past, not parsed)."""
        if not self._ensure_open():
            return
        fd = self._fd
        assert fd is not None
        for _ in range(MAX_RECORDS_PER_CALL):
            try:
                data = self._read(fd, RECORD_BUFFER_BYTES)
            except BlockingIOError:
                return  # EAGAIN: nothing more for now
            except BrokenPipeError:
                self.lost += 1  # overwritten: the next read goes on from the oldest record left
                continue
            except InterruptedError:
                continue
            except OSError as e:
                self.close()
                self.notice = f"kernel log: {self.path}: {os.strerror(e.errno or 0) or e}"
                return
            if not data:
                return
            self.records_read += 1
            if wanted is not None and not any(w in data for w in wanted):
                continue
            record = parse_record(data)
            if record is None:
                continue
            if self.last_seq is not None and record.seq <= self.last_seq:
                continue
            self.last_seq = record.seq
            yield record

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def __del__(self) -> None:
        try:
            self.close()
        except (AttributeError, OSError):
            pass
