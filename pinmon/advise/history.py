"""The advisor's snapshot history: the one kind the terminal app, ``pinmon replay``'s report and JSON,
and the exporter keep, so the same snapshots give the same findings in each.

Sized in time: the rules look back in seconds (the ``Thresholds`` fields marked ``lookback``, such as
``growth_window_s``), so the history keeps the snapshots of the longest look-back plus a tenth
(``span_for``), whatever the interval between them. A threshold with a longer window makes a longer
history; a snapshot older than the span is dropped, however few are kept.

Bounded in count, for memory: at most ``MAX_SNAPSHOTS`` (1000). A snapshot holds ~10-20 KB of Python
objects on a one- or two-GPU box with a few processes and ~190 KB on an 8-GPU box with 100 processes,
so the history stays under ~20 MB there and ~190 MB at that size. The newest ``RECENT_SNAPSHOTS`` are
all kept; an older one is kept only when it comes at least ``gap_s`` (the span over the count left for
them) after the one kept before it. Snapshots that come faster than that (below ~0.7 s apart at the
default 10-minute look-back) still give the rules the whole span, at a coarser step in its older part:
the same minutes, not fewer.
"""
from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Iterator

from ..model import Snapshot
from .thresholds import Thresholds, lookback_fields

MAX_SNAPSHOTS = 1000
# The newest snapshots, every one kept: the last minute or two at ordinary intervals.
RECENT_SNAPSHOTS = 100
# Kept beyond the longest look-back, so a snapshot at the edge of a rule's window is never the one
# dropped (wall-clock times are floats; a rule's window may start a moment before its newest snapshot).
MARGIN_FRACTION = 0.1


def lookback_s(thresholds: Thresholds) -> float:
    """The longest look-back, in seconds, that any rule reads with these thresholds."""
    return max((float(getattr(thresholds, name)) for name in lookback_fields()), default=0.0)


def span_for(thresholds: Thresholds) -> float:
    """Seconds of snapshots the history keeps for these thresholds."""
    return lookback_s(thresholds) * (1 + MARGIN_FRACTION)


class AdvisorHistory:
    """Snapshots, oldest first, spanning ``span_s`` seconds before the newest one (by their ``time``),
    at most ``max_snapshots`` of them. Iterable and indexable; ``snapshots()`` is a tuple for the
    advisor."""

    def __init__(self, span_s: float, max_snapshots: int = MAX_SNAPSHOTS, recent: int = RECENT_SNAPSHOTS):
        if not math.isfinite(span_s) or span_s < 0:
            raise ValueError(f"span_s must be a finite number of seconds, got {span_s!r}")
        self.span_s = float(span_s)
        self.max_snapshots = max(2, int(max_snapshots))
        self.recent_count = max(1, min(int(recent), self.max_snapshots // 2))
        self.older_count = self.max_snapshots - self.recent_count
        # Older snapshots this far apart fill their share of the count over the span, no more.
        self.gap_s = self.span_s / self.older_count
        self.taken = 0  # snapshots appended since the start
        self._recent: deque[Snapshot] = deque()
        # maxlen: the count stays bounded even where the clock went backwards and times overlap.
        self._older: deque[Snapshot] = deque(maxlen=self.older_count)

    @classmethod
    def for_thresholds(cls, thresholds: Thresholds | None = None, **kwargs) -> AdvisorHistory:
        """A history as long as these thresholds' rules look back (default thresholds if None)."""
        return cls(span_for(thresholds if thresholds is not None else Thresholds()), **kwargs)

    def append(self, snapshot: Snapshot) -> None:
        self.taken += 1
        self._recent.append(snapshot)
        if len(self._recent) > self.recent_count:
            moved = self._recent.popleft()
            last = self._older[-1] if self._older else None
            if last is None or not 0 <= moved.time - last.time < self.gap_s:
                self._older.append(moved)
        cutoff = snapshot.time - self.span_s
        while self._older and self._older[0].time < cutoff:
            self._older.popleft()
        while not self._older and len(self._recent) > 1 and self._recent[0].time < cutoff:
            self._recent.popleft()

    @property
    def latest(self) -> Snapshot | None:
        return self._recent[-1] if self._recent else None

    def snapshots(self) -> tuple[Snapshot, ...]:
        return tuple(self)

    def __iter__(self) -> Iterator[Snapshot]:
        return itertools.chain(self._older, self._recent)

    def __len__(self) -> int:
        return len(self._older) + len(self._recent)

    def __getitem__(self, index: int) -> Snapshot:
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError("history index out of range")
        older = len(self._older)
        return self._older[i] if i < older else self._recent[i - older]

    def __bool__(self) -> bool:
        return bool(self._recent)
