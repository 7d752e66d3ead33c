"""The app's attach without root: an attach's outcome made by hand (the engine's records, as
``pinmon.attach`` returns them), merged into the box's snapshots by the collector's own code
(``collect/attached.merge_attached``), and a runner for the attach key that pretends to attach.

The figures, over a 10 s window, on the two-GPU box of ``fakes.py`` (GPU 0 reads RX 40-49 GB/s):

- pid 4242 (train.py, GPU 0): H2D pinned 32.0 GB/s in 8 MiB copies, D2H pinned 1.0 GB/s; a dozen
  small pinned allocations (one write-combined), two registrations of 2 GiB, one unregistered;
- pid 5151 (the loader, GPU 0): H2D pageable 6.0 GB/s ("or registered before the attach"), D2H into
  write-combined memory 50 MB/s, peer copies 1.0 GB/s;
- pid 9090 ("server", in no scan row and on no GPU NVML lists: its copies' GPU cannot be known on a
  two-GPU box): H2D pinned 2.0 GB/s.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence

from pinmon.attach.results import (
    AllocationStats,
    AttachOutcome,
    AttachResult,
    CopyStats,
    OtherCopies,
    ProcessCopies,
)
from pinmon.collect.attached import RequestedWindows, merge_attached
from pinmon.model import Snapshot
from pinmon.tui.view.attach import AttachEnd

from .fakes import GIB, MIB, FakeSource, make_snapshot

WINDOW_S = 10.0
KIB = 1 << 10
NONE = OtherCopies(0, 0, 0.0)


def _stat(direction: str, memory: str, rate: float, size: int, p90: int | None = None,
          biggest: int | None = None) -> CopyStats:
    total = int(rate * WINDOW_S)
    return CopyStats(direction, memory, rate, total, total // size, size, p90 or size, biggest or size)


def _allocations(count: int = 0, **kw) -> AllocationStats:
    fields = dict(count=count, per_s=count / WINDOW_S, frees=0, frees_per_s=0.0, median_bytes=None,
                  size_p90_bytes=None, size_max_bytes=None, bytes=0, flags={}, registrations=0, registered_bytes=0,
                  registration_median_bytes=None, registration_max_bytes=None, registration_flags={},
                  unregistrations=0)
    fields.update(kw)
    return AllocationStats(**fields)  # type: ignore[arg-type]


def _process(pid: int, stats: Sequence[CopyStats], name: str | None = None, peer: OtherCopies = NONE,
             may_be_registered: bool = False, allocations: AllocationStats | None = None) -> ProcessCopies:
    return ProcessCopies(pid=pid, window_s=WINDOW_S, stats=tuple(stats), peer=peer, device=NONE, host_to_host=NONE,
                         batch_calls=0, batch_copies=0, batch_copies_unmeasured=0, batch_ops=0,
                         pageable_may_be_registered=may_be_registered,
                         allocations=allocations or _allocations(), name=name)


def trainer(pid: int = 4242) -> ProcessCopies:
    return _process(pid, [_stat("h2d", "pinned", 32e9, 8 * MIB, biggest=64 * MIB),
                          _stat("d2h", "pinned", 1e9, 1 * MIB, 2 * MIB, 4 * MIB)], name="python",
                    allocations=_allocations(12, frees=3, frees_per_s=0.3, median_bytes=4 * KIB,
                                             size_p90_bytes=2 * MIB, size_max_bytes=8 * MIB, bytes=12 * MIB,
                                             flags={"default": 11, "writecombined": 1}, registrations=2,
                                             registered_bytes=4 * GIB, registration_median_bytes=2 * GIB,
                                             registration_max_bytes=2 * GIB, registration_flags={"portable": 2},
                                             unregistrations=1))


def loader(pid: int = 5151) -> ProcessCopies:
    return _process(pid, [_stat("h2d", "pageable", 6e9, 512 * KIB, 1 * MIB, 4 * MIB),
                          _stat("d2h", "write_combined", 50e6, 64 * KIB)], name="dataloader",
                    peer=OtherCopies(120, int(10e9), 1e9), may_be_registered=True)


def server(pid: int = 9090) -> ProcessCopies:
    return _process(pid, [_stat("h2d", "pinned", 2e9, 2 * MIB)], name="server")


def outcome(*processes: ProcessCopies, ended_mono: float | None = None) -> AttachOutcome:
    ended = time.monotonic() if ended_mono is None else ended_mono
    result = AttachResult(window_s=WINDOW_S, enabled_s=WINDOW_S, processes={p.pid: p for p in processes}, failed={},
                          files=(), events=0, lost_events=0, started_mono=ended - WINDOW_S)
    return AttachOutcome(result, None, ended)


def attached_snapshot(i: int = 0, processes: Sequence[ProcessCopies] = (), **kw) -> Snapshot:
    """The box's ``i``-th snapshot with ``processes`` attached (default: all three), as the live
    collector merges them."""
    snap = make_snapshot(i, **kw)
    done = outcome(*(processes or (trainer(), loader(), server())), ended_mono=0.0)
    rows, notices = merge_attached(list(snap.processes), done, gpus=snap.gpus, now_mono=0.0)
    return dataclasses.replace(snap, processes=tuple(rows), notices=snap.notices + tuple(notices))


class AttachedSource(FakeSource):
    """The box, with the latest window of ``windows`` merged in as the live collector does."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.windows = RequestedWindows()

    def snapshot(self) -> Snapshot | None:
        snap = super().snapshot()
        if snap is None:
            return None
        rows, notices = merge_attached(list(snap.processes), self.windows.latest(), gpus=snap.gpus)
        return dataclasses.replace(snap, processes=tuple(rows), notices=snap.notices + tuple(notices))


class FakeAttachRunner:
    """The attach key's runner without root: "attaches" (sets ``attached``), waits for ``release`` or
    the app's stop, then hands ``windows`` the trainer's figures for the pid and says it attached;
    with ``error``, refuses at once as the engine would (one line), attaching nothing."""

    def __init__(self, windows: RequestedWindows | None = None, error: str | None = None,
                 block: bool = False):
        self.windows = windows
        self.error = error
        self.calls: list[tuple[int, float]] = []
        self.release = threading.Event()
        self.started = threading.Event()
        self.stopped = threading.Event()
        if not block:
            self.release.set()

    def __call__(self, pid: int, seconds: float, stop: threading.Event, attached: threading.Event) -> AttachEnd:
        self.calls.append((pid, seconds))
        if self.error is not None:
            return AttachEnd(pid, self.error)
        attached.set()
        self.started.set()
        while not self.release.wait(0.02):
            if stop.is_set():
                self.stopped.set()
                attached.clear()
                return AttachEnd(pid, None, 1.0, interrupted=True)
        attached.clear()
        if self.windows is not None:
            self.windows.set(outcome(trainer(pid)))
        return AttachEnd(pid, None, seconds)
