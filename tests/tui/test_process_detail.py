"""A process in full (``process_detail.detail_rows``): every figure shown is the snapshot's, formatted
with pinmon.units; the probe is compared only on the process's own GPU; highlights follow findings."""
from __future__ import annotations

import dataclasses

from pinmon.model import Finding, ProbeMeasurement
from pinmon.tui.format import local_share, node_cell
from pinmon.tui.process_detail import detail_rows, probe_for
from pinmon.units import fmt_bytes, fmt_nodes, fmt_pct, fmt_rate, main_node

from .fakes import GIB, MIB, T0, make_kernel_snapshot, make_probe_result, traced_cupti_process


def rows_by_label(rows):
    """{label: [texts]}, a row without a label joining the one above."""
    out, last = {}, None
    for r in rows:
        last = r.label or last
        out.setdefault(last, []).append(r)
    return out


def snap(**kw):
    return make_kernel_snapshot(20, probe=make_probe_result(t=T0), **kw)


def test_a_cupti_process_shows_every_transfer_figure_of_its_row():
    s = snap()
    p = traced_cupti_process()
    rows = rows_by_label(detail_rows(p, s))
    assert "traced, engine CUPTI" in rows["process"][0].text
    for key in ("h2d.pinned", "h2d.pageable", "d2h.pinned", "d2h.pageable"):
        d, mem = key.split(".")
        row = rows[f"{d.upper()} {mem}"][0]
        t = p.transfers[key]
        wanted = [fmt_rate(t[k]) for k in ("bytes_per_s", "achieved_bytes_per_s", "rate_p50", "rate_p10")]
        assert row.text.split() == " ".join(wanted).split()
    assert rows["pinned"][0].text.startswith(f"{fmt_bytes(p.pinned_bytes)} held ({fmt_bytes(p.registered_bytes)}"
                                             f" registered)")
    assert rows["allocs"][0].text == f"{p.pinned_allocs_per_s:.1f}/s, median {fmt_bytes(p.median_alloc_bytes)}"


def test_achieved_pinned_rate_against_the_probe_of_its_gpu_and_direction():
    s = snap()
    p = traced_cupti_process()
    probe = s.probe
    vs = rows_by_label(detail_rows(p, s))["1 MiB+ pinned"]
    h2d, d2h = probe.rate("h2d", "pinned"), probe.rate("d2h", "pinned")
    assert vs[0].text == (f"H2D {fmt_rate(p.h2d_pinned_bulk_bytes_per_s)} ="
                          f" {fmt_pct(p.h2d_pinned_bulk_bytes_per_s / h2d)} of probe {fmt_rate(h2d)} (GPU 0, 2.50 s)")
    assert vs[1].text == (f"D2H {fmt_rate(p.d2h_pinned_bulk_bytes_per_s)} ="
                          f" {fmt_pct(p.d2h_pinned_bulk_bytes_per_s / d2h)} of probe {fmt_rate(d2h)} (GPU 0, 1.20 s)")
    assert vs[2].text.startswith(fmt_pct(p.pinned_bulk_default_stream_share))
    assert all(r.style == "" for r in vs)  # no finding: nothing highlighted


def test_a_probe_of_another_gpu_or_none_is_not_compared():
    p = traced_cupti_process()
    other = dataclasses.replace(make_probe_result(t=T0), gpu_index=1)
    for s in (snap(), make_kernel_snapshot(20)):
        s = dataclasses.replace(s, probe=other) if s.probe else s
        text = " ".join(r.text for r in rows_by_label(detail_rows(p, s))["1 MiB+ pinned"])
        assert "no probe of GPU 0 yet" in text and "of probe" not in text
    failed = dataclasses.replace(make_probe_result(t=T0), status="unavailable")
    assert probe_for(dataclasses.replace(snap(), probe=failed), snap().gpus[0]) is None


def test_a_slow_pinned_copies_finding_highlights_its_direction_only():
    finding = Finding("slow-pinned-copies", "warning", "pid 8080 (trainer)", "m", "a",
                      values={"pid": 8080, "direction": "h2d"})
    other = Finding("slow-pinned-copies", "warning", "pid 1", "m", "a", values={"pid": 1, "direction": "d2h"})
    rows = rows_by_label(detail_rows(traced_cupti_process(), snap(), [finding, other]))
    assert [r.style for r in rows["1 MiB+ pinned"][:2]] == ["warning", ""]
    assert rows["findings"][0].text.startswith("slow-pinned-copies")


def test_a_hooks_process_has_window_rates_and_says_why_no_achieved_rate():
    p = dataclasses.replace(traced_cupti_process(), trace_engine="hooks", h2d_pinned_bulk_bytes_per_s=None,
                            transfers={"h2d.pinned": {"bytes_per_s": 2e9, "achieved_bytes_per_s": None,
                                                      "rate_p50": None, "rate_p10": None}})
    rows = rows_by_label(detail_rows(p, snap()))
    assert "engine hooks" in rows["process"][0].text
    assert rows["H2D pinned"][0].text.split() == ["2.0", "GB/s", "n/a", "n/a", "n/a"]
    assert rows["D2H pageable"][0].text.split() == ["n/a"] * 4  # not in the report: unknown, not 0
    assert "need GPU times" in rows["D2H pageable"][1].text
    assert "1 MiB+ pinned" not in rows  # no GPU times, nothing to hold against the probe


def test_an_untraced_process_says_how_to_trace_it_and_shows_its_estimate():
    s = snap(nodes=2)
    p = next(p for p in s.processes if p.pid == 4242)
    rows = rows_by_label(detail_rows(p, s))
    assert "est. (from /proc/PID/maps)" in rows["process"][0].text
    assert rows["pinned"][0].text == (f"{fmt_bytes(p.pinned_bytes)} held in 1,200 mappings,"
                                      f" write-combined {fmt_bytes(p.write_combined_bytes)}")
    assert "pinmon trace" in rows["copies"][0].text
    assert rows["GPU memory"][0].text == f"{fmt_bytes(p.gpu_memory_bytes)} on GPU 0 (node 0)"
    assert rows["NUMA"][0].text == (f"node0 {fmt_bytes(240 * GIB)}, node1 {fmt_bytes(60 * GIB)};"
                                    f" local to its GPUs {fmt_pct(0.8)}")


def test_call_sites_are_quoted_printable_text_and_vmlck_shows_when_held():
    p = dataclasses.replace(traced_cupti_process(), vm_locked_bytes=3 * GIB)
    finding = Finding("mlock-not-pinned", "warning", "pid 8080", "m", "a", values={"pid": 8080})
    rows = rows_by_label(detail_rows(p, snap(), [finding]))
    sites = [r.text for r in rows["sites"]]
    assert sites == ['alloc "train_cupti.py:42"', 'pageable_copy "loader.py:118\\x1b[31m"']
    assert rows["VmLck"][0].text.startswith(fmt_bytes(3 * GIB)) and rows["VmLck"][0].style == "warning"
    assert not any("\x1b" in r.text for r in detail_rows(p, snap()))


def test_node_helpers():
    s = snap(nodes=2)
    p = next(p for p in s.processes if p.pid == 8080)
    assert main_node(p.pinned_bytes_by_node) == ("1", 0.75) and node_cell(p) == "1 (75%)"
    assert local_share(p, s.gpus) == 0.25  # GPU 0 is on node 0
    assert node_cell(dataclasses.replace(p, pinned_bytes_by_node=None)) == "n/a"
    assert local_share(dataclasses.replace(p, gpu_indices=()), s.gpus) is None
    split = {str(n): n * MIB for n in (10, 2, 1, 3, 4)}
    assert fmt_nodes(split) == ", ".join(f"node{n} {fmt_bytes(n * MIB)}" for n in (1, 2, 3, 4, 10))
    assert fmt_nodes(split, 2).endswith(f"node2 {fmt_bytes(2 * MIB)}, +3 more")


def test_a_probe_measurement_of_the_largest_size_is_the_reference():
    probe = dataclasses.replace(make_probe_result("sweep", t=T0), measurements=(
        ProbeMeasurement("copy", "pinned", 1 * MIB, "h2d", 30e9), ProbeMeasurement("copy", "pinned", 64 * MIB, "h2d", 52e9)))
    s = dataclasses.replace(snap(), probe=probe)
    vs = rows_by_label(detail_rows(traced_cupti_process(), s))["1 MiB+ pinned"]
    assert f"of probe {fmt_rate(52e9)}" in vs[0].text
    assert vs[1].text.startswith("D2H") and "no probe of GPU 0 yet" in vs[1].text  # no D2H measurement


def test_unknown_and_odd_figures_read_n_a_never_raise():
    from pinmon.model import HostMemory, ProcessPinned, Snapshot
    from pinmon.tui.widgets.memory import memory_rows

    bare = ProcessPinned(pid=1, source="traced", trace_engine="cupti")
    text = " ".join(r.text for r in detail_rows(bare, None))
    assert "copies n/a" not in text and "n/a (no copy figures" in text and "n/a" in text
    odd = dataclasses.replace(bare, transfers={"h2d.pinned": {}, "x.y": {"bytes_per_s": 1.0}},
                              pinned_bytes_by_node={"0": -5, "zz": 0}, h2d_pinned_bulk_bytes_per_s=1e9,
                              copy_gpu_pci_bus_id="not a bus id")
    rows = detail_rows(odd, Snapshot(time=T0, host=HostMemory(hostname="h")))
    assert any("its GPU is not in the snapshot" in r.text for r in rows)
    host = HostMemory(hostname="h", kernel_pinned_bytes=GIB, pinned_bytes_source="kernel")
    plain = [r.plain for r in memory_rows(host) + memory_rows(host, compact=True, width=10)]
    assert any("unattributed n/a" in r for r in plain) and any("explain n/a" in r for r in plain)
