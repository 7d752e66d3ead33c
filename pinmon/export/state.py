"""What the exporter serves: the latest good snapshot, its findings, byte totals and error counts.

Written by the refresher thread, read by scrapes. Everything a scrape needs is taken in one
``view()`` under the lock, so a scrape never sees a snapshot paired with another one's findings.
Running totals (PCIe bytes, error counts) live here, not in the collector, because they must grow
once per snapshot, not once per scrape.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..model import Finding, Gpu, ProcessPinned, Snapshot

# Stages whose failures are counted; all are exported (at 0 too) so rate() works from the start.
STAGES = ("snapshot", "advise", "probe")


def gpu_key(gpu: Gpu) -> str:
    """A GPU's identity across snapshots: its UUID, else its index (NVML may renumber; UUIDs stay)."""
    return gpu.uuid or f"index:{gpu.index}"


def unique_gpus(gpus: Iterable[Gpu]) -> list[Gpu]:
    """Each GPU once: the first entry of an index or a UUID wins, later repeats are dropped.

    A live snapshot lists every GPU once; a repeat comes from a damaged or hand-made recording, and
    two series with one identity would make the scrape invalid (or double a byte counter). There is
    no sound merge of two different readings of one GPU, so the first is kept, as a reader that
    stops at the first match would.
    """
    out: list[Gpu] = []
    indices: set[int] = set()
    uuids: set[str] = set()
    for g in gpus:
        if g.index in indices or (g.uuid and g.uuid in uuids):
            continue
        indices.add(g.index)
        if g.uuid:
            uuids.add(g.uuid)
        out.append(g)
    return out


def unique_processes(processes: Iterable[ProcessPinned]) -> list[ProcessPinned]:
    """Each pid once, the first row winning (see ``unique_gpus``)."""
    out: list[ProcessPinned] = []
    seen: set[int] = set()
    for p in processes:
        if p.pid not in seen:
            seen.add(p.pid)
            out.append(p)
    return out


@dataclass(frozen=True)
class StateView:
    snapshot: Snapshot | None
    findings: tuple[Finding, ...]
    # gpu_key -> (rx link bytes, tx link bytes) summed over every exact ("gpm" or "counters") interval.
    pcie_bytes_totals: dict[str, tuple[int, int]] = field(default_factory=dict)
    collection_errors: dict[str, int] = field(default_factory=dict)
    snapshots_total: int = 0
    replay_finished: bool | None = None  # None for a live source


class ExportState:
    def __init__(self, live: bool = True) -> None:
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._findings: tuple[Finding, ...] = ()
        self._totals: dict[str, tuple[int, int]] = {}
        self._errors = {s: 0 for s in STAGES}
        self._snapshots = 0
        self._replay_finished: bool | None = None if live else False

    def add_snapshot(self, snapshot: Snapshot) -> None:
        """A new good snapshot: it replaces the served one and its PCIe bytes join the totals."""
        with self._lock:
            for g in unique_gpus(snapshot.gpus):
                p = g.pcie
                # Only exact link bytes make a counter; a sampled rate times the interval would be an
                # extrapolation dressed up as a count.
                if p.exact and not g.lost:
                    rx, tx = self._totals.get(gpu_key(g), (0, 0))
                    self._totals[gpu_key(g)] = (rx + max(0, p.rx_bytes or 0), tx + max(0, p.tx_bytes or 0))
            self._snapshot = snapshot
            self._snapshots += 1

    def set_findings(self, findings: Iterable[Finding]) -> None:
        with self._lock:
            self._findings = tuple(findings)

    def count_error(self, stage: str) -> None:
        with self._lock:
            self._errors[stage] = self._errors.get(stage, 0) + 1

    def finish_replay(self) -> None:
        with self._lock:
            if self._replay_finished is not None:
                self._replay_finished = True

    def latest(self) -> Snapshot | None:
        with self._lock:
            return self._snapshot

    def view(self) -> StateView:
        with self._lock:
            return StateView(snapshot=self._snapshot, findings=self._findings,
                             pcie_bytes_totals=dict(self._totals), collection_errors=dict(self._errors),
                             snapshots_total=self._snapshots, replay_finished=self._replay_finished)
