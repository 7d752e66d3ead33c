"""Findings of one rule shown together, with the advice they share said once.

Two containers over their limits get the same eight lines of advice from ``pinned-cgroup-share``,
and only a last sentence ("Largest holder: ...") differs. A rule's findings are kept together at
the place of its worst one (the advisor lists worst first, so the order stays worst first, rule by
rule); each finding keeps the sentences of its advice that are its own, and the sentences every one
of them has come once, after the group. A rule with one finding keeps its whole advice. No Textual.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ...model import Finding

# A sentence ends at ". ", "! " or "? " before a capital, a backquote or a bracket: pinmon's own
# advice texts, where "e.g. x" and "1.5 GB/s" do not end one.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\[])")


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


@dataclass(frozen=True)
class RuleGroup:
    rule: str
    findings: tuple[Finding, ...]
    own_advice: tuple[str, ...]  # per finding, the sentences of its advice the others lack ("" for none)
    shared_advice: str           # the sentences all of them have, in the first one's order


def group_by_rule(findings: Sequence[Finding]) -> list[RuleGroup]:
    order: dict[str, list[Finding]] = {}
    for f in findings:
        order.setdefault(f.rule, []).append(f)
    return [_group(rule, members) for rule, members in order.items()]


def _group(rule: str, members: list[Finding]) -> RuleGroup:
    if len(members) == 1:
        return RuleGroup(rule, (members[0],), ("",), members[0].advice)
    split = [sentences(f.advice) for f in members]
    common = set(split[0]).intersection(*map(set, split[1:]))
    shared = " ".join(s for s in split[0] if s in common)
    own = tuple(" ".join(s for s in parts if s not in common) for parts in split)
    return RuleGroup(rule, tuple(members), own, shared)

