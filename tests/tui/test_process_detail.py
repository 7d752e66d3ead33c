"""A process in full (``process_detail.detail_rows``): every figure shown is the snapshot's, formatted
with pinmon.units; the probe is compared only on the process's own GPU; highlights follow findings."""
from __future__ import annotations

import dataclasses

from pinmon.model import Finding, ProbeMeasurement
from pinmon.tui.view.format import local_share, node_cell
from pinmon.tui.view.process_detail import detail_rows, probe_for
from pinmon.units import fmt_bytes, fmt_int, fmt_nodes, fmt_pct, fmt_rate, main_node
from tests import factories as make

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
    for d, mem in (("h2d", "pinned"), ("h2d", "pageable"), ("d2h", "pinned"), ("d2h", "pageable")):
        row = rows[f"{d.upper()} {mem}"][0]
        t = p.copies.get(d, mem)
        wanted = [fmt_rate(t.bytes_per_s), fmt_int(t.count)] + [
            fmt_rate(v) for v in (t.achieved_bytes_per_s, t.rate_p50_bytes_per_s, t.rate_p10_bytes_per_s)]
        assert row.text.split() == " ".join(wanted).split()
    assert p.held.bytes == p.held.pinned_bytes  # all it holds is pinned: said once
    assert rows["pinned"][0].text.startswith(f"{fmt_bytes(p.held.bytes)} held ({fmt_bytes(p.held.registered_bytes)}"
                                             f" registered)")
    a = p.allocations
    assert rows["allocs"][0].text == f"{a.per_s:.1f}/s, median {fmt_bytes(a.median_bytes)}"


def test_achieved_pinned_rate_against_the_probe_of_its_gpu_and_direction():
    s = snap()
    p = traced_cupti_process()
    probe = s.probe
    vs = rows_by_label(detail_rows(p, s))["1 MiB+ pinned"]
    h2d, d2h = probe.rate("h2d", "pinned"), probe.rate("d2h", "pinned")
    up, down = p.copies.bulk_of("h2d").achieved_bytes_per_s, p.copies.bulk_of("d2h").achieved_bytes_per_s
    assert vs[0].text == f"H2D {fmt_rate(up)} = {fmt_pct(up / h2d)} of probe {fmt_rate(h2d)} (GPU 0, 2.50 s)"
    assert vs[1].text == f"D2H {fmt_rate(down)} = {fmt_pct(down / d2h)} of probe {fmt_rate(d2h)} (GPU 0, 1.20 s)"
    assert vs[2].text.startswith(fmt_pct(p.copies.default_stream_share))
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
    p = make.moved(traced_cupti_process(), copies=make.copies("hooks", stats=[make.stat("h2d", "pinned", 2e9)]))
    rows = rows_by_label(detail_rows(p, snap()))
    assert "engine hooks" in rows["process"][0].text
    assert rows["H2D pinned"][0].text.split() == ["2.0", "GB/s", "n/a"]  # the rate and the count only
    assert rows["D2H pageable"][0].text.split() == ["n/a"] * 2  # not in the report: unknown, not 0
    assert "need GPU times" in rows["D2H pageable"][1].text
    assert "1 MiB+ pinned" not in rows  # no GPU times, nothing to hold against the probe


def test_an_untraced_process_says_how_to_trace_it_and_shows_its_estimate():
    s = snap(nodes=2)
    p = next(p for p in s.processes if p.pid == 4242)
    rows = rows_by_label(detail_rows(p, s))
    assert "est. (from /proc/PID/maps)" in rows["process"][0].text
    assert rows["pinned"][0].text == (f"{fmt_bytes(p.held.bytes)} held: pinned {fmt_bytes(p.held.pinned_bytes)} in"
                                      f" 1,200 mappings, write-combined {fmt_bytes(p.held.write_combined_bytes)}")
    assert "pinmon trace" in rows["copies"][0].text
    assert rows["GPU memory"][0].text == f"{fmt_bytes(p.placement.gpu_memory_bytes)} on GPU 0 (node 0)"
    assert rows["NUMA"][0].text == (f"node0 {fmt_bytes(240 * GIB)}, node1 {fmt_bytes(60 * GIB)};"
                                    f" local to its GPUs {fmt_pct(0.8)}")


def test_call_sites_are_quoted_printable_text_and_vmlck_shows_when_held():
    p = make.moved(traced_cupti_process(), vm_locked_bytes=3 * GIB)
    finding = Finding("mlock-not-pinned", "warning", "pid 8080", "m", "a", values={"pid": 8080})
    rows = rows_by_label(detail_rows(p, snap(), [finding]))
    sites = [r.text for r in rows["sites"]]
    assert sites == ['alloc "train_cupti.py:42"', 'pageable_copy "loader.py:118\\x1b[31m"']
    assert rows["VmLck"][0].text.startswith(fmt_bytes(3 * GIB)) and rows["VmLck"][0].style == "warning"
    assert not any("\x1b" in r.text for r in detail_rows(p, snap()))


def test_node_helpers():
    s = snap(nodes=2)
    p = next(p for p in s.processes if p.pid == 8080)
    assert main_node(p.placement.pinned_bytes_by_node) == ("1", 0.75) and node_cell(p) == "1 (75%)"
    assert local_share(p, s.gpus) == 0.25  # GPU 0 is on node 0
    assert node_cell(make.moved(p, pinned_bytes_by_node=None)) == "n/a"
    assert local_share(make.moved(p, gpu_indices=()), s.gpus) is None
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
    from pinmon.model import HostMemory, Snapshot
    from pinmon.tui.widgets.memory import memory_rows

    bare = make.process(1, None, source="traced", instrument="cupti")
    text = " ".join(r.text for r in detail_rows(bare, None))
    assert "copies n/a" not in text and "n/a (no copy figures" in text and "n/a" in text
    from pinmon.model import BulkCopies

    odd = make.moved(bare, copies=make.copies("cupti", stats=[make.stat("h2d", "pinned")],
                                              bulk=[BulkCopies("h2d", 1e9)], gpu_pci_bus_id="not a bus id"),
                     pinned_bytes_by_node={"0": -5, "zz": 0})
    rows = detail_rows(odd, Snapshot(time=T0, host=HostMemory(hostname="h")))
    assert any("its GPU is not in the snapshot" in r.text for r in rows)
    host = HostMemory(hostname="h", kernel_pinned_bytes=GIB, pinned_bytes_source="kernel")
    plain = [r.plain for r in memory_rows(host) + memory_rows(host, compact=True, width=10)]
    assert any("unattributed n/a" in r for r in plain) and any("explain n/a" in r for r in plain)


def test_a_vmpin_only_process_shows_what_it_holds():
    """An io_uring user: its held bytes are its VmPin, shown in the pinned row, not n/a."""
    p = make.process(99, "uring", vm_pinned_bytes=640 * MIB)
    rows = rows_by_label(detail_rows(p, snap()))
    assert rows["pinned"][0].text.startswith(f"{fmt_bytes(640 * MIB)} held: pinned n/a")
    assert rows["VmPin"][0].text.startswith(fmt_bytes(640 * MIB))


def test_an_attached_process_says_what_measured_it_and_its_copies_notes():
    c = make.copies("uprobes", stats=[make.stat("h2d", "pageable", 3e9)], notes=("2D copies not counted",))
    p = make.process(5, "server", source="attached", copies=c)
    rows = rows_by_label(detail_rows(p, snap()))
    assert "attached, uprobes on libcuda" in rows["process"][0].text
    assert rows["H2D pageable"][0].text.split()[:2] == ["3.0", "GB/s"]
    assert "H2D pinned" not in rows  # uprobes see every call: a kind without copies has no row
    texts = [r.text for r in rows["H2D pageable"]]
    assert any("2D copies not counted" in t for t in texts) and any("need GPU times" in t for t in texts)
    assert "1 MiB+ pinned" not in rows
    migrated = make.moved(p, copies=make.copies("hooks", notes=("pageable copies 2.60 GB/s in both directions",)))
    text = [r.text for r in detail_rows(migrated, snap())]
    assert "n/a (no copy figures in the tracer's report)" in text and any("2.60 GB/s" in t for t in text)


def test_a_row_whose_report_claimed_less_than_its_mappings_says_so():
    p = traced_cupti_process()
    plain = rows_by_label(detail_rows(p, snap()))["pinned"][0].text
    assert "counts less" not in plain
    flagged = dataclasses.replace(p, held=dataclasses.replace(p.held, report_understated=True))
    text = rows_by_label(detail_rows(flagged, snap()))["pinned"][0].text
    assert text == plain + " (its trace report counts less: its mappings' figure)"


def test_an_attached_process_shows_its_copies_sizes_allocations_and_registrations():
    """Uprobes see every call's size: the table has the count and the sizes (p50, p90, max) of each
    kind that had copies, write-combined apart, peer copies below; the allocations and the
    registrations as the engine counted them."""
    from .attach_fakes import attached_snapshot

    s = attached_snapshot()
    rows = {p.pid: rows_by_label(detail_rows(p, s)) for p in s.processes if p.source == "attached"}
    trainer, loader = rows[4242], rows[5151]
    assert trainer["copies"][0].text.split() == ["now", "count", "p50", "size", "p90", "size", "max", "size"]
    assert trainer["H2D pinned"][0].text.split() == ["32.0", "GB/s", "38,146", "8.0", "MiB", "8.0", "MiB", "64.0", "MiB"]
    assert "H2D pageable" not in trainer and "D2H pinned" in trainer
    assert any("over its 10.00 s window" in r.text for r in trainer["D2H pinned"])
    assert trainer["allocs"][0].text == ("12 in 10.00 s (1.2/s), median 4.0 KiB, max 8.0 MiB; write-combined 1;"
                                         " frees 3")
    assert trainer["registered"][0].text == ("2 (4.0 GiB), median 2.0 GiB, max 2.0 GiB; portable 2;"
                                             " unregistered 1")
    assert loader["D2H WC"][0].text.split()[:3] == ["50.0", "MB/s", "7,629"]
    assert any("or registered before the attach" in r.text for r in loader["D2H WC"])
    assert loader["peer"][0].text == "1.0 GB/s, 120 copies (GPU to GPU, not on the host link)"
    assert loader["allocs"][0].text == "none in 10.00 s" and "registered" not in loader


def test_an_attached_process_without_copies_says_so_over_its_window():
    c = make.copies("uprobes", window_s=10.0)
    rows = rows_by_label(detail_rows(make.process(5, "idle", source="attached", copies=c), snap()))
    assert rows["copies"][0].text == "none in its 10.00 s window"
