"""tracefs: where it is, mounting it, writing its control files, and pinmon's private instance.

Rules this module keeps (other tools share tracefs):

- Only files of pinmon's own instance (``instances/pinmon_<pid>``) and its own probe group are
  written. The top instance's settings (``tracing_on``, ``current_tracer``, its buffer size and
  ``trace_options``) and other instances are never touched.
- ``uprobe_events`` is written with ``os.open(O_WRONLY | O_APPEND)`` and one ``os.write`` per line:
  a buffered ``open(path, "a")`` write is refused there with EINVAL, and ``O_TRUNC`` would delete
  every tool's probes.
- Failures are a ``TracefsError`` whose text is one line for the user.
"""
from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Callable
from dataclasses import dataclass

from ..collect.rawfile import read_bytes

TRACEFS_MOUNTPOINTS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
MAX_CONTROL_BYTES = 16 << 20


class TracefsError(Exception):
    """tracefs cannot be used: the text says why, in one line."""


def _why(e: OSError) -> str:
    return os.strerror(e.errno) if e.errno else str(e)


def mounted_tracefs(mounts_text: str) -> list[str]:
    """Mount points of tracefs in a ``/proc/self/mounts`` text (octal escapes decoded)."""
    out = []
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "tracefs":
            out.append(parts[1].encode().decode("unicode_escape"))
    return out


def _mount_tracefs(target: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"nodev", os.fsencode(target), b"tracefs", ctypes.c_ulong(0), None) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def lockdown_mode(path: str = "/sys/kernel/security/lockdown") -> str | None:
    """The kernel's lockdown mode ("none", "integrity", "confidentiality"); None where unknown."""
    try:
        text = read_bytes(path).decode("ascii", "replace")
    except (OSError, ValueError):
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else None


@dataclass
class Tracefs:
    """A mounted tracefs at ``root``."""

    root: str

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def read(self, *parts: str) -> str:
        data = read_bytes(self.path(*parts))
        return data[:MAX_CONTROL_BYTES].decode("utf-8", "replace")

    def write(self, rel: str, text: str) -> None:
        """Set a control file (``O_TRUNC``: the whole value); OSError as the kernel answers."""
        fd = os.open(self.path(rel), os.O_WRONLY | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def append(self, rel: str, line: str) -> None:
        """One command to an event file (``uprobe_events``): appended, never truncating."""
        fd = os.open(self.path(rel), os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
        try:
            os.write(fd, (line.rstrip("\n") + "\n").encode())
        finally:
            os.close(fd)

    @property
    def has_uprobes(self) -> bool:
        return os.path.exists(self.path("uprobe_events"))


def open_tracefs(mounts_path: str = "/proc/self/mounts", mountpoints: tuple[str, ...] = TRACEFS_MOUNTPOINTS,
                 mount: Callable[[str], None] = _mount_tracefs) -> Tracefs:
    """tracefs where it is mounted, else mounted at the first of ``mountpoints``."""
    try:
        mounted = mounted_tracefs(read_bytes(mounts_path).decode("utf-8", "replace"))
    except OSError:
        mounted = []
    for mp in mountpoints:
        if mp in mounted:
            return Tracefs(mp)
    if mounted:
        return Tracefs(mounted[0])
    try:
        mount(mountpoints[0])
    except OSError as e:
        raise TracefsError(f"tracefs is not mounted and mounting it at {mountpoints[0]} failed: {_why(e)}") from None
    return Tracefs(mountpoints[0])


def preflight(euid: int | None = None, lockdown_path: str = "/sys/kernel/security/lockdown") -> str | None:
    """Why attaching cannot work here before tracefs is looked at, or None."""
    if (os.geteuid() if euid is None else euid) != 0:
        return "attach needs root: uprobes are set through tracefs"
    if lockdown_mode(lockdown_path) == "confidentiality":
        return "the kernel is locked down (confidentiality): tracefs is closed"
    return None


def explain_write_error(e: OSError, what: str) -> str:
    """One line for a refused write to tracefs."""
    if e.errno in (errno.EPERM, errno.EACCES):
        return f"{what}: permission denied (root, or a kernel lockdown, is needed)"
    return f"{what}: {_why(e)}"


class Instance:
    """A private trace instance: its own ring buffer, clock, options and enabled events."""

    def __init__(self, fs: Tracefs, name: str) -> None:
        self.fs, self.name = fs, name
        self.rel = os.path.join("instances", name)
        self.created = False

    def path(self, *parts: str) -> str:
        return self.fs.path(self.rel, *parts)

    def create(self, buffer_kb_per_cpu: int, record_tgid: bool = False) -> None:
        os.mkdir(self.path())
        self.created = True
        self.set("buffer_size_kb", str(buffer_kb_per_cpu))
        # CLOCK_MONOTONIC: event times compare with time.monotonic(), so the window's edges are exact.
        self.set("trace_clock", "mono", optional=True)
        # A thread a target starts later is followed (its pid joins the instance's set_event_pid).
        self.set("options/event-fork", "1", optional=True)
        if record_tgid:  # the text output then says which process a thread belongs to
            self.set("options/record-tgid", "1", optional=True)

    def set(self, rel: str, value: str, optional: bool = False) -> bool:
        try:
            self.fs.write(os.path.join(self.rel, rel), value)
            return True
        except OSError:
            if optional:
                return False
            raise

    def read(self, rel: str) -> str:
        return self.fs.read(self.rel, rel)

    def clock(self) -> str | None:
        try:
            text = self.read("trace_clock")
        except OSError:
            return None
        start, end = text.find("["), text.find("]")
        return text[start + 1:end] if 0 <= start < end else None

    def subbuf_bytes(self) -> int:
        try:
            return int(self.read("buffer_subbuf_size_kb").strip()) * 1024
        except (OSError, ValueError):
            return os.sysconf("SC_PAGE_SIZE")

    def cpus(self) -> list[int]:
        try:
            names = os.listdir(self.path("per_cpu"))
        except OSError:
            return []
        return sorted(int(n[3:]) for n in names if n.startswith("cpu") and n[3:].isdigit())

    def cpu_stats(self) -> dict[int, dict[str, int]]:
        """Per CPU: ``overrun`` (events overwritten unread) and ``dropped events``, as the kernel counts."""
        out: dict[int, dict[str, int]] = {}
        for cpu in self.cpus():
            try:
                text = self.read(os.path.join("per_cpu", f"cpu{cpu}", "stats"))
            except OSError:
                continue
            row = {}
            for line in text.splitlines():
                key, _, value = line.partition(":")
                value = value.strip()
                if value.isdigit():
                    row[key.strip()] = int(value)
            out[cpu] = row
        return out

    def remove(self) -> None:
        """Disable every event of the instance and remove it (EBUSY while a pipe of it is open)."""
        if not self.created:
            return
        self.set("events/enable", "0", optional=True)
        try:
            os.rmdir(self.path())
        except FileNotFoundError:
            pass
        self.created = False
