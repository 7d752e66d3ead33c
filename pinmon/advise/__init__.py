"""The advisor: pure rules over snapshots that return findings; no I/O.

``advise(history)`` runs every rule (or the ``only`` ones) over a snapshot history, oldest first, and
returns the findings worst first. The rules are declared in ``memory``, ``pcie``, ``traced``,
``probe`` and ``copies`` and listed in ``registry``: ``RULES`` maps each stable rule id (an API:
users filter and alert on it) to its rule, ``RULE_DOCS`` to a one-line description with the default
thresholds, for ``--help``.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..model import Finding, Snapshot
from .registry import RULE_DOCS, RULES
from .thresholds import Thresholds

__all__ = ["RULES", "RULE_DOCS", "Thresholds", "advise"]

_SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


_DIGITS = re.compile(r"([0-9]+)")


def _natural(text: str) -> tuple:
    """'gpu10' after 'gpu2', 'pid 99' before 'pid 100'. Only ASCII digits count as a number: a
    process name is anyone's text, and "²" passes str.isdigit() but not int()."""
    return tuple(int(part) if i % 2 else part for i, part in enumerate(_DIGITS.split(text)))


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Worst first (critical, warning, info), then by rule id, then by subject."""
    return sorted(findings, key=lambda f: (_SEVERITY_ORDER.get(f.severity, 3), f.rule, _natural(f.subject)))


def advise(history: Sequence[Snapshot], thresholds: Thresholds = Thresholds(),
           only: Iterable[str] | None = None) -> list[Finding]:
    """Findings for the latest snapshot of ``history`` (oldest first), worst first.

    ``only`` limits the run to these rule ids; an unknown id raises ``ValueError``.
    A single ``Snapshot`` is accepted as a history of one.
    """
    if isinstance(history, Snapshot):
        history = (history,)
    history = tuple(history)  # a deque or a generator works too; rules index into it
    if only is None:
        ids = list(RULES)
    else:
        ids = list(dict.fromkeys((only,) if isinstance(only, str) else only))
        unknown = [i for i in ids if i not in RULES]
        if unknown:
            raise ValueError(f"unknown rule id {unknown[0]!r} (known: {', '.join(RULES)})")
    if not history:
        return []
    findings: list[Finding] = []
    for rule_id in ids:
        findings.extend(RULES[rule_id](history, thresholds))
    return sort_findings(findings)
