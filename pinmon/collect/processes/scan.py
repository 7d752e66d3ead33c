"""Per-process pinned memory scan: every process's /proc/PID/maps, CUDA processes kept.

A process that exits mid-scan or denies access is skipped and counted, never raised on; the caller
turns the counts into one notice. Names and users come from psutil, only for CUDA processes.

The scan runs every second over every process, so it is kept cheap: maps are read as bytes with
plain ``os.read`` (half the cost of a text file object) and only CUDA processes' maps are decoded;
a CUDA process whose maps did not change since the last scan keeps its estimate without a parse;
names, users and command lines are looked up again only every ``DESCRIBE_TTL_S``.

Most processes are not CUDA processes, and their maps are the bulk of the scan: the kernel builds
the text under the process's mmap lock, so reading it also costs the process being watched. A
process whose maps had no NVIDIA device mapping is re-read only when the size in its
``/proc/PID/statm`` (one short line of counters, no lock) changed: initialising CUDA maps the device
files and gigabytes of address space, which moves that first figure (total program size). A full
re-read every
``PLAIN_RECHECK_S`` (staggered by pid) covers a mapping swapped for one of the very same size and a
pid reused between two scans. The live /proc's statm files stay open between scans (``StatmReader``):
a reused pid then fails the kept file's read and is read afresh, and the re-read of such a process
comes ``HELD_RECHECK_FACTOR`` times less often.

Most pids on a many-core server are kernel threads (per-CPU workers: a hundred or more on 16 cores).
They have no address space (a size of 0 in statm, as a zombie has) and never will: each is skipped
without a read until its own periodic re-check, which again covers a reused pid.

A process whose maps hold pinned-looking mappings also has its /proc/PID/status read, every scan:
its estimate is capped by what it has resident, and by RAM (resident.py), since a mapping's size
says nothing about what is pinned and anyone can make one look like CUDA's. On the live /proc a
process is a CUDA process only where a ``/dev/nvidia*`` mapping is a real NVIDIA character device,
a mapping counts only if the kernel object behind it is the one its path names (kernel_objects.py),
and each piece of a shared buffer once.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from ...model import HeldMemory, ProcessIdentity, ProcessPinned
from ...units import printable
from ..host.memory import parse_meminfo
from ..rawfile import READ_FLAGS, read_bytes, read_to_end
from .kernel_objects import KernelObjects, learn
from .procmaps import PinnedEstimate, churn, estimate_pinned
from .resident import cap_estimate, read_resident

_NVIDIA_MARK = b"/dev/nvidia"
# A pid's name, user and command line are kept this long while it stays a CUDA process.
DESCRIBE_TTL_S = 10.0
# A non-CUDA process with an unchanged statm has its maps read again at least this often.
PLAIN_RECHECK_S = 30.0
# ... and this many times less often while its statm stays open (``StatmReader``): a reused pid then
# fails the kept file's read and is read afresh, so the re-read covers only a mapping swapped for
# one of the very same size.
HELD_RECHECK_FACTOR = 4
# The scan notice names at most this many pids whose estimate was capped.
CAPPED_PIDS_SHOWN = 5


@dataclass
class ScanResult:
    processes: list[ProcessPinned] = field(default_factory=list)
    denied: int = 0
    denied_pids: list[tuple[int, str]] = field(default_factory=list)  # (pid, name) of the first few
    vanished: int = 0
    scanned: int = 0
    # pids whose estimate was lowered to what they have resident, or to RAM (see resident.py)
    capped: list[int] = field(default_factory=list)
    # the owners of the live processes (of their /proc/PID directories): whose trace reports to read
    uids: set[int] = field(default_factory=set)
    # every pid listed (the VmPin scan reads them when it must)
    pids: list[int] = field(default_factory=list)


def _open_proc(pid: int, name: str, proc_root: str) -> int:
    return os.open(os.path.join(proc_root, str(pid), name), READ_FLAGS)


def read_maps(pid: int, proc_root: str = "/proc") -> bytes:
    """The raw bytes of /proc/PID/maps (the kernel builds the text as it is read)."""
    fd = _open_proc(pid, "maps", proc_root)
    try:
        return read_to_end(fd)
    finally:
        os.close(fd)


def read_statm_size(pid: int, proc_root: str = "/proc") -> bytes:
    """The first figure of /proc/PID/statm: the process's total program size in pages.

    Only the size: resident pages change all the time in a busy process, its mappings do not.
    """
    fd = _open_proc(pid, "statm", proc_root)
    try:
        return os.read(fd, 256).split(b" ", 1)[0]
    finally:
        os.close(fd)


# Open statm files kept at most (one descriptor each), far under the usual limit of 1,024.
STATM_FDS_KEPT = 256


class StatmReader:
    """``read_statm_size`` for the live /proc, each process's statm kept open between scans (up to
    ``kept`` of them; with none kept, each read opens the file afresh, as for a tree of files) and read
    again from its start (``pread``): the kernel builds the line anew on each read, and an open and
    a close per process per second were most of that read's cost. A descriptor outlives its
    process: its read then fails (ESRCH), and the pid, maybe reused, is opened afresh."""

    def __init__(self, proc_root: str = "/proc", kept: int = STATM_FDS_KEPT):
        self.proc_root = proc_root
        self.kept = kept
        self._fds: dict[int, int] = {}

    def size(self, pid: int) -> bytes:
        fd = self._fds.get(pid)
        kept = fd is not None
        if fd is None:
            if len(self._fds) >= self.kept:
                return read_statm_size(pid, self.proc_root)
            fd = self._fds[pid] = _open_proc(pid, "statm", self.proc_root)
        try:
            return os.pread(fd, 256, 0).split(b" ", 1)[0]
        except OSError:
            self._drop(pid)
            if not kept:
                raise
            return self.size(pid)  # that process is gone: the pid, maybe another's now, afresh

    def keep_only(self, pids: set[int]) -> None:
        """Close the descriptors of pids no longer listed."""
        for pid in [p for p in self._fds if p not in pids]:
            self._drop(pid)

    def holds(self, pid: int) -> bool:
        return pid in self._fds

    def forget(self, pid: int) -> None:
        """Close ``pid``'s statm if kept (a kernel thread's, read once per re-check)."""
        self._drop(pid)

    def _drop(self, pid: int) -> None:
        fd = self._fds.pop(pid, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        for pid in list(self._fds):
            self._drop(pid)

    def __len__(self) -> int:
        return len(self._fds)


def _comm(pid: int, proc_root: str) -> str:
    """A process's name from /proc/PID/comm (readable when its maps are not), printable, short."""
    try:
        fd = _open_proc(pid, "comm", proc_root)
        try:
            return printable(os.read(fd, 64).decode("utf-8", "replace").strip(), 32)
        finally:
            os.close(fd)
    except OSError:
        return "n/a"


def _recheck_after_s(pid: int) -> float:
    # Spread the periodic full re-reads over the period instead of all falling in one scan.
    return PLAIN_RECHECK_S * (0.5 + ((pid * 2654435761) % 1024) / 2048)


def _describe(pid: int) -> tuple[str | None, str | None, str | None]:
    """(name, user, cmdline) or Nones where psutil cannot tell."""
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            name = p.name()
            try:
                user = p.username()
            except (KeyError, psutil.Error):
                user = None
            try:
                cmdline = " ".join(p.cmdline()) or None
            except psutil.Error:
                cmdline = None
        return name, user, cmdline
    except psutil.Error:
        return None, None, None


class ProcessScanner:
    """Scans processes for CUDA pinned mappings and keeps the last ranges to measure churn."""

    def __init__(self, proc_root: str = "/proc", pids: list[int] | None = None,
                 clock: Callable[[], float] = time.monotonic, objects: KernelObjects | None = None,
                 host_root: str = "/"):
        """``objects``: the kernel objects a mapping must be (default: learned from this machine when
        ``proc_root`` is the live /proc; a fake tree's mappings are taken as they read)."""
        self.proc_root = proc_root
        self.only_pids = pids
        if objects is None and proc_root == "/proc":
            objects = learn(host_root)
        self.objects = objects
        # pid -> (length and hash of its maps, estimate): a digest, not the text, is kept (a
        # PyTorch process's maps can be a megabyte) to tell unchanged maps at the next scan.
        self._previous: dict[int, tuple[tuple[int, int], PinnedEstimate]] = {}
        self._described: dict[int, tuple[float, tuple]] = {}
        # pid -> (statm size when its maps were last read and had no NVIDIA mapping, when to read anyway)
        self._plain: dict[int, tuple[bytes, float]] = {}
        # pid of a kernel thread (or zombie): no address space -> when to look at it again
        self._no_mm: dict[int, float] = {}
        # pid -> (owner of /proc/PID, when to look again): a stat for a new pid, not one a scan each
        self._owner: dict[int, tuple[int, float]] = {}
        self._clock = clock
        self._mem_total: int | None = None
        # The live /proc's statm files stay open between scans; a tree of files (tests, a
        # container's) is read by path (none kept), as its files may be swapped for others between scans.
        self._statm = StatmReader(proc_root, kept=STATM_FDS_KEPT if proc_root == "/proc" else 0)

    def _plain_recheck_s(self, pid: int) -> float:
        """When a process with no NVIDIA mapping has its maps read again though its size stayed."""
        return _recheck_after_s(pid) * (HELD_RECHECK_FACTOR if self._statm.holds(pid) else 1)

    def close(self) -> None:
        """Close the statm files kept open (``StatmReader``); a later scan opens them again."""
        self._statm.close()

    def _pids(self) -> list[int]:
        if self.only_pids is not None:
            return list(self.only_pids)
        try:
            # isdigit() alone takes "²" and other digits int() refuses.
            return sorted(int(n) for n in os.listdir(self.proc_root) if n.isascii() and n.isdigit())
        except OSError:
            return []

    def _mem_total_bytes(self) -> int | None:
        """MemTotal from the scanned /proc, read once (only a memory hot-plug changes it)."""
        if self._mem_total is None:
            try:
                text = read_bytes(os.path.join(self.proc_root, "meminfo")).decode("ascii", "replace")
            except OSError:
                return None
            self._mem_total = parse_meminfo(text, frozenset({"MemTotal"})).get("MemTotal")
        return self._mem_total

    def scan(self, mem_total_bytes: int | None = None) -> ScanResult:
        """Every process's pinned estimate; ``mem_total_bytes`` caps each one (default: MemTotal
        from the scanned /proc)."""
        result = ScanResult()
        current: dict[int, tuple[tuple[int, int], PinnedEstimate]] = {}
        now = self._clock()
        plain: dict[int, tuple[bytes, float]] = {}
        no_mm: dict[int, float] = {}
        owners: dict[int, tuple[int, float]] = {}
        pids = self._pids()
        result.pids = pids
        for pid in pids:
            owner = self._owner.get(pid)
            if owner is None or now >= owner[1]:
                try:
                    owner = (os.stat(os.path.join(self.proc_root, str(pid))).st_uid, now + _recheck_after_s(pid))
                except (OSError, ValueError):
                    owner = None
            if owner is not None:
                owners[pid] = owner
                result.uids.add(owner[0])
            recheck = self._no_mm.get(pid)
            if recheck is not None and now < recheck:
                no_mm[pid] = recheck  # a kernel thread: not a read for it
                result.scanned += 1
                continue
            statm = None
            try:
                statm = self._statm.size(pid)
            except OSError:
                pass  # gone (the maps read below counts it), or no statm to read: read the maps
            if statm == b"0":
                no_mm[pid] = now + _recheck_after_s(pid)  # no address space: no maps to read
                self._statm.forget(pid)  # not read again before its re-check: no file kept
                result.scanned += 1
                continue
            if statm is not None:
                last_plain = self._plain.get(pid)
                if last_plain is not None and last_plain[0] == statm and now < last_plain[1]:
                    plain[pid] = last_plain  # the same address space as when it had no CUDA mapping
                    result.scanned += 1
                    continue
            try:
                text = read_maps(pid, self.proc_root)
            except PermissionError:
                result.denied += 1
                if len(result.denied_pids) < CAPPED_PIDS_SHOWN:
                    result.denied_pids.append((pid, _comm(pid, self.proc_root)))
                continue
            except (FileNotFoundError, ProcessLookupError):
                result.vanished += 1
                continue
            except OSError:
                result.vanished += 1
                continue
            result.scanned += 1
            # Cheap test before parsing: most processes on a box are not CUDA processes.
            if _NVIDIA_MARK not in text:
                if statm is not None:
                    plain[pid] = (statm, now + self._plain_recheck_s(pid))
                continue
            digest = (len(text), hash(text))
            last = self._previous.get(pid)
            if last is not None and last[0] == digest:
                est = last[1]  # the same mappings as a second ago: the same estimate
            else:
                accept = is_device = None
                if self.objects is not None:
                    accept = self.objects.accepter(pid, self.proc_root)
                    is_device = self.objects.device_check(pid, self.proc_root)
                est = estimate_pinned(text.decode("utf-8", errors="replace"), accept, is_device)
            if not est.is_cuda:
                # A /dev/nvidia* path but no NVIDIA device behind it (a planted file): read again
                # when its address space changes, as a process that maps none.
                if statm is not None:
                    plain[pid] = (statm, now + self._plain_recheck_s(pid))
                continue
            current[pid] = (digest, est)
            row = self._row(pid, est, None if last is None else last[1].ranges, now, mem_total_bytes)
            if row.held.capped:
                result.capped.append(pid)
            result.processes.append(row)
        self._previous = current
        self._plain = plain
        self._no_mm = no_mm
        self._owner = owners
        listed = set(pids)
        self._statm.keep_only(listed)
        # Kept for CUDA processes, and for a while for other live ones described on request (a
        # traced process whose maps show no CUDA yet); a pid that is gone is forgotten.
        self._described = {pid: d for pid, d in self._described.items()
                           if pid in current or (pid in listed and now - d[0] < DESCRIBE_TTL_S)}
        return result

    def estimate(self, pid: int) -> PinnedEstimate | None:
        """The last scan's estimate of a CUDA process (its mappings as counted), or None."""
        last = self._previous.get(pid)
        return None if last is None else last[1]

    def describe(self, pid: int) -> tuple:
        """(name, user, cmdline) of ``pid``, from the cache while it is fresh."""
        return self._describe_cached(pid, self._clock())

    def _describe_cached(self, pid: int, now: float) -> tuple:
        cached = self._described.get(pid)
        if cached is not None and now - cached[0] < DESCRIBE_TTL_S:
            return cached[1]
        described = _describe(pid)
        self._described[pid] = (now, described)
        return described

    def _row(self, pid: int, est: PinnedEstimate, previous: frozenset | None, now: float,
             mem_total_bytes: int | None) -> ProcessPinned:
        name, user, cmdline = self._describe_cached(pid, now)
        pinned, wc, capped = est.pinned_bytes, est.write_combined_bytes, False
        if pinned or wc:
            # Read every scan, unlike the maps: what is resident moves while the mappings stay.
            c = cap_estimate(pinned, wc, read_resident(pid, self.proc_root),
                             mem_total_bytes if mem_total_bytes is not None else self._mem_total_bytes())
            pinned, wc, capped = c.pinned_bytes, c.write_combined_bytes, c.capped
        return ProcessPinned(
            pid=pid, source="est.", identity=ProcessIdentity(name=name, user=user, cmdline=cmdline),
            held=HeldMemory(pinned_bytes=pinned, write_combined_bytes=wc, mappings=est.pinned_mappings,
                            mappings_churn=churn(previous, est.ranges), capped=capped),
        )


def scan_notice(result: ScanResult, euid: int | None = None) -> str | None:
    """One line for what the scan skipped, or None. ``euid``: pinmon's effective uid (default: its own).

    Running as root is the hint only for a user who is not root already; root itself is refused a
    process's maps when it lacks CAP_SYS_PTRACE (a container) or a security module says no.
    """
    if euid is None:
        euid = os.geteuid()
    parts = []
    if result.denied:
        why = ("run as root to see every process" if euid != 0 else
               "even as root: pinmon lacks CAP_SYS_PTRACE, or a security module refuses")
        named = ", ".join(f"pid {pid} ({name})" for pid, name in result.denied_pids)
        more = result.denied - len(result.denied_pids)
        if named and more > 0:
            named += f" and {more} more"
        parts.append(f"{result.denied} denied access{': ' + named if named else ''} ({why})")
    if result.vanished:
        parts.append(f"{result.vanished} exited during the scan")
    lines = ["skipped " + ", ".join(parts)] if parts else []
    if result.capped:
        shown = ", ".join(str(pid) for pid in result.capped[:CAPPED_PIDS_SHOWN])
        more = len(result.capped) - CAPPED_PIDS_SHOWN
        lines.append(f"pinned estimate of pid {shown}{f' and {more} more' if more > 0 else ''} capped"
                     " to what is resident (its pinned-looking mappings are larger than that)")
    if not lines:
        return None
    return "process scan: " + "; ".join(lines)
