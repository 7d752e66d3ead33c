"""Small builders for metric families that skip unknown values.

A ``None`` in a snapshot means "unknown": the series is left out of the scrape, never written as 0
(a 0 would read as a measurement). Label values are strings; an unknown label is the empty string,
which Prometheus treats as "label absent".
"""
from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

PREFIX = "pinmon_"


def label(value) -> str:
    return "" if value is None else str(value)


def _number(value) -> Optional[float]:
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past any float
        return None
    return v if math.isfinite(v) else None


class Gauge:
    """A gauge family collecting samples; ``add`` ignores unknown (None, NaN) values."""

    def __init__(self, name: str, doc: str, labels: Sequence[str] = ()):
        self.family = GaugeMetricFamily(PREFIX + name, doc, labels=list(labels))
        self.count = 0

    def add(self, label_values: Iterable = (), value=None) -> None:
        v = _number(value)
        if v is not None:
            self.family.add_metric([label(x) for x in label_values], v)
            self.count += 1


class Counter(Gauge):
    """A counter family; ``name`` is given without ``_total`` (the exposition adds it)."""

    def __init__(self, name: str, doc: str, labels: Sequence[str] = ()):
        if name.endswith("_total"):
            name = name[: -len("_total")]
        self.family = CounterMetricFamily(PREFIX + name, doc, labels=list(labels))
        self.count = 0

    def add(self, label_values: Iterable = (), value=None) -> None:
        v = _number(value)
        if v is not None and v >= 0:  # a counter never goes below zero
            self.family.add_metric([label(x) for x in label_values], v)
            self.count += 1


def emit(*builders: Gauge):
    """The families that got at least one sample (an empty family only adds HELP noise)."""
    return [b.family for b in builders if b.count]
