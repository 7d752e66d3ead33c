"""What a rule of the advisor is: its stable id, its one-line doc, the thresholds it reads, the
severities it reports, and the check that looks for its problem, declared together with ``@rule``.

A check yields ``Found`` (severity, message, advice, figures); the ``Rule`` around it stamps each
with the rule's id and a subject and returns ``Finding``s, so a rule's id is written once, where it
is declared. ``over`` says what the check is given, and so what the subject is:

- ``"snapshot"``: ``check(snap, t)`` on the latest snapshot; the subject is "host" unless the
  ``Found`` names another.
- ``"gpus"``: ``check(gpu, snap, t)`` for each GPU of the latest snapshot that NVML still reaches
  (a lost GPU has no readings; ``gpu-lost`` reports it); the subject is "gpuN".
- ``"processes"``: ``check(p, snap, t)`` for each process row of the latest snapshot; the subject
  is "pid N (name)".
- ``"history"``: ``check(history, t)`` on the whole history, oldest first; each ``Found`` names
  its subject.

An empty history gives no findings, so a check never sees one. The doc is a template: a
``{field}`` of ``Thresholds`` in it prints that field's default with its unit ("30%", "1 GiB",
"1 GB/s", "10 min"), so ``pinmon --help`` and the docs show the figures the rule uses.
"""
from __future__ import annotations

import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, fields
from typing import Any

from ..model import Finding, Snapshot
from ..model.kinds import SEVERITIES, Severity
from ..units import fmt_bytes, fmt_pct, fmt_rate, fmt_seconds
from .common import process_subject
from .thresholds import Thresholds

SCOPES = ("snapshot", "gpus", "processes", "history")
# SEVERITIES (model.kinds): what a finding can be; model.SEVERITY_RANK grades them.


class Found:
    """What a check found, before its rule's id and the subject are stamped on it. ``values`` are
    the finding's figures; unknown ones (None) are left out, as ``Finding.from_dict`` rejects null."""

    __slots__ = ("advice", "message", "severity", "subject", "values")

    def __init__(self, severity: Severity, message: str, advice: str, subject: str | None = None,
                 **values: object):
        self.severity = severity
        self.message = message
        self.advice = advice
        self.subject = subject
        self.values = {k: v for k, v in values.items() if v is not None}

    @classmethod
    def with_values(cls, severity: Severity, message: str, advice: str, values: Mapping[str, object],
                    subject: str | None = None) -> Found:
        """A ``Found`` whose figures come as a mapping: figures gathered while the message is built,
        or named at run time."""
        return cls(severity, message, advice, subject, **values)


@dataclass(frozen=True)
class ThresholdDefault:
    """One threshold a rule reads: its ``Thresholds`` field (the config key), default and kind."""
    name: str
    default: float
    kind: str  # "fraction", "bytes", "bytes_per_s", "per_s" or "seconds"

    @property
    def shown(self) -> str:
        """The default with its unit, as the rule docs print it: '30%', '1 GiB', '1 GB/s', '10 min'."""
        if self.kind == "fraction":
            return fmt_pct(self.default)
        if self.kind == "bytes":
            return fmt_bytes(self.default, 0)
        if self.kind == "bytes_per_s":
            return fmt_rate(self.default, 0)
        if self.kind == "seconds":
            return fmt_seconds(self.default, 0)
        return f"{self.default:g}"


def _threshold_default(f: Field[Any]) -> ThresholdDefault:
    # Every field of Thresholds has a plain default (``Thresholds()`` is the default configuration).
    if f.default is MISSING:
        raise TypeError(f"Thresholds.{f.name} has no default")
    return ThresholdDefault(f.name, f.default, f.metadata["kind"])


_DEFAULTS = {f.name: _threshold_default(f) for f in fields(Thresholds)}


@dataclass(frozen=True)
class Rule:
    id: str
    doc_template: str
    check: Callable[..., Iterable[Found]]
    over: str = "snapshot"
    thresholds: tuple[str, ...] = ()
    severities: tuple[str, ...] = ("warning",)

    def __post_init__(self):
        # A mistake here is a programming error: it fails at import, so any test run catches it.
        if self.over not in SCOPES:
            raise ValueError(f"rule {self.id}: over={self.over!r} is not one of {SCOPES}")
        unknown = [n for n in self.thresholds if n not in _DEFAULTS]
        if unknown:
            raise ValueError(f"rule {self.id}: {unknown[0]!r} is not a field of Thresholds")
        bad = [s for s in self.severities if s not in SEVERITIES]
        if bad or not self.severities:
            raise ValueError(f"rule {self.id}: severities {self.severities!r} must be some of {SEVERITIES}")
        named = {name for _, name, _, _ in string.Formatter().parse(self.doc_template) if name}
        if not named <= set(self.thresholds):
            raise ValueError(f"rule {self.id}: its doc names {sorted(named - set(self.thresholds))},"
                             f" which are not among its thresholds")

    @property
    def defaults(self) -> tuple[ThresholdDefault, ...]:
        """The thresholds it reads, with their defaults, in the order it declares them."""
        return tuple(_DEFAULTS[n] for n in self.thresholds)

    @property
    def doc(self) -> str:
        """The one-line doc with the default thresholds filled in."""
        return self.doc_template.format(**{d.name: d.shown for d in self.defaults})

    def __call__(self, history: Sequence[Snapshot], t: Thresholds) -> list[Finding]:
        """The findings for the latest snapshot of ``history`` (oldest first)."""
        if not len(history):
            return []
        snap = history[-1]
        if self.over == "history":
            return [self._finding(f, f.subject) for f in self.check(history, t)]
        if self.over == "snapshot":
            return [self._finding(f, f.subject or "host") for f in self.check(snap, t)]
        out: list[Finding] = []
        if self.over == "gpus":
            for g in snap.gpus:
                if not g.lost:
                    out.extend(self._finding(f, f.subject or f"gpu{g.index}") for f in self.check(g, snap, t))
        else:
            for p in snap.processes:
                out.extend(self._finding(f, f.subject or process_subject(p)) for f in self.check(p, snap, t))
        return out

    def _finding(self, found: Found, subject: str | None) -> Finding:
        return Finding(rule=self.id, severity=found.severity, subject=subject or "host", message=found.message,
                       advice=found.advice, values=found.values)


def rule(rule_id: str, doc: str, over: str = "snapshot", thresholds: Sequence[str] = (),
         severities: Sequence[str] = ("warning",)) -> Callable[[Callable[..., Iterable[Found]]], Rule]:
    """Declare a check as the rule ``rule_id`` (see the module docstring); the name then holds the
    ``Rule``, called as ``rule(history, thresholds) -> list[Finding]``."""
    def declare(check: Callable[..., Iterable[Found]]) -> Rule:
        return Rule(rule_id, doc, check, over, tuple(thresholds), tuple(severities))
    return declare
