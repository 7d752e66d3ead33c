"""A real attach of the stand-in libcuda, turned into snapshot rows (``collect/attached.py``) and judged
by the advisor: ``pageable-bulk-copies``, ``pinned-small-allocs`` and ``wc-cpu-readback`` fire on
attached rows with the thresholds they use for traced ones, and say "(attached)"; a process that is
also traced keeps the tracer's figures, and the attach's own agree with them.

These share the kernel's tracefs, so they run in one xdist group, one after another."""
import pytest

from pinmon.advise import advise
from pinmon.attach import Attacher, AttachPolicy, AttachSession
from pinmon.cli.commands.attach import json_doc, report_of
from pinmon.collect.attached import merge_attached
from pinmon.model import Finding
from tests.attach.standin import CUDA, mine, why_not
from tests.factories import copies, process, snapshot, stat

WHY = why_not()
pytestmark = [pytest.mark.skipif(WHY is not None, reason=WHY or ""), pytest.mark.xdist_group("tracefs")]
MIB = 1 << 20



def attach_rows(child, calls, rows=(), window=0.3):
    """Attach ``child``, run ``calls(session)``, and merge the window into ``rows``."""
    with AttachSession([child.pid], is_cuda=CUDA) as s:
        calls(s)
        r = s.run(window)
    from pinmon.attach import AttachOutcome

    outcome = AttachOutcome(r, None, r.started_mono + r.window_s)
    merged, _notices = merge_attached(list(rows), outcome, now_mono=outcome.ended_mono)
    return merged, outcome


def findings_for(rows, rule) -> list[Finding]:
    return [f for f in advise(snapshot(processes=rows)) if f.rule == rule]


def test_pageable_bulk_copies_fire_on_an_attached_row(child):
    rows, _ = attach_rows(child, lambda s: child.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pageable"}, 8 * MIB, n=40))
    (row,) = rows
    assert row.source == "attached" and row.copies.instrument == "uprobes"
    (f,) = findings_for(rows, "pageable-bulk-copies")
    assert f.values["pid"] == child.pid and "(attached)" in f.message and "Register'ed before the attach" in f.message
    assert f.values["pageable_copy_bytes_per_s"] == row.copies.pageable_bytes_per_s > 100e6


def test_pinned_small_allocs_fire_on_an_attached_row(child):
    def calls(s):
        for i in range(12):
            child.call("cuMemAllocHost_v2", {"out": f"p{i}"}, 4096)
    rows, _ = attach_rows(child, calls, window=0.5)
    (row,) = rows
    assert row.allocations.count == 12 and row.allocations.median_bytes == 4096
    (f,) = findings_for(rows, "pinned-small-allocs")
    assert f.values["pid"] == child.pid and "(attached)" in f.message
    assert f.values["pinned_allocs_per_s"] == row.allocations.per_s >= 10


def test_a_readback_into_write_combined_memory_fires_on_an_attached_row(child):
    def calls(s):
        child.call("cuMemHostAlloc", {"out": "wc"}, 3 * MIB, 0x4)
        s.pump()   # the allocation's mapping, found while it exists
        child.call("cuMemcpyDtoH_v2", {"buf": "wc", "off": 64}, 0x1000, 4096, n=3)
    rows, _ = attach_rows(child, calls)
    (row,) = rows
    assert row.copies.wc_readbacks == 3 and row.allocations.flags == {"write_combined": 1}
    (f,) = [f for f in findings_for(rows, "wc-cpu-readback") if f.severity == "warning"]
    assert f.values["pid"] == child.pid and f.values["wc_d2h_copies"] == 3 and "(attached)" in f.message


def test_a_traced_process_keeps_the_tracers_figures_and_the_attach_agrees(child):
    # The tracer saw 25 host-to-device copies of 1 MiB from pinned memory (its report, as root reads it);
    # the attach, on the same process at the same time, counts the same calls.
    traced = process(child.pid, source="traced", copies=copies("hooks", [stat("h2d", "pinned", None, count=25,
                                                                                bytes=25 * MIB)]))
    rows, outcome = attach_rows(child, lambda s: child.call("cuMemcpyHtoD_v2", 0x1000, {"buf": "pinned"}, MIB, n=25),
                                rows=[traced])
    (row,) = rows
    assert row is traced and row.copies.instrument == "hooks"
    snap = snapshot(processes=rows)
    report = report_of(snap, outcome)
    own, _ = report.traced[child.pid]
    tracer = row.copies.get("h2d", "pinned")
    attach = own.get("h2d", "pinned")
    assert (attach.count, attach.bytes) == (tracer.count, tracer.bytes) == (25, 25 * MIB)
    doc = json_doc(snap, outcome, report, [])
    assert doc["processes"][0]["source"] == "traced" and doc["processes"][0]["copies"]["instrument"] == "hooks"
    assert doc["traced"][0]["pid"] == child.pid and doc["traced"][0]["copies"]["instrument"] == "uprobes"


def test_the_attacher_and_the_merge_end_to_end(child):
    attacher = Attacher([child.pid], AttachPolicy(window_s=0.3), is_cuda=CUDA)
    child.call("cuMemcpyDtoH_v2", {"buf": "pageable"}, 0x1000, 100, n=2)   # before: not counted
    outcome = attacher.run_once()
    rows, notices = merge_attached([], outcome)
    assert [r.pid for r in rows] == [child.pid] and rows[0].copies.stats == () and notices == []
    assert mine() == (False, False)
