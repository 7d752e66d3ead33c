"""The advisor's history: as long in time as the rules look back, bounded in count, the newest kept."""
from __future__ import annotations

import dataclasses
import itertools

import pytest

from pinmon.advise.history import MAX_SNAPSHOTS, RECENT_SNAPSHOTS, AdvisorHistory, lookback_s, span_for
from pinmon.advise.thresholds import Thresholds, lookback_fields
from tests import factories as make


def fill(history: AdvisorHistory, count: int, interval_s: float, start: float = 1000.0) -> AdvisorHistory:
    for k in range(count):
        history.append(make.snapshot(time=start + k * interval_s))
    return history


def times(history: AdvisorHistory) -> list[float]:
    return [s.time for s in history]


def test_the_span_is_the_longest_look_back_and_a_tenth():
    assert lookback_fields() == ("growth_window_s",)
    assert lookback_s(Thresholds()) == 600.0 and span_for(Thresholds()) == pytest.approx(660.0)
    longer = dataclasses.replace(Thresholds(), growth_window_s=3600.0)
    assert AdvisorHistory.for_thresholds(longer).span_s == pytest.approx(3960.0)
    assert AdvisorHistory.for_thresholds(None).span_s == pytest.approx(660.0)


@pytest.mark.parametrize("interval_s", [1.0, 2.5, 60.0, 3600.0])
def test_every_snapshot_of_the_span_is_kept_and_no_older_one(interval_s):
    h = fill(AdvisorHistory(span_s=660.0), 2000, interval_s)
    newest = h.latest.time
    assert h[-1] is h.latest and h.taken == 2000
    assert times(h) == [t for t in (1000.0 + k * interval_s for k in range(2000)) if t >= newest - 660.0]


@pytest.mark.parametrize("interval_s", [0.01, 0.1, 0.5])
def test_faster_snapshots_are_thinned_in_the_older_part_and_still_span_the_time(interval_s):
    h = fill(AdvisorHistory(span_s=660.0), int(1000 / interval_s), interval_s)
    ts = times(h)
    assert len(h) <= MAX_SNAPSHOTS
    assert ts == sorted(ts) and ts[-1] - ts[0] >= 660.0 - h.gap_s - interval_s  # the whole span
    recent = ts[-RECENT_SNAPSHOTS:]
    assert all(b - a == pytest.approx(interval_s) for a, b in itertools.pairwise(recent))  # every one
    older = ts[:-RECENT_SNAPSHOTS]
    assert all(b - a >= h.gap_s for a, b in itertools.pairwise(older))


def test_a_longer_window_keeps_more_time_within_the_same_count():
    short = fill(AdvisorHistory.for_thresholds(Thresholds()), 5000, 1.0)
    long = fill(AdvisorHistory.for_thresholds(dataclasses.replace(Thresholds(), growth_window_s=3600.0)), 5000, 1.0)
    assert times(short)[-1] - times(short)[0] == 660.0 and len(short) == 661
    assert times(long)[-1] - times(long)[0] >= 3960.0 - long.gap_s and len(long) <= MAX_SNAPSHOTS


def test_a_clock_that_goes_backwards_keeps_the_count_bounded_and_the_newest_last():
    h = AdvisorHistory(span_s=660.0)
    fill(h, 3000, 0.01, start=5000.0)
    fill(h, 3000, 0.01, start=1000.0)  # an hour earlier
    assert len(h) <= MAX_SNAPSHOTS and h[-1].time == pytest.approx(1000.0 + 2999 * 0.01)


def test_sequence_access():
    h = fill(AdvisorHistory(span_s=10.0), 5, 1.0)
    assert len(h) == 5 and [s.time for s in h.snapshots()] == [1000.0, 1001.0, 1002.0, 1003.0, 1004.0]
    assert h[0].time == 1000.0 and h[-2].time == 1003.0
    with pytest.raises(IndexError):
        h[5]
    assert not AdvisorHistory(span_s=10.0) and AdvisorHistory(span_s=10.0).latest is None


@pytest.mark.parametrize("span_s", [-1.0, float("nan"), float("inf")])
def test_a_span_must_be_finite_seconds(span_s):
    with pytest.raises(ValueError, match="span_s must be a finite number of seconds"):
        AdvisorHistory(span_s=span_s)
