"""How probe results join snapshots: the one rule for which result a snapshot carries.

Probes run on their own schedule, beside a source: the terminal app's automatic and asked-for
probes, ``pinmon check --probe``, the exporter's ``--probe-every``. Each hands its results here, so
the advisor (``probe-below-link``, ``slow-pinned-copies``), the views, the metrics and recordings see
a probe the same way wherever it ran. Plain functions of model objects: no CUDA, no I/O.
"""
from __future__ import annotations

import dataclasses

from . import ProbeResult, Snapshot


def kept_probe(held: ProbeResult | None, offered: ProbeResult | None) -> ProbeResult | None:
    """Which of two probe results to keep: a result that measured over one that could not (no CuPy,
    not enough memory, cancelled), else the newer one (``offered`` on a tie).

    A failed probe says nothing about the link, while the last measurement still does; the failure
    itself is the caller's to report (the app's Probe panel, the exporter's error counter).
    """
    if offered is None:
        return held
    if held is None:
        return offered
    if (held.status == "ok") != (offered.status == "ok"):
        return held if held.status == "ok" else offered
    return offered if offered.time >= held.time else held


def with_probe(snapshot: Snapshot, result: ProbeResult | None) -> Snapshot:
    """``snapshot`` carrying the probe result ``kept_probe`` keeps of its own and ``result``; the
    same object when that is the one it already carries."""
    kept = kept_probe(snapshot.probe, result)
    if kept is snapshot.probe:
        return snapshot
    return dataclasses.replace(snapshot, probe=kept)
