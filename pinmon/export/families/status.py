"""The advisor's view and the exporter's own health: findings, findings per rule, status, snapshot
time, error counts. The per-rule series come from the rule registry, so every rule the advisor has
is served from the first snapshot on.

Findings grow with the processes and groups on the box (a user can start a thousand), so at most
``MAX_FINDING_SERIES`` ``pinmon_finding`` series are served, chosen so that one user's findings cannot
push out another's (``finding_quota.py``: each owner's worst first, up to a quota, then by severity in
turn); ``pinmon_rule_findings`` counts them all, ``pinmon_finding_series_dropped`` counts what was left
out by severity, and ``pinmon_finding``'s help line says so when any was.
"""
from __future__ import annotations

from prometheus_client.core import Metric

from ...advise.registry import REGISTRY
from ...model import SEVERITY_RANK, worst_severity
from ...model.kinds import SEVERITIES
from ..state import StateView
from .base import Counter, Gauge, emit
from .finding_quota import MAX_FINDING_SERIES, OWNER_QUOTA, select

FINDING_HELP = "1 for each active advisor finding (rule ids are stable)"


def families(view: StateView) -> list[Metric]:
    # Each (rule, severity, subject) once: a duplicate series would make the whole scrape invalid.
    chosen = select(view.findings, view.snapshot)
    left_out = sum(chosen.dropped.values())
    help_text = FINDING_HELP
    if left_out:
        help_text += (f"; {left_out} left out of this scrape by the cap of {MAX_FINDING_SERIES} series (each owner,"
                      f" a user or a group or a rule, first gets its worst {OWNER_QUOTA}):"
                      f" see pinmon_finding_series_dropped")
    finding = Gauge("finding", help_text, ("rule", "severity", "subject"))
    for key in chosen.served:
        finding.add(key, 1)
    dropped = Gauge("finding_series_dropped", f"finding series left out by the cap of {MAX_FINDING_SERIES}"
                    f" pinmon_finding series, by severity (0 when all are served)", ("severity",))
    seen = {(f.rule, f.severity, f.subject) for f in view.findings}
    per_rule = Gauge("rule_findings", "active findings of each rule at each severity it reports, 0 included (a rule"
                     " disabled in the config stays 0)", ("rule", "severity"))
    status = Gauge("status", "worst active finding: 0 ok, 1 warning, 2 critical (as pinmon check's exit code)")
    last = Gauge("last_snapshot_timestamp_seconds", "time of the snapshot being served (unix time; a "
                 "replay serves the recording's times)")
    if view.snapshot is not None:
        for severity in SEVERITIES:
            dropped.add((severity,), chosen.dropped.get(severity, 0))
        status.add((), SEVERITY_RANK[worst_severity(view.findings)])
        last.add((), view.snapshot.time)
        counts = {(r.id, severity): 0 for r in REGISTRY for severity in r.severities}
        for rule, severity, _subject in seen:
            counts[(rule, severity)] = counts.get((rule, severity), 0) + 1
        for rule_severity, n in counts.items():
            per_rule.add(rule_severity, n)
    snaps = Counter("snapshots_total", "snapshots taken (or read from the recording) since start")
    snaps.add((), view.snapshots_total)
    errors = Counter("collection_errors_total", "failed snapshot, advisor or probe runs; the last good data "
                     "is served meanwhile", ("stage",))
    for stage, n in sorted(view.collection_errors.items()):
        errors.add((stage,), n)
    done = Gauge("replay_finished", "replay only: 1 once the recording ended (its last snapshot is held)")
    if view.replay_finished is not None:
        done.add((), 1 if view.replay_finished else 0)
    return emit(finding, dropped, per_rule, status, last, snaps, errors, done)
