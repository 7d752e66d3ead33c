"""Reading an instance's events as the kernel writes them, without blocking, in bounded memory.

``RawReader`` (the default) reads each CPU's ``trace_pipe_raw`` a page at a time and decodes the
records (``rawpages.py``) with each event's layout from its ``format`` file. ``TextReader`` reads the
instance's ``trace_pipe`` (the kernel formats each event as a line, ``events.py`` parses it); it is
kept for comparison (``bench/attach_cost.py``) and as a fallback where a layout cannot be read.

Both return what they read since the last call, at most ``max_records`` a call (the rest stays in
the kernel's buffer for the next call), in time order, plus the count of events the kernel says were
lost: ``RawReader`` as (seconds on the trace clock, record bytes) pairs, left to decode (``decode``):
a loop of equal calls makes equal records, decoded once; ``TextReader`` as ``Record``s (seconds,
thread id, tgid or None, event name, fields).
"""
from __future__ import annotations

import errno
import os
from typing import NamedTuple

from .events import Event, Lost, parse_line
from .rawpages import Layout, parse_format, parse_page
from .tracefs import Instance

MAX_RECORDS_PER_READ = 200_000
MAX_PENDING_TEXT = 1 << 16


class Record(NamedTuple):
    ts: float
    tid: int
    tgid: int | None
    event: str
    fields: dict


class Batch(NamedTuple):
    records: list
    lost: int
    bad_pages: int
    raw: bool = False


def _nonblocking_read(fd: int, size: int) -> bytes | None:
    try:
        return os.read(fd, size)
    except BlockingIOError:
        return None
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EINTR):
            return None
        raise


def _first(pair: tuple) -> float:
    return pair[0]


class RawReader:
    kind = "raw"

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.page_bytes = instance.subbuf_bytes()
        self.layouts: dict[int, Layout] = {}
        self.fds: list[int] = []
        for cpu in instance.cpus():
            path = instance.path("per_cpu", f"cpu{cpu}", "trace_pipe_raw")
            self.fds.append(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))

    def learn(self, group: str, events: list[str]) -> list[str]:
        """Read the layout of each event of ``group``; the names of those whose layout could not be read."""
        missing = []
        for ev in events:
            try:
                layout = parse_format(self.instance.read(os.path.join("events", group, ev, "format")))
            except OSError:
                layout = None
            if layout is None:
                missing.append(ev)
            else:
                self.layouts[layout.id] = layout
        return missing

    def read(self, max_records: int = MAX_RECORDS_PER_READ) -> Batch:
        records: list = []
        lost = bad = 0
        layouts = self.layouts
        for fd in self.fds:
            while len(records) < max_records:
                page = _nonblocking_read(fd, self.page_bytes)
                if not page:
                    break
                parsed = parse_page(page)
                if parsed.missed:
                    lost += max(parsed.missed, 1)
                bad += parsed.bad
                for ts_ns, event_id, record in parsed.records:
                    if event_id in layouts:
                        records.append((ts_ns / 1e9, record))
        records.sort(key=_first)  # CPUs' pages interleave: the calls in the order they ran
        return Batch(records, lost, bad, raw=True)

    def decode(self, record: bytes) -> Record | None:
        """A record's thread, event and fields (its time left at 0); None for one of no known event."""
        layout = self.layouts.get(record[0] | (record[1] << 8))
        decoded = layout.decode(record) if layout is not None else None
        return None if decoded is None else Record(0.0, decoded[0], None, layout.name, decoded[1])  # type: ignore[union-attr]

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []


class TextReader:
    kind = "text"

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.fd: int | None = os.open(instance.path("trace_pipe"), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        self._tail = b""

    def learn(self, group: str, events: list[str]) -> list[str]:
        return []

    def read(self, max_records: int = MAX_RECORDS_PER_READ) -> Batch:
        records: list = []
        lost = 0
        while self.fd is not None and len(records) < max_records:
            chunk = _nonblocking_read(self.fd, 1 << 16)
            if not chunk:
                break
            data = self._tail + chunk
            lines = data.split(b"\n")
            self._tail = lines.pop()[-MAX_PENDING_TEXT:]
            for line in lines:
                got = parse_line(line.decode("utf-8", "replace"))
                if isinstance(got, Event):
                    records.append(Record(got.ts, got.tid, got.tgid, got.name, got.fields))
                elif isinstance(got, Lost):
                    lost += got.count
        return Batch(records, lost, 0)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
