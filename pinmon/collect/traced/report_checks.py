"""One tracer report (``pinmon.trace/1``): read from an open directory, checked, turned into figures.

What makes a report trustworthy, and what the reader does with directories, is in ``reader.py``;
this module holds the checks of one file and one process:

- the file: a regular file (``O_NOFOLLOW``, never a symlink) owned by the directory's owner (and by
  the reader unless the reader is root), mode 0600 at most, at most ``MAX_REPORT_BYTES``;
- the JSON: one object of schema ``pinmon.trace/1``; nesting too deep for the parser refuses the one
  file, not its directory;
- the figures: every number (the free-form ``extra`` library statistics aside, which pinmon does not
  read) finite, >= 0 and at most 2**63 - 1, or the whole report is refused: NaN, Infinity, 1e999 and
  negative figures are corruption or forgery, never readings, and a negative must never cancel
  another process's memory in a total. Held bytes are then clamped: pinned, registered and requested
  bytes to the process's resident set (``VmRSS``; pinned pages are always resident and mapped),
  write-combined bytes (driver pages, which RSS does not count) to the host's ``MemTotal``;
- call-site text is data: at most one site per known category (the most frequent allocation site,
  the copy or waste site with the most bytes), cut to ``MAX_SITE_CHARS`` printable characters
  (``units.printable``), for views and findings to quote;
- the process: its start time and state from ``/proc/PID/stat`` (a zombie is dead), and from
  ``/proc/PID/status`` its thread group id (it must be the pid: a thread is not a process), real uid
  and resident set.
"""
from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass
from typing import NamedTuple

from ...limits import MAX_SIZE_BYTES
from ...model import ProcessPinned
from ...model.serial import evolve
from ...report_format import TRACE_SCHEMA, proc_start_ticks
from ...units import printable
from .cupti_fields import allocations_of, copies_of

MAX_REPORT_BYTES = 1 << 20
MAX_FIGURE = 2**63 - 1
MAX_SITE_CHARS = 160
MAX_PID = 1 << 22   # the kernel's PID_MAX_LIMIT
MAX_UID = 2**32 - 2  # (uid_t)-1 is "no uid"
# The tracer's call-site categories; others in a report are ignored.
CALL_SITE_CATEGORIES = ("alloc", "register", "rounding_waste", "pageable_copy", "wc_readback")

FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


def decimal(text: str, maximum: int) -> int | None:
    """``text`` as an ASCII decimal number in [0, maximum], else None (``str.isdigit`` takes "²")."""
    if not 0 < len(text) <= len(str(maximum)) or not text.isascii() or not text.isdigit():
        return None
    value = int(text)
    # One spelling per number: "007" is not pid 7.
    return value if value <= maximum and str(value) == text else None


@dataclass
class TracedProcess:
    """A report accepted for a live process, with the caps its held figures are clamped to."""

    pid: int
    report: dict
    rss_bytes: int | None = None        # clamps the held pinned figures (VmRSS)
    mem_total_bytes: int | None = None  # clamps the write-combined figure (MemTotal)

    def _get(self, *keys, default=None):
        d = self.report
        for k in keys:
            if not isinstance(d, dict) or k not in d:
                return default
            d = d[k]
        return d

    def held_figures(self) -> dict[str, int | None]:
        """The ``HeldMemory`` fields this report fills in (exact figures of hooked calls), clamped."""
        g = self._get
        rss, ram = self.rss_bytes, self.mem_total_bytes
        return {
            "pinned_bytes": _cap(_int(g("pinned", "bytes")), rss),
            "write_combined_bytes": _cap(_int(g("pinned", "write_combined_bytes")), ram),
            "registered_bytes": _cap(_int(g("pinned", "registered_bytes")), rss),
            "requested_bytes": _cap(_int(g("pinned", "requested_bytes")), rss),
        }

    def apply(self, row: ProcessPinned) -> ProcessPinned:
        """``row`` (the process's maps estimate, or an empty row) with this report's figures: its held
        memory's pinned, write-combined, registered and requested bytes, its copies, allocations and
        call sites; what the scan saw of it (mappings, VmPin, VmLck, a cap) stays."""
        return evolve(row, source="traced", held=evolve(row.held, **self.held_figures()),
                      copies=copies_of(self.report), allocations=allocations_of(self.report),
                      call_sites=self.call_sites())

    def call_sites(self) -> dict[str, str]:
        """Category -> the first site (``file:line``) the tracer lists for it, as printable text: the
        allocation site with the most calls, the copy or waste site with the most bytes."""
        sites = self._get("call_sites", default={})
        out: dict[str, str] = {}
        if not isinstance(sites, dict):
            return out
        for cat in CALL_SITE_CATEGORIES:
            rows = sites.get(cat)
            if rows and isinstance(rows, list) and isinstance(rows[0], dict) and isinstance(rows[0].get("site"), str):
                out[cat] = printable(rows[0]["site"], MAX_SITE_CHARS)
        return out


def _int(v) -> int | None:
    """A byte figure of the report, whole and held to what any host holds (the report's own check lets
    figures up to 2**63 - 1 through, and a snapshot refuses more than ``MAX_SIZE_BYTES``); the clamps
    to the process and the host come after."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    return min(int(v), MAX_SIZE_BYTES)


def _cap(v: int | None, limit: int | None) -> int | None:
    return min(v, limit) if v is not None and limit is not None else v


class ProcIdentity(NamedTuple):
    start_ticks: int
    uid: int
    rss_bytes: int | None


def proc_identity(pid: int, proc_root: str = "/proc") -> ProcIdentity | None:
    """Start time, real uid and resident bytes of a live process; None when gone, dead, unreadable
    or not a process: ``/proc/<tid>`` of a thread reads like a process, but its ``Tgid`` is another."""
    ticks = proc_start_ticks(pid, proc_root)
    if ticks is None:
        return None
    try:
        fd = os.open(os.path.join(proc_root, str(pid), "status"), FILE_FLAGS)
        try:
            data = os.read(fd, 16384)
        finally:
            os.close(fd)
    except OSError:
        return None
    uid = rss = tgid = None
    for line in data.split(b"\n"):
        try:
            if line.startswith(b"Tgid:"):
                tgid = int(line.split()[1])
            elif line.startswith(b"Uid:"):
                uid = int(line.split()[1])  # real, effective, saved, filesystem
            elif line.startswith(b"VmRSS:"):
                rss = int(line.split()[1]) * 1024  # "VmRSS:  1234 kB"
        except (IndexError, ValueError):
            return None
    if uid is None or tgid != pid:
        return None
    return ProcIdentity(ticks, uid, rss)


def mem_total(proc_root: str) -> int | None:
    try:
        with open(os.path.join(proc_root, "meminfo"), "rb") as f:
            for line in f.read(65536).split(b"\n"):
                if line.startswith(b"MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return None


class _BadFigure(ValueError):
    pass


def _no_constant(name: str):
    raise _BadFigure(f"a figure is {name}")


def check_figures(report: dict) -> None:
    """Raise ValueError unless every number (outside ``extra``) is finite, >= 0 and <= MAX_FIGURE."""
    stack = [v for k, v in report.items() if k != "extra"]
    while stack:  # a loop, not recursion: the JSON may be as deep as the parser allowed
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        elif isinstance(v, float) and not math.isfinite(v):
            raise _BadFigure("a figure is not finite")
        elif v < 0:
            raise _BadFigure("a figure is negative")
        elif v > MAX_FIGURE:
            raise _BadFigure("a figure is too large")


def parse_report(data: bytes) -> dict:
    """The report in ``data``; raises ValueError with the reason it is refused."""
    try:
        report = json.loads(data, parse_constant=_no_constant)
    except _BadFigure:
        raise
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except (ValueError, UnicodeDecodeError):
        raise ValueError("not a whole JSON report") from None
    if not isinstance(report, dict) or report.get("schema") != TRACE_SCHEMA:
        raise ValueError("not a pinmon.trace/1 report")
    check_figures(report)
    return report


def read_report_file(dir_fd: int, name: str, owner: int, reader_uid: int, limit: int = MAX_REPORT_BYTES) -> dict:
    """The parsed report ``name`` in the open directory; raises ValueError with the reason it is refused."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        raise ValueError(f"cannot open ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_uid != owner or (reader_uid != 0 and st.st_uid != reader_uid):
            raise ValueError(f"owned by uid {st.st_uid}")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise ValueError(f"mode {stat.S_IMODE(st.st_mode):o} is open to others")
        if st.st_size > limit:
            raise ValueError("too large")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise ValueError("too large")
    return parse_report(b"".join(chunks))
