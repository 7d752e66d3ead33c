"""The advisor's view and the exporter's own health: findings, findings per rule, status, snapshot
time, error counts. The per-rule series come from the rule registry, so every rule the advisor has
is served from the first snapshot on.

Findings per process grow with the processes on the box (a user can start a thousand), so at most
``MAX_FINDING_SERIES`` ``pinmon_finding`` series are served, the worst severity first;
``pinmon_rule_findings`` counts them all.
"""
from __future__ import annotations

from ...advise.registry import REGISTRY
from ...model import SEVERITY_RANK, worst_severity
from ..state import StateView
from .base import Counter, Gauge, emit

MAX_FINDING_SERIES = 100


def families(view: StateView) -> list:
    finding = Gauge("finding", "1 for each active advisor finding (rule ids are stable)",
                    ("rule", "severity", "subject"))
    seen: dict = {}  # a duplicate series would make the whole scrape invalid: each key once, in order
    for f in view.findings:
        seen.setdefault((f.rule, f.severity, f.subject), None)
    # Worst first; the advisor's order within a severity (sorted() is stable).
    for key in sorted(seen, key=lambda k: -SEVERITY_RANK.get(k[1], 0))[:MAX_FINDING_SERIES]:
        finding.add(key, 1)
    per_rule = Gauge("rule_findings", "active findings of each rule at each severity it reports, 0 included (a rule"
                     " disabled in the config stays 0)", ("rule", "severity"))
    status = Gauge("status", "worst active finding: 0 ok, 1 warning, 2 critical (as pinmon check's exit code)")
    last = Gauge("last_snapshot_timestamp_seconds", "time of the snapshot being served (unix time; a "
                 "replay serves the recording's times)")
    if view.snapshot is not None:
        status.add((), SEVERITY_RANK[worst_severity(view.findings)])
        last.add((), view.snapshot.time)
        counts = {(r.id, severity): 0 for r in REGISTRY for severity in r.severities}
        for rule, severity, _subject in seen:
            counts[(rule, severity)] = counts.get((rule, severity), 0) + 1
        for key, n in counts.items():
            per_rule.add(key, n)
    snaps = Counter("snapshots_total", "snapshots taken (or read from the recording) since start")
    snaps.add((), view.snapshots_total)
    errors = Counter("collection_errors_total", "failed snapshot, advisor or probe runs; the last good data "
                     "is served meanwhile", ("stage",))
    for stage, n in sorted(view.collection_errors.items()):
        errors.add((stage,), n)
    done = Gauge("replay_finished", "replay only: 1 once the recording ended (its last snapshot is held)")
    if view.replay_finished is not None:
        done.add((), 1 if view.replay_finished else 0)
    return emit(finding, per_rule, status, last, snaps, errors, done)
