"""What an attach returns: plain frozen records, shaped to map one-to-one onto the snapshot's copies
and allocations records (``Copies``, ``CopyStats``, ``Allocations``).

Rates are over the time the probes were enabled (``enabled_s``); where events were sampled (enabled
part of the time) or the attach stopped early, the totals are those rates over the whole window and
``sampled`` / ``stopped_early`` say so. Bytes are bytes, rates bytes per second.
"""
from __future__ import annotations

from dataclasses import dataclass, field

INSTRUMENT = "uprobes"


@dataclass(frozen=True)
class CopyStats:
    direction: str            # "h2d" or "d2h"
    memory: str               # "pinned", "pageable" or "write_combined"
    bytes_per_s: float
    bytes: int
    count: int
    size_p50_bytes: int | None
    size_p90_bytes: int | None
    size_max_bytes: int | None
    unknown_size_count: int = 0


@dataclass(frozen=True)
class OtherCopies:
    """Copies that do not cross the host link (device to device, peer) or stay on the host."""

    count: int
    bytes: int
    bytes_per_s: float


@dataclass(frozen=True)
class AllocationStats:
    count: int
    per_s: float
    frees: int
    frees_per_s: float
    median_bytes: int | None
    size_p90_bytes: int | None
    size_max_bytes: int | None
    bytes: int
    flags: dict[str, int]
    registrations: int
    registered_bytes: int
    registration_median_bytes: int | None
    registration_max_bytes: int | None
    registration_flags: dict[str, int]
    unregistrations: int


@dataclass(frozen=True)
class ProcessCopies:
    pid: int
    window_s: float
    stats: tuple[CopyStats, ...]
    peer: OtherCopies
    device: OtherCopies
    host_to_host: OtherCopies
    batch_calls: int
    batch_copies: int
    batch_copies_unmeasured: int    # copies in batches whose bytes the arguments did not give
    batch_ops: int                  # 3D batch operations (bytes not known)
    pageable_may_be_registered: bool
    allocations: AllocationStats
    instrument: str = INSTRUMENT
    notes: tuple[str, ...] = ()
    name: str | None = None      # /proc/PID/comm when attached (untrusted text): for one that exits

    def stat(self, direction: str, memory: str) -> CopyStats | None:
        for s in self.stats:
            if s.direction == direction and s.memory == memory:
                return s
        return None


@dataclass(frozen=True)
class ProbedFile:
    path: str                 # printable, as the first process mapping it named it
    dev: int
    ino: int
    probes: int
    pids: tuple[int, ...]
    refused: str | None = None   # why this file could not be probed


@dataclass(frozen=True)
class AttachResult:
    window_s: float
    enabled_s: float
    processes: dict[int, ProcessCopies]
    failed: dict[int, str]                   # pid -> why it could not be attached
    files: tuple[ProbedFile, ...]
    events: int                              # events read (all kinds)
    lost_events: int                         # the kernel's count of events lost (overrun, dropped)
    sampled: float | None = None          # the share of the window the probes were enabled, when sampled
    stopped_early: bool = False              # the event rate passed the budget and the attach stopped
    attach_s: float | None = None
    started_mono: float | None = None     # the window's start on CLOCK_MONOTONIC (time.monotonic())
    notices: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class AttachOutcome:
    """One window of an attach as a monitor keeps it: its result, or why nothing could be attached
    (one line), and when the window ended on CLOCK_MONOTONIC (``time.monotonic()``).

    ``fatal`` marks a reason that waiting does not change (not root, no uprobes, a locked-down
    kernel); without it (no CUDA process yet) the next window may attach."""

    result: AttachResult | None
    error: str | None = None
    ended_mono: float = 0.0
    fatal: bool = False
    interrupted: bool = False                # Ctrl-C or a signal cut the window short
    detach_s: float | None = None
    notices: tuple[str, ...] = ()            # the attacher's own (processes left out by its budget)
