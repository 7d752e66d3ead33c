"""Per-process pinned memory scan: every process's /proc/PID/maps, CUDA processes kept.

A process that exits mid-scan or denies access is skipped and counted, never raised on; the caller
turns the counts into one notice. Names and users come from psutil, only for CUDA processes.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

import psutil

from ..model import ProcessPinned
from .procmaps import PinnedEstimate, churn, estimate_pinned

_NVIDIA_MARK = "/dev/nvidia"


@dataclass
class ScanResult:
    processes: list[ProcessPinned] = field(default_factory=list)
    denied: int = 0
    vanished: int = 0
    scanned: int = 0


def read_maps(pid: int, proc_root: str = "/proc") -> str:
    with open(os.path.join(proc_root, str(pid), "maps"), encoding="utf-8", errors="replace") as f:
        return f.read()


def _describe(pid: int) -> tuple[Optional[str], Optional[str], Optional[str]]:
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

    def __init__(self, proc_root: str = "/proc", pids: Optional[list[int]] = None):
        self.proc_root = proc_root
        self.only_pids = pids
        self._previous: dict[int, frozenset] = {}
        self.self_pid = os.getpid()

    def _pids(self) -> list[int]:
        if self.only_pids is not None:
            return list(self.only_pids)
        try:
            return sorted(int(n) for n in os.listdir(self.proc_root) if n.isdigit())
        except OSError:
            return []

    def scan(self) -> ScanResult:
        result = ScanResult()
        current: dict[int, frozenset] = {}
        for pid in self._pids():
            try:
                text = read_maps(pid, self.proc_root)
            except PermissionError:
                result.denied += 1
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
                continue
            est = estimate_pinned(text)
            if not est.is_cuda:
                continue
            current[pid] = est.ranges
            result.processes.append(self._row(pid, est))
        self._previous = current
        return result

    def _row(self, pid: int, est: PinnedEstimate) -> ProcessPinned:
        name, user, cmdline = _describe(pid)
        return ProcessPinned(
            pid=pid, name=name, user=user, cmdline=cmdline,
            pinned_bytes=est.pinned_bytes,
            write_combined_bytes=est.write_combined_bytes,
            source="est.",
            pinned_mappings=est.pinned_mappings,
            mappings_churn=churn(self._previous.get(pid), est.ranges),
        )


def scan_notice(result: ScanResult) -> Optional[str]:
    parts = []
    if result.denied:
        parts.append(f"{result.denied} denied access (run as root to see every process)")
    if result.vanished:
        parts.append(f"{result.vanished} exited during the scan")
    if not parts:
        return None
    return "process scan: skipped " + ", ".join(parts)
