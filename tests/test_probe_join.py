"""Probe results join snapshots one way: a measured result is never replaced by one that could not
measure, otherwise the newer result wins; the exporter's live collector keeps results by that rule."""
import dataclasses
import os

import pytest

from pinmon.model import ProbeResult
from pinmon.model.probe_join import kept_probe, with_probe
from tests import factories as make

OK_OLD = make.box_probe(t=10.0)
OK_NEW = make.box_probe(t=20.0)
FAILED_OLD = ProbeResult(time=5.0, status="unavailable", reason="no CuPy")
FAILED_NEW = ProbeResult(time=30.0, status="unavailable", reason="not enough memory")


@pytest.mark.parametrize("held, offered, kept", [
    (None, None, None),
    (None, OK_OLD, OK_OLD),
    (OK_OLD, None, OK_OLD),
    (None, FAILED_NEW, FAILED_NEW),          # nothing measured yet: the failure is what there is
    (OK_OLD, OK_NEW, OK_NEW),                # newer wins
    (OK_NEW, OK_OLD, OK_NEW),                # ... also when offered late
    (OK_OLD, FAILED_NEW, OK_OLD),            # a failure never displaces a measurement
    (FAILED_NEW, OK_OLD, OK_OLD),            # ... and a measurement replaces a failure
    (FAILED_OLD, FAILED_NEW, FAILED_NEW),
], ids=lambda v: "none" if v is None else f"{v.status}@{v.time:g}")
def test_which_result_is_kept(held, offered, kept):
    assert kept_probe(held, offered) is kept


def test_a_tie_keeps_the_offered_result():
    joined = dataclasses.replace(OK_OLD, link_window_s=1.0)  # the same probe, its link traffic joined
    assert kept_probe(OK_OLD, joined) is joined


def test_with_probe_replaces_only_what_changes():
    snap = make.box_snapshot(0)
    assert with_probe(snap, None) is snap
    joined = with_probe(snap, OK_OLD)
    assert joined.probe is OK_OLD and joined.gpus == snap.gpus and joined.time == snap.time
    assert with_probe(joined, OK_OLD) is joined
    assert with_probe(joined, FAILED_NEW) is joined
    assert with_probe(joined, OK_NEW).probe is OK_NEW


def test_the_live_collector_keeps_the_last_measured_probe():
    # The exporter's probe loop hands every result to the collector; the snapshots carry the rule's pick.
    from pinmon.collect.live import LiveCollector

    with LiveCollector(use_nvml=False, pids=[os.getpid()]) as col:
        assert col.snapshot().probe is None
        col.set_probe(OK_OLD)
        col.set_probe(FAILED_NEW)
        assert col.snapshot().probe is OK_OLD
        col.set_probe(OK_NEW)
        assert col.snapshot().probe is OK_NEW
