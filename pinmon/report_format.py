"""The tracer's report files as both sides agree on them: schema, names, directories, start times.

The traced program (``pinmon.trace``) writes one JSON file per process, ``<pid>.json`` with schema
``pinmon.trace/1``; root's collectors (``pinmon.collect.traced``) read it. Both import this module and
nothing of each other, so a collector running as root never runs the tracer package's code.

- Directory: ``$XDG_RUNTIME_DIR/pinmon`` when that variable names a directory owned by the user, else
  ``/tmp/pinmon-<uid>``, mode 0700, refused when it is a symlink, another user's or open to others.
- Names: ``<pid>.json``, the pid in ASCII decimal; a writer's temporary file is ``.<pid>.<tag>.tmp`` in
  the same directory, renamed over the report.
- Start time: field 22 of ``/proc/PID/stat`` (clock ticks since boot), so a reader can tell the traced
  process from a later one that reused its pid. A process in state Z (exited, not yet reaped) or X
  (being torn down) has none: it has ended.

Uses nothing else of pinmon.
"""
from __future__ import annotations

import os
import stat
from collections.abc import Mapping

TRACE_SCHEMA = "pinmon.trace/1"
REPORT_SUFFIX = ".json"
TEMP_SUFFIX = ".tmp"
TMP_ROOT = "/tmp"  # always /tmp, not $TMPDIR: the tracer and the reader share no environment

# States of /proc/PID/stat field 3 that mean the program has ended: Z (zombie: exited, its parent
# has not reaped it yet), X and x (dead, being torn down).
DEAD_STATES = frozenset("ZXx")


class UnsafeDirError(OSError):
    """The report directory exists but is not safe to use (symlink, other owner, open mode)."""


def report_name(pid: int) -> str:
    """The file name of process ``pid``'s report."""
    return f"{pid}{REPORT_SUFFIX}"


def report_pid_text(name: str) -> str | None:
    """The pid part of a report's file name (still to be checked as a decimal), or None when ``name``
    is no report's."""
    stem, dot, ext = name.partition(".")
    return stem if dot and dot + ext == REPORT_SUFFIX else None


def temp_name(pid: int, tag: str) -> str:
    """The name of a temporary file that process ``pid`` writes before renaming it to its report."""
    return f".{pid}.{tag}{TEMP_SUFFIX}"


def is_temp_name(name: str) -> bool:
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def tmp_dir(uid: int, tmp_root: str = TMP_ROOT) -> str:
    """The report directory of ``uid`` under /tmp (where it has no runtime directory of its own)."""
    return os.path.join(tmp_root, f"pinmon-{uid}")


def runtime_dir(uid: int | None = None, env: Mapping[str, str] | None = None) -> str:
    """The report directory for this user (not created here)."""
    uid = os.getuid() if uid is None else uid
    xdg = (os.environ if env is None else env).get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg):
        try:
            st = os.lstat(xdg)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == uid:
                return os.path.join(xdg, "pinmon")
        except OSError:
            pass
    return tmp_dir(uid)


def check_dir(path: str, uid: int | None = None) -> None:
    """Raise UnsafeDirError unless ``path`` is a real directory of ``uid`` with mode 0700."""
    uid = os.getuid() if uid is None else uid
    check_dir_stat(os.lstat(path), path, uid)


def check_dir_stat(st: os.stat_result, path: str, uid: int) -> None:
    """``check_dir`` on a stat result already taken (``lstat``, or ``fstat`` of an open directory)."""
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeDirError(f"{path} is a symlink")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirError(f"{path} is not a directory")
    if st.st_uid != uid:
        raise UnsafeDirError(f"{path} belongs to uid {st.st_uid}, not {uid}")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise UnsafeDirError(f"{path} has mode {stat.S_IMODE(st.st_mode):o}, not 700")


def proc_start_ticks(pid: int, proc_root: str = "/proc") -> int | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks since boot) of a live process, or None
    when it is gone, unreadable or dead but not yet reaped (state Z or X)."""
    try:
        with open(os.path.join(proc_root, str(pid), "stat"), "rb") as f:
            data = f.read(4096).decode("ascii", "replace")
    except (OSError, ValueError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    rest = data.rpartition(")")[2].split()
    try:
        if rest[0] in DEAD_STATES:  # field 3, the state
            return None
        ticks = int(rest[19])  # fields 3.. start at index 0, so field 22 is index 19
    except (IndexError, ValueError):
        return None
    return ticks if ticks >= 0 else None
