"""Small builders for metric families that skip unknown values, and what every label value goes through.

A ``None`` in a snapshot means "unknown": the series is left out of the scrape, never written as 0
(a 0 would read as a measurement). Label values are strings; an unknown label is the empty string,
which Prometheus treats as "label absent".

Label values come from other users (a process's name, its user, a finding's subject) and from
recordings; the scrape is read by Prometheus, by ``curl`` in root's terminal and by
``pinmon export --once``. prometheus_client escapes only backslash, quote and newline, so
``served`` puts every label value of every family through the printable filter, cut to
``LABEL_CHARS``: no terminal escape reaches a reader, and one long name cannot grow the scrape. The
collector applies it to all it returns, so a family built any other way cannot miss it.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, Sample

from ...units import printable

PREFIX = "pinmon_"
# A label value's length as served, in characters (a longer one ends in "…"): room for a command
# name, a user name or a finding's subject, not for a whole argv.
LABEL_CHARS = 64


def label(value: object) -> str:
    return "" if value is None else str(value)


def label_text(value: str) -> str:
    """A label value as served: one printable line of at most ``LABEL_CHARS`` characters.

    Only the first ``LABEL_CHARS + 1`` characters are looked at (the filter never shortens text), so a
    128 KiB name costs no more per scrape than a short one.
    """
    if len(value) <= LABEL_CHARS and value.isprintable():
        return value  # the common case, as the filter would give it, without a loop in Python
    return printable(value[:LABEL_CHARS + 1], LABEL_CHARS)


def served(families: list[Metric]) -> list[Metric]:
    """``families`` with every label value through ``label_text``; a series that the cut makes equal
    to an earlier one of its family is left out (two series with one label set make a scrape invalid)."""
    for family in families:
        seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        kept: list[Sample] = []
        for s in family.samples:
            labels = {k: label_text(str(v)) for k, v in s.labels.items()}
            key = (s.name, tuple(sorted(labels.items())))
            if key not in seen:
                seen.add(key)
                kept.append(s._replace(labels=labels))
        family.samples = kept
    return families


def _number(value: float | None) -> float | None:
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past any float
        return None
    return v if math.isfinite(v) else None


class Gauge:
    """A gauge family collecting samples; ``add`` ignores unknown (None, NaN) values."""

    family: GaugeMetricFamily | CounterMetricFamily  # a Counter's is a counter family

    def __init__(self, name: str, doc: str, labels: Sequence[str] = ()) -> None:
        self.family = GaugeMetricFamily(PREFIX + name, doc, labels=list(labels))
        self.count = 0

    def add(self, label_values: Iterable[object] = (), value: float | None = None) -> None:
        v = _number(value)
        if v is not None:
            self.family.add_metric([label(x) for x in label_values], v)
            self.count += 1


class Counter(Gauge):
    """A counter family; ``name`` is given without ``_total`` (the exposition adds it)."""

    def __init__(self, name: str, doc: str, labels: Sequence[str] = ()) -> None:
        if name.endswith("_total"):
            name = name[: -len("_total")]
        self.family = CounterMetricFamily(PREFIX + name, doc, labels=list(labels))
        self.count = 0

    def add(self, label_values: Iterable[object] = (), value: float | None = None) -> None:
        v = _number(value)
        if v is not None and v >= 0:  # a counter never goes below zero
            self.family.add_metric([label(x) for x in label_values], v)
            self.count += 1


def emit(*builders: Gauge) -> list[Metric]:
    """The families that got at least one sample (an empty family only adds HELP noise)."""
    return [b.family for b in builders if b.count]
