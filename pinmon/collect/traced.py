"""Reads the in-process tracer's reports (``pinmon.trace/1``) and turns them into process rows.

A report is trusted only when it is a regular file (not a symlink) of the reader's user (any user
when the reader is root) with mode 0600 at most, in a directory that passes the same checks, parses
as a whole JSON object of the right schema, and names a live process whose start time (field 22 of
``/proc/PID/stat``) matches: a dead pid's report, or a reused pid's, is ignored and removed.
Half-written temporary files of a writer that was killed are removed once they are a minute old.
"""
from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass, field
from typing import Optional

from ..trace.report import TRACE_SCHEMA, UnsafeDirError, check_dir, proc_start_ticks, runtime_dir
from .traced_cupti import cupti_fields

MAX_REPORT_BYTES = 1 << 20
STALE_TEMP_S = 60.0


@dataclass
class TracedProcess:
    pid: int
    report: dict

    def _get(self, *keys, default=None):
        d = self.report
        for k in keys:
            if not isinstance(d, dict) or k not in d:
                return default
            d = d[k]
        return d

    def figures(self) -> dict:
        """The ProcessPinned fields this report fills in (exact figures of hooked calls)."""
        g = self._get
        return {
            "source": "traced",
            "pinned_bytes": _int(g("pinned", "bytes")),
            "write_combined_bytes": _int(g("pinned", "write_combined_bytes")),
            "registered_bytes": _int(g("pinned", "registered_bytes")),
            "requested_pinned_bytes": _int(g("pinned", "requested_bytes")),
            "pinned_allocs_per_s": _float(g("allocs", "per_s")),
            "median_alloc_bytes": _int(g("allocs", "median_bytes")),
            "wc_readbacks": _int(g("wc", "readbacks")),
            "pageable_copy_bytes_per_s": _float(g("pageable_copy_bytes_per_s")),
            "call_site": self.call_site(),
            **cupti_fields(self.report),
        }

    def call_site(self) -> Optional[str]:
        """The site behind the process's most notable behaviour: WC readbacks, then pageable copies,
        then rounding waste, then allocations (the order of the advisor's concerns)."""
        sites = self._get("call_sites", default={}) or {}
        order = ["wc_readback", "pageable_copy", "rounding_waste", "alloc", "register"]
        if (self._get("wc", "readbacks") or 0) == 0:
            order.remove("wc_readback")
        if (self._get("pageable_copy_bytes_per_s") or 0) <= 0:
            order.remove("pageable_copy")
        if (self._get("pinned", "rounding_waste_bytes") or 0) <= 0:
            order.remove("rounding_waste")
        for cat in order:
            rows = sites.get(cat) if isinstance(sites, dict) else None
            if rows and isinstance(rows, list) and isinstance(rows[0], dict) and isinstance(rows[0].get("site"), str):
                return rows[0]["site"]
        return None


def _int(v) -> Optional[int]:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _float(v) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclass
class ReadResult:
    processes: dict[int, TracedProcess] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)  # why files were refused (one line each)
    removed: int = 0


def _read_one(path: str, uid: int) -> dict:
    """The parsed report; raises ValueError with the reason it is refused."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise ValueError(f"cannot open ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if uid != 0 and st.st_uid != uid:
            raise ValueError(f"owned by uid {st.st_uid}")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise ValueError(f"mode {stat.S_IMODE(st.st_mode):o} is open to others")
        if st.st_size > MAX_REPORT_BYTES:
            raise ValueError("too large")
        data = os.read(fd, MAX_REPORT_BYTES + 1)
    finally:
        os.close(fd)
    try:
        report = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise ValueError("not a whole JSON report") from None
    if not isinstance(report, dict) or report.get("schema") != TRACE_SCHEMA:
        raise ValueError("not a pinmon.trace/1 report")
    return report


def report_dirs(uid: int) -> list[str]:
    """Where to look: $PINMON_TRACE_DIR, else this user's runtime dir; root also reads every
    ``/tmp/pinmon-<uid>`` (each must belong to the uid in its name)."""
    env = os.environ.get("PINMON_TRACE_DIR")
    if env:
        return [env]
    dirs = [runtime_dir(uid)]
    if uid == 0:
        dirs += [os.path.join("/tmp", n) for n in _other_users_dirs("/tmp")]
    return dirs


# (directory, its mtime in ns, the pinmon-<uid> names in it) from the last listing that can be reused
_listed: Optional[tuple[str, int, list[str]]] = None
# A listing is reused only if the directory had not changed for this long when it was taken: a
# change within the timestamp's granularity (a few ms) would otherwise leave the mtime as it was.
_QUIET_NS = 1_000_000_000


def _other_users_dirs(tmp: str) -> list[str]:
    """The ``pinmon-<uid>`` names in ``tmp`` (uid not 0), sorted. Read every second by root, and
    /tmp can hold thousands of entries: the listing is kept while the directory's mtime stays."""
    global _listed
    try:
        mtime = os.stat(tmp).st_mtime_ns
        cached = _listed
        if cached is not None and cached[0] == tmp and cached[1] == mtime:
            return cached[2]
        names = sorted(n for n in os.listdir(tmp)
                       if n.startswith("pinmon-") and n[7:].isdigit() and n != "pinmon-0")
    except OSError:
        return []
    _listed = (tmp, mtime, names) if time.time_ns() - mtime > _QUIET_NS else None
    return names


def read_all(proc_root: str = "/proc", clean: bool = True) -> ReadResult:
    """Reports from every directory ``report_dirs`` names, merged."""
    uid = os.getuid()
    total = ReadResult()
    for d in report_dirs(uid):
        owner = uid
        base = os.path.basename(d)
        if uid == 0 and base.startswith("pinmon-") and base[7:].isdigit():
            owner = int(base[7:])
        try:
            r = read_reports(d, proc_root=proc_root, clean=clean, uid=uid, dir_owner=owner)
        except Exception as e:  # a reader must degrade to "no traced figures", never fail a snapshot
            total.rejected.append(f"{d}: {type(e).__name__}: {e}")
            continue
        total.processes.update(r.processes)
        total.rejected += r.rejected
        total.removed += r.removed
    return total


def read_reports(directory: Optional[str] = None, proc_root: str = "/proc", clean: bool = True,
                 uid: Optional[int] = None, now: Optional[float] = None,
                 dir_owner: Optional[int] = None) -> ReadResult:
    """Every live traced process's report in ``directory`` (default: this user's runtime dir).

    ``uid`` is the reader's; ``dir_owner`` who must own the directory (default: the reader)."""
    uid = os.getuid() if uid is None else uid
    directory = directory or runtime_dir(uid)
    now = time.time() if now is None else now
    result = ReadResult()
    try:
        check_dir(directory, uid=uid if dir_owner is None else dir_owner)
    except FileNotFoundError:
        return result
    except (UnsafeDirError, OSError) as e:
        result.rejected.append(f"{directory}: {e}")
        return result
    try:
        names = os.listdir(directory)
    except OSError as e:
        result.rejected.append(f"{directory}: {e.strerror or e}")
        return result
    for name in names:
        path = os.path.join(directory, name)
        if name.startswith(".") and name.endswith(".tmp"):
            _clean_temp(path, name, now, clean, result, proc_root, uid)
            continue
        stem, dot, ext = name.partition(".")
        if ext != "json" or not stem.isdigit():
            continue
        pid = int(stem)
        try:
            report = _read_one(path, uid)
        except ValueError as e:
            result.rejected.append(f"{name}: {e}")
            continue
        if report.get("pid") != pid:
            result.rejected.append(f"{name}: names pid {report.get('pid')!r}")
            continue
        ticks = proc_start_ticks(pid, proc_root)
        if ticks is None or report.get("start_ticks") != ticks:
            # Dead, or the pid now belongs to another process: the report is stale.
            if clean and _owned_by(path, uid):
                try:
                    os.unlink(path)
                    result.removed += 1
                except OSError:
                    pass
            continue
        result.processes[pid] = TracedProcess(pid=pid, report=report)
    return result


def _owned_by(path: str, uid: int) -> bool:
    try:
        st = os.lstat(path)
        return uid == 0 or st.st_uid == uid
    except OSError:
        return False


def _clean_temp(path: str, name: str, now: float, clean: bool, result: ReadResult, proc_root: str,
                uid: int) -> None:
    """A writer killed between create and rename leaves its temporary file (``.<pid>.<x>.tmp``):
    remove it once its writer is gone, or when it is old (a live writer renames within milliseconds)."""
    if not clean:
        return
    try:
        pid_text = name[1:].split(".", 1)[0]
        dead = pid_text.isdigit() and not os.path.exists(os.path.join(proc_root, pid_text))
        st = os.lstat(path)
        if (dead or now - st.st_mtime >= STALE_TEMP_S) and _owned_by(path, uid):
            os.unlink(path)
            result.removed += 1
    except OSError:
        pass


def merge_traced(rows: list, traced: ReadResult, describe=None, only_pids=None) -> list:
    """Process rows with each traced pid's exact figures; a traced process that /proc showed no
    pinned mappings for gets a row of its own. ``describe(pid) -> (name, user, cmdline)``."""
    import dataclasses

    from ..model import ProcessPinned

    out, seen = [], set()
    for r in rows:
        t = traced.processes.get(r.pid)
        if t is not None:
            r = dataclasses.replace(r, **t.figures())
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
        out.append(ProcessPinned(pid=pid, name=name, user=user, cmdline=cmdline,
                                 **traced.processes[pid].figures()))
    return out
