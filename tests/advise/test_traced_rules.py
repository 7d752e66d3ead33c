"""Rules fed by the in-process tracer: pinned-rounding-waste at its thresholds, and the traced rules
naming the process and the call site (file:line) behind a finding."""
import dataclasses

import pytest

from pinmon.advise import RULE_DOCS, Thresholds, advise
from pinmon.advise import rules as R

from .helpers import GIB, MIB, make_proc, make_snap

T = Thresholds()


@pytest.mark.parametrize("allocated_mib, requested_mib, fires", [
    (1024, 768, True),     # 256 MiB = 25%: both thresholds met exactly
    (1024, 769, False),    # 255 MiB
    (2048, 1537, False),   # 511 MiB but under 25%
    (3 * 256, 3 * 129, True),  # three 129 MiB tensors in 256 MiB blocks
    (512, 512, False),
    (512, 600, False),     # requested above allocated: inconsistent figures, stay silent
])
def test_rounding_waste_levels(allocated_mib, requested_mib, fires):
    p = make_proc(source="traced", pinned_bytes=allocated_mib * MIB, requested_pinned_bytes=requested_mib * MIB)
    out = R.pinned_rounding_waste([make_snap(processes=[p])], T)
    assert [f.severity for f in out] == (["warning"] if fires else [])


def test_rounding_waste_message_values_and_call_site():
    p = make_proc(pid=77, name="train", source="traced", pinned_bytes=GIB, requested_pinned_bytes=516 * MIB,
                  call_site="train.py:42")
    (f,) = R.pinned_rounding_waste([make_snap(processes=[p])], T)
    assert f.subject == "pid 77 (train)" and f.rule == "pinned-rounding-waste"
    assert "1.0 GiB of pinned memory for 516.0 MiB requested (traced)" in f.message
    assert "power of two" in f.advice and "train.py:42" in f.advice
    assert f.values["waste_bytes"] == 508 * MIB and f.values["call_site"] == "train.py:42"


def test_rounding_waste_thresholds_are_configurable():
    p = make_proc(source="traced", pinned_bytes=GIB, requested_pinned_bytes=900 * MIB)
    snap = make_snap(processes=[p])
    assert R.pinned_rounding_waste([snap], T) == []
    t = dataclasses.replace(T, rounding_waste_min_bytes=100 * MIB, rounding_waste_min_fraction=0.1)
    assert len(R.pinned_rounding_waste([snap], t)) == 1


def test_rounding_waste_is_silent_for_estimates():
    p = make_proc(pinned_bytes=4 * GIB)  # /proc estimate: nothing requested is known
    assert R.pinned_rounding_waste([make_snap(processes=[p])], T) == []


@pytest.mark.parametrize("rule, fields", [
    ("pinned-small-allocs", dict(pinned_allocs_per_s=200.0, median_alloc_bytes=4096)),
    ("wc-cpu-readback", dict(wc_readbacks=12, write_combined_bytes=64 * MIB)),
    ("pageable-bulk-copies", dict(pageable_copy_bytes_per_s=2e9)),
    ("pinned-rounding-waste", dict(pinned_bytes=GIB, requested_pinned_bytes=512 * MIB)),
])
def test_traced_findings_name_the_process_and_the_call_site(rule, fields):
    p = make_proc(pid=4242, name="python", source="traced", call_site="examples/x.py:17", **fields)
    findings = [f for f in advise([make_snap(processes=[p])], T) if f.rule == rule]
    assert len(findings) == 1
    f = findings[0]
    assert f.subject == "pid 4242 (python)" and "(traced)" in f.message
    assert "examples/x.py:17" in f.advice and f.values["call_site"] == "examples/x.py:17"
    assert f.values["pid"] == 4242


def test_without_a_call_site_the_advice_says_nothing_about_one():
    p = make_proc(source="traced", pinned_allocs_per_s=200.0, median_alloc_bytes=4096)
    (f,) = R.pinned_small_allocs([make_snap(processes=[p])], T)
    assert "Most of it comes from" not in f.advice and "call_site" not in f.values


def test_rule_doc():
    assert "256 MiB" in RULE_DOCS["pinned-rounding-waste"] and "25%" in RULE_DOCS["pinned-rounding-waste"]
