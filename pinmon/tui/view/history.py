"""The last minutes of each GPU's RX/TX and of pinned memory's share of RAM, for the overview's graphs.

The session feeds it every snapshot it takes (paused or not, so a live pause leaves no hole) and
freezes a copy for the views each time it shows one (``frozen``), so a paused view keeps its graphs.
Samples are numbered from the first one taken: a graph that puts several samples in each column
groups them by that number, so a column holds the same samples from one second to the next and the
graph scrolls instead of shimmering. No Textual here.
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...model import HostMemory, Snapshot

# The span the overview's graphs show: minutes, as a GPU monitor's graphs do.
GRAPH_SPAN_S = 300.0
# Bounds on the samples kept per series, whatever the interval.
MIN_SAMPLES = 60
MAX_SAMPLES = 3600

Series = tuple[float | None, ...]


def pinned_figure(h: HostMemory) -> tuple[int | None, str]:
    """(bytes, label) of pinned memory: the snapshot's best figure and its source, else the estimate."""
    if h.pinned_bytes_total is not None and h.pinned_bytes_source in ("kernel", "est."):
        return h.pinned_bytes_total, h.pinned_bytes_source
    return h.pinned_bytes_est, "est."


def pinned_share(h: HostMemory) -> float | None:
    """Pinned memory's share of effective RAM (MemTotal or the cgroup limit), None where unknown."""
    pinned = pinned_figure(h)[0]
    effective = h.effective_mem_limit_bytes or h.mem_total_bytes
    if pinned is None or not effective:
        return None
    return pinned / effective


def samples_for(interval_s: float, span_s: float = GRAPH_SPAN_S) -> int:
    """How many samples a series keeps: ``span_s`` of them at ``interval_s``, within the bounds."""
    if not interval_s or interval_s <= 0 or not math.isfinite(interval_s):
        return MIN_SAMPLES
    return max(MIN_SAMPLES, min(MAX_SAMPLES, math.ceil(span_s / interval_s)))


@dataclass(frozen=True)
class GraphHistory:
    """What the graphs draw: series oldest first, all ending at the same sample.

    ``first_index``: the number of each series' first sample; ``interval_s``: seconds per sample.
    """
    first_index: int = 0
    interval_s: float = 1.0
    rx: dict[int, Series] = field(default_factory=dict)
    tx: dict[int, Series] = field(default_factory=dict)
    pinned: Series = ()

    @property
    def count(self) -> int:
        return len(self.pinned)


class History:
    """Each GPU's RX and TX and the pinned share, one sample per snapshot, the last ``maxlen``."""

    def __init__(self, interval_s: float = 1.0):
        self.interval_s = interval_s
        self.maxlen = samples_for(interval_s)
        self.taken = 0  # samples taken since the start: the number of the next one
        self._rx: dict[int, deque[float | None]] = {}
        self._tx: dict[int, deque[float | None]] = {}
        self._pinned: deque[float | None] = deque(maxlen=self.maxlen)

    def add(self, snapshot: Snapshot) -> None:
        by_index = {g.index: g for g in snapshot.gpus}
        for index in by_index:
            if index not in self._rx:  # a GPU seen for the first time: no readings before
                self._rx[index] = deque((None,) * len(self._pinned), maxlen=self.maxlen)
                self._tx[index] = deque((None,) * len(self._pinned), maxlen=self.maxlen)
        for index, rx in self._rx.items():
            g = by_index.get(index)
            pcie = g.pcie if g is not None and not g.lost else None
            rx.append(pcie.rx_bytes_per_s if pcie is not None else None)
            self._tx[index].append(pcie.tx_bytes_per_s if pcie is not None else None)
        self._pinned.append(pinned_share(snapshot.host))
        self.taken += 1

    def frozen(self, indices: Sequence[int]) -> GraphHistory:
        """A copy for the views, of the GPUs ``indices`` (the shown snapshot's)."""
        return GraphHistory(first_index=self.taken - len(self._pinned), interval_s=self.interval_s,
                            rx={i: tuple(self._rx[i]) for i in indices if i in self._rx},
                            tx={i: tuple(self._tx[i]) for i in indices if i in self._tx},
                            pinned=tuple(self._pinned))


def columns(series: Series, first_index: int, per_column: int, width: int) -> list[float | None]:
    """``width`` column values, newest at the right: the mean of the known samples in each group of
    ``per_column`` (grouped by sample number, so a column keeps its samples as new ones come); None
    for a column with no known sample (before the history starts, or no reading)."""
    if width <= 0:
        return []
    per_column = max(1, per_column)
    if not series:
        return [None] * width
    last = first_index + len(series) - 1
    newest = last // per_column
    out: list[float | None] = []
    for group in range(newest - width + 1, newest + 1):
        lo = max(group * per_column, first_index) - first_index
        hi = min((group + 1) * per_column, last + 1) - first_index
        if hi <= 0 or lo >= hi:
            out.append(None)
            continue
        out.append(known_mean(series[lo:hi]))
    return out


def known_mean(values: Series) -> float | None:
    """The mean of the known values (a GPU lost or not read leaves None), None when none is."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def per_column_for(width: int, interval_s: float, span_s: float = GRAPH_SPAN_S) -> int:
    """Samples per column for a graph ``width`` columns wide to span ``span_s``."""
    if width <= 0 or not interval_s or interval_s <= 0:
        return 1
    return max(1, math.ceil(span_s / interval_s / width))


class ColumnCache:
    """``columns`` for one series drawn again and again: the mean of a group that is complete and
    wholly kept never changes, so it is computed once; each call computes only the newest group (and
    the oldest, while it scrolls off). At 1 Hz a graph then costs a few dictionary looks per column."""

    def __init__(self) -> None:
        self._per_column = 0
        self._done: dict[int, float | None] = {}

    def values(self, series: Series, first_index: int, per_column: int, width: int) -> list[float | None]:
        per_column = max(1, per_column)
        if width <= 0:
            return []
        if per_column != self._per_column:
            self._per_column, self._done = per_column, {}
        if not series:
            return [None] * width
        last = first_index + len(series) - 1
        newest = last // per_column
        oldest_kept = -(-first_index // per_column)  # the first group that starts inside the history
        done = self._done
        start = newest - width + 1
        # Columns wholly before the oldest reading kept (a graph still filling, the first minutes
        # of a session): blank, with no arithmetic per column.
        blank = min(width, max(0, first_index // per_column - start))
        out: list[float | None] = [None] * blank
        for group in range(start + blank, newest + 1):
            if group >= oldest_kept and group in done:  # (an older one is losing readings)
                out.append(done[group])
                continue
            lo = max(group * per_column, first_index) - first_index
            hi = min((group + 1) * per_column, last + 1) - first_index
            if hi <= 0 or lo >= hi:
                out.append(None)
                continue
            mean = known_mean(series[lo:hi])
            if group < newest and group >= oldest_kept:
                done[group] = mean  # complete and wholly kept: it stays so
            out.append(mean)
        for group in [g for g in done if g < oldest_kept or g < newest - width]:
            del done[group]  # losing readings, or scrolled off the graph
        return out
