"""Reads the in-process tracer's reports (``pinmon.trace/1``) and turns them into process rows.

A report is a claim made by whoever could write its file, so it is taken only when all of these hold:

- its directory, opened ``O_NOFOLLOW | O_DIRECTORY`` and checked on the open descriptor, is a real
  directory of mode 0700 owned by the expected user: the reader, or (root only) the ``<uid>`` of a
  ``/tmp/pinmon-<uid>`` directory, looked up by name for each uid that has a live process (never
  by listing /tmp, where anyone can make entries);
- the file is named ``<pid>.json``, the pid in ASCII decimal, and is a regular file (not a symlink)
  owned by the directory's owner, mode 0600 at most, at most ``MAX_REPORT_BYTES``;
- it parses as one JSON object of schema ``pinmon.trace/1`` naming that pid;
- the pid is a live process, not a zombie (state Z or X: the program has ended) and not a thread of
  another (its ``Tgid`` is itself: a thread id passes every other check), whose start time
  (field 22 of ``/proc/PID/stat``) matches the report's and whose real uid (``/proc/PID/status``) is
  the directory's owner: a user can vouch only for their own processes.

The checks of one file, its figures (finite, >= 0, held bytes clamped) and its call-site text are
in ``report_checks.py``.

Cleanup: the report of a dead process (a zombie included) or of a pid now used by another process
is removed, and so is a temporary file a killed writer left (its writer gone, or older than a
minute). Listing, stat, open and unlink all go through the directory's open descriptor
(``dir_fd``): swapping the directory for a symlink after it was checked cannot point root's unlinks
anywhere else.

Cost: a refused report is remembered by (device, inode, ctime, mtime, size) and not read again
while it is unchanged. Each read is bounded (``Limits``): directories opened, entries looked at per
directory, report bytes parsed per directory and in all.
Reports are parsed smallest first, so one directory of large files cannot starve the others. When
a bound stops the reading, a notice says so.
"""
from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from ...report_format import UnsafeDirError, check_dir_stat, is_temp_name, report_pid_text, runtime_dir, tmp_dir
from ...units import fmt_bytes, printable
from .report_checks import (
    MAX_PID,
    MAX_REPORT_BYTES,
    MAX_UID,
    TracedProcess,
    decimal,
    mem_total,
    proc_identity,
    read_report_file,
)

__all__ = ["Limits", "ReadResult", "ReportReader", "TracedProcess", "merge_traced", "read_all",
           "read_reports", "report_dirs"]

STALE_TEMP_S = 60.0
_DIR_FLAGS = (os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
              | getattr(os, "O_NONBLOCK", 0))


@dataclass(frozen=True)
class Limits:
    """The work one read may do; see the module docstring."""

    dirs: int = 64                  # report directories opened
    entries_per_dir: int = 1024     # entries looked at in one directory
    bytes_per_dir: int = 2 << 20    # report bytes parsed from one directory
    bytes_per_read: int = 8 << 20   # report bytes parsed in all
    report_bytes: int = MAX_REPORT_BYTES


@dataclass
class ReadResult:
    processes: dict[int, TracedProcess] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)  # why files were refused (one line each)
    removed: int = 0
    remembered: int = 0  # refused before and unchanged since: not read again
    notices: list[str] = field(default_factory=list)   # for the snapshot: what the user should know


class _Budget:
    """What is left of one read's work, and what was left undone."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.bytes_left = limits.bytes_per_read
        self.dirs_cut: list[str] = []       # directories whose entries were not all looked at
        self.skipped_reports = 0            # reports not parsed for the byte bounds
        self.dirs_unread = 0                # directories not opened for the directory bound
        self.dirs_total = 0

    def notice(self) -> str | None:
        parts = []
        if self.dirs_unread:
            parts.append(f"{self.dirs_total - self.dirs_unread} of {self.dirs_total} report directories read")
        if self.dirs_cut:
            parts.append(f"only the first {self.limits.entries_per_dir} entries of {len(self.dirs_cut)}"
                         f" director{'y' if len(self.dirs_cut) == 1 else 'ies'} looked at")
        if self.skipped_reports:
            parts.append(f"{self.skipped_reports} report{'s' if self.skipped_reports != 1 else ''} over"
                         f" the {fmt_bytes(self.limits.bytes_per_dir)} per directory or"
                         f" {fmt_bytes(self.limits.bytes_per_read)} per snapshot read budget")
        if not parts:
            return None
        return "trace reports: work bound reached (" + "; ".join(parts) + "): some reports were not read"


class ReportReader:
    """Reads report directories; keeps what lasts between reads (refusals, root's /tmp listing)."""

    def __init__(self, proc_root: str = "/proc", clean: bool = True, limits: Limits = Limits(),
                 tmp: str = "/tmp"):
        self.proc_root = proc_root
        self.clean = clean
        self.limits = limits
        self.tmp = tmp
        self._refused: dict[tuple, str] = {}      # from the last read
        self._refused_now: dict[tuple, str] = {}  # this read: only what is still there is kept
        self._rotation = 0
        self._mem_total: int | None = None

    # --- where to look -----------------------------------------------------------------------

    def report_dirs(self, uid: int, uids: Iterable[int] = ()) -> list[tuple[str, int | None, bool]]:
        """(directory, its required owner, whether it is the reader's own) to read, in order.

        ``$PINMON_TRACE_DIR``, else this user's runtime dir; root also reads the
        ``/tmp/pinmon-<uid>`` of each of ``uids`` (those of live processes) that belongs to that uid."""
        env = os.environ.get("PINMON_TRACE_DIR")
        if env:
            return [(env, uid, True)]
        dirs: list[tuple[str, int | None, bool]] = [(runtime_dir(uid), uid, True)]
        if uid == 0:
            dirs += [(path, owner, False) for owner, path in self._tmp_dirs(uids)]
        return dirs

    def _tmp_dirs(self, uids: Iterable[int]) -> list[tuple[int, str]]:
        """(uid, path) of each ``/tmp/pinmon-<uid>`` directory owned by its uid, for the given uids.

        The uids are those of live processes (the process scan's): only they can have reports worth
        reading, and a lookup by name costs one lstat each, however many entries /tmp holds. /tmp is
        never listed, so entries another user makes there cannot push anyone's directory out."""
        out = []
        for owner in sorted(set(uids)):
            if not 0 < owner <= MAX_UID:  # root's own is read as root's runtime dir
                continue
            path = tmp_dir(owner, self.tmp)
            try:
                st = os.lstat(path)
            except (OSError, ValueError):
                continue
            if stat.S_ISDIR(st.st_mode) and st.st_uid == owner:
                out.append((owner, path))
        return out

    # --- reading -----------------------------------------------------------------------------

    def read(self, uid: int | None = None, now: float | None = None, uids: Iterable[int] = ()) -> ReadResult:
        """Reports from every directory ``report_dirs`` names, merged; ``uids``: those of live
        processes, whose ``/tmp/pinmon-<uid>`` root reads."""
        uid = os.getuid() if uid is None else uid
        result = ReadResult()
        budget = _Budget(self.limits)
        self._begin()
        dirs = self.report_dirs(uid, uids)
        own = [d for d in dirs if d[2]]
        others = [d for d in dirs if not d[2]]
        room = max(self.limits.dirs - len(own), 0)
        budget.dirs_total = len(dirs)
        if len(others) > room:
            # Beyond the bound, each read starts where the last one stopped: every directory is
            # read in turn, none is starved for good.
            start = self._rotation % len(others)
            self._rotation = start + room
            others = (others[start:] + others[:start])[:room]
            budget.dirs_unread = budget.dirs_total - len(own) - len(others)
        for path, owner, is_own in own + others:
            try:
                self.read_dir(path, uid, owner, result, budget, now=now, notify=is_own)
            except Exception as e:  # a reader must degrade to "no traced figures", never fail a snapshot
                result.rejected.append(f"{path}: {type(e).__name__}: {e}")
        self._end()
        note = budget.notice()
        if note:
            result.notices.append(note)
        return result

    def _begin(self) -> None:
        self._refused_now = {}

    def _mem_total_bytes(self) -> int | None:
        """MemTotal, read when a report first needs it (only a memory hot-plug changes it): a read
        with no report, the usual second, costs no /proc/meminfo."""
        if self._mem_total is None:
            self._mem_total = mem_total(self.proc_root)
        return self._mem_total

    def _end(self) -> None:
        self._refused = self._refused_now

    def read_dir(self, directory: str, uid: int, owner: int | None, result: ReadResult,
                 budget: _Budget, now: float | None = None, notify: bool = False) -> None:
        """Every live traced process's report in ``directory``, into ``result``. ``owner``: who must
        own the directory; ``notify``: say in a notice when the directory cannot be read."""
        owner = uid if owner is None else owner
        try:
            fd = os.open(directory, _DIR_FLAGS)
        except FileNotFoundError:
            return  # nothing traced yet
        except OSError as e:
            if e.errno == errno.ELOOP:
                why = f"{directory} is a symlink"
            elif e.errno == errno.ENOTDIR:
                why = f"{directory} is not a directory"
            else:
                why = f"{directory}: {e.strerror or e}"
            self._unsafe(why, result, notify)
            return
        try:
            try:
                check_dir_stat(os.fstat(fd), directory, owner)
            except UnsafeDirError as e:
                self._unsafe(str(e), result, notify)
                return
            self._read_open_dir(fd, directory, owner, uid, result, budget,
                                time.time() if now is None else now)
        finally:
            os.close(fd)

    @staticmethod
    def _unsafe(why: str, result: ReadResult, notify: bool) -> None:
        result.rejected.append(why)
        if notify:
            result.notices.append(f"trace reports: {why}: its reports are not read")

    def _read_open_dir(self, fd: int, directory: str, owner: int, uid: int, result: ReadResult,
                       budget: _Budget, now: float) -> None:
        limits = self.limits
        reports, temps, looked = [], [], 0
        with os.scandir(fd) as it:
            for entry in it:
                if looked >= limits.entries_per_dir:
                    budget.dirs_cut.append(directory)
                    break
                looked += 1
                name = entry.name
                if is_temp_name(name):
                    temps.append(name)
                    continue
                stem = report_pid_text(name)
                pid = decimal(stem, MAX_PID) if stem is not None else None
                if not pid:
                    continue
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue
                reports.append((st.st_size, name, pid, st))
        for name in temps:
            self._clean_temp(fd, name, owner, now, result)
        dir_bytes = limits.bytes_per_dir
        for size, name, pid, st in sorted(reports, key=lambda r: (r[0], r[1])):
            key = (st.st_dev, st.st_ino, st.st_ctime_ns, st.st_mtime_ns, st.st_size)
            why = self._refused.get(key) or self._refused_now.get(key)
            if why is not None:
                self._refused_now[key] = why
                result.remembered += 1
                result.rejected.append(f"{name}: {why} (unchanged since refused)")
                continue
            proc = proc_identity(pid, self.proc_root)
            if proc is None:  # gone, or dead and not yet reaped: the report is stale
                self._remove(fd, name, st, owner, result)
                continue
            if proc.uid != owner:
                self._refuse(key, name, f"pid {pid} belongs to uid {proc.uid}, not to the directory's"
                                        f" owner {owner}", result)
                continue
            cost = min(size, limits.report_bytes)
            if cost > dir_bytes or cost > budget.bytes_left:
                budget.skipped_reports += 1
                continue
            dir_bytes -= cost
            budget.bytes_left -= cost
            try:
                report = read_report_file(fd, name, owner, uid, limits.report_bytes)
            except ValueError as e:
                self._refuse(key, name, str(e), result)
                continue
            if report.get("pid") != pid:
                self._refuse(key, name, f"names pid {printable(repr(report.get('pid')), 40)}", result)
                continue
            if report.get("start_ticks") != proc.start_ticks:
                # The pid now belongs to another process: the report is stale.
                if not self._remove(fd, name, st, owner, result):
                    self._refuse(key, name, "written by an earlier process of this pid", result)
                continue
            result.processes[pid] = TracedProcess(pid=pid, report=report, rss_bytes=proc.rss_bytes,
                                                  mem_total_bytes=self._mem_total_bytes())

    def _refuse(self, key: tuple, name: str, why: str, result: ReadResult) -> None:
        self._refused_now[key] = why
        result.rejected.append(f"{name}: {why}")

    def _remove(self, fd: int, name: str, st: os.stat_result, owner: int, result: ReadResult) -> bool:
        """Unlink ``name`` in the open directory if cleaning and it is the owner's; True when removed."""
        if not self.clean or st.st_uid != owner:
            return False
        try:
            os.unlink(name, dir_fd=fd)
        except OSError:
            return False
        result.removed += 1
        return True

    def _clean_temp(self, fd: int, name: str, owner: int, now: float, result: ReadResult) -> None:
        """A writer killed between create and rename leaves its temporary file (``.<pid>.<x>.tmp``):
        remove it once its writer is gone, or when it is old (a live writer renames within milliseconds)."""
        if not self.clean:
            return
        try:
            pid = decimal(name[1:].split(".", 1)[0], MAX_PID)
            dead = pid is not None and not os.path.exists(os.path.join(self.proc_root, str(pid)))
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            return
        if dead or now - st.st_mtime >= STALE_TEMP_S:
            self._remove(fd, name, st, owner, result)


def report_dirs(uid: int, uids: Iterable[int] = ()) -> list[str]:
    """The directories a reader of ``uid`` looks in (see ``ReportReader.report_dirs``)."""
    return [d for d, _, _ in ReportReader().report_dirs(uid, uids)]


_readers: dict[tuple[str, bool], ReportReader] = {}


def read_all(proc_root: str = "/proc", clean: bool = True, uids: Iterable[int] = ()) -> ReadResult:
    """Reports from every directory the reader looks in, by the reader kept for ``proc_root``
    (its memory of refused reports spares them a parse at the next read). ``uids``: those of live
    processes (root reads their ``/tmp/pinmon-<uid>``)."""
    reader = _readers.get((proc_root, clean))
    if reader is None:
        reader = _readers[(proc_root, clean)] = ReportReader(proc_root=proc_root, clean=clean)
    return reader.read(uids=uids)


def read_reports(directory: str | None = None, proc_root: str = "/proc", clean: bool = True,
                 uid: int | None = None, now: float | None = None,
                 dir_owner: int | None = None, reader: ReportReader | None = None) -> ReadResult:
    """Every live traced process's report in ``directory`` (default: this user's runtime dir).

    ``uid`` is the reader's; ``dir_owner`` who must own the directory (default: the reader)."""
    uid = os.getuid() if uid is None else uid
    directory = directory or runtime_dir(uid)
    reader = reader or ReportReader(proc_root=proc_root, clean=clean)
    result = ReadResult()
    budget = _Budget(reader.limits)
    reader._begin()
    reader.read_dir(directory, uid, dir_owner, result, budget, now=now, notify=True)
    reader._end()
    note = budget.notice()
    if note:
        result.notices.append(note)
    return result


def merge_traced(rows: list, traced: ReadResult, describe=None, only_pids=None) -> list:
    """Process rows with each traced pid's exact figures; a traced process that /proc showed no
    pinned mappings for gets a row of its own. ``describe(pid) -> (name, user, cmdline)``."""
    from ...model import ProcessIdentity, ProcessPinned

    out, seen = [], set()
    for r in rows:
        t = traced.processes.get(r.pid)
        if t is not None:
            r = t.apply(r)
            seen.add(r.pid)
        out.append(r)
    for pid in sorted(traced.processes):
        if pid in seen or (only_pids is not None and pid not in only_pids):
            continue
        name = user = cmdline = None
        if describe is not None:
            try:
                name, user, cmdline = describe(pid)
            except Exception:
                pass
        row = ProcessPinned(pid=pid, identity=ProcessIdentity(name=name, user=user, cmdline=cmdline))
        out.append(traced.processes[pid].apply(row))
    return out
