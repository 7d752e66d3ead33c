"""The collector on hand-made snapshots: values, labels, unknowns left out, caps, findings, errors."""

import pytest

from pinmon.export import ExportState, Refresher, build_registry, metrics_text
from pinmon.model import HostMemory, Snapshot
from tests import factories as make
from tests.factories import GIB, MIB, UUID0, UUID1

from .helpers import names, render, samples, value

G0 = {"gpu": "0", "uuid": UUID0, "pci_bus_id": "00000000:00:00.0"}


def test_empty_state_serves_only_the_exporter_health():
    text = render()
    assert names(text) == {"pinmon_snapshots_total", "pinmon_collection_errors_total", "pinmon_scrape_errors_total"}
    assert value(text, "pinmon_collection_errors_total", stage="snapshot") == 0


def test_gpu_values_and_labels():
    text = render([make.full_snapshot()])
    assert value(text, "pinmon_gpu_info", name="NVIDIA H200", pcie_method="counters", **G0) == 1
    assert value(text, "pinmon_gpu_up", **G0) == 1
    assert value(text, "pinmon_gpu_pcie_rx_bytes_per_second", **G0) == 1000
    assert value(text, "pinmon_gpu_pcie_tx_bytes_per_second", **G0) == 500
    assert value(text, "pinmon_gpu_pcie_link_gen", **G0) == 5
    assert value(text, "pinmon_gpu_pcie_link_width_max", **G0) == 16
    assert value(text, "pinmon_gpu_pcie_link_theoretical_bytes_per_second", **G0) == 63.0e9
    assert value(text, "pinmon_gpu_pcie_replays_total", **G0) == 3
    assert value(text, "pinmon_gpu_pcie_recoveries_total", **G0) == 7
    assert value(text, "pinmon_gpu_pcie_errors_total", **G0) == 2
    assert value(text, "pinmon_gpu_pcie_counter_events_total", counter="bad_tlp", **G0) == 2
    # An unsupported counter (None) is absent, not 0.
    assert value(text, "pinmon_gpu_pcie_counter_events_total", counter="lane_error") is None


def test_byte_counters_accumulate_link_bytes_once_per_snapshot():
    state = ExportState()
    for rx in (1000, 2000, 4000):
        state.add_snapshot(make.full_snapshot(gpus=[make.full_gpu(rx=rx, tx=rx // 2, interval=0.5)]))
    registry = build_registry(state)
    first, second = metrics_text(registry), metrics_text(registry)
    for text in (first, second):  # scraping twice must not count twice
        assert value(text, "pinmon_gpu_pcie_rx_bytes_total", **G0) == 7000
        assert value(text, "pinmon_gpu_pcie_tx_bytes_total", **G0) == 3500
        assert value(text, "pinmon_gpu_pcie_rx_bytes_per_second", **G0) == 8000  # the latest interval


def test_sampled_rates_make_no_byte_counter():
    text = render([make.full_snapshot(gpus=[make.full_gpu(method="sampled")])])
    assert value(text, "pinmon_gpu_pcie_rx_bytes_per_second", **G0) == 1000
    assert "pinmon_gpu_pcie_rx_bytes_total" not in names(text)
    assert value(text, "pinmon_gpu_info", pcie_method="sampled", **G0) == 1


def test_gpus_are_told_apart_by_uuid():
    text = render([make.full_snapshot(gpus=[make.full_gpu(), make.full_gpu(index=1, uuid=UUID1, rx=9)])])
    assert value(text, "pinmon_gpu_pcie_rx_bytes_total", uuid=UUID0) == 1000
    assert value(text, "pinmon_gpu_pcie_rx_bytes_total", uuid=UUID1, gpu=1) == 9


def test_lost_gpu_is_down_and_exports_no_readings():
    text = render([make.full_snapshot(gpus=[make.full_gpu(lost=True), make.full_gpu(index=1, uuid=UUID1)])])
    assert value(text, "pinmon_gpu_up", uuid=UUID0) == 0
    assert value(text, "pinmon_gpu_up", uuid=UUID1) == 1
    assert value(text, "pinmon_gpu_pcie_rx_bytes_per_second", uuid=UUID0) is None
    assert value(text, "pinmon_gpu_pcie_link_gen", uuid=UUID0) is None


def test_unknown_link_and_rates_are_left_out_not_zero():
    g = make.full_gpu(rx=None, tx=None, method=None, gen=None, width=None, theoretical_bytes_per_s=None)
    text = render([make.full_snapshot(gpus=[g])])
    for name in ("pinmon_gpu_pcie_rx_bytes_per_second", "pinmon_gpu_pcie_link_gen", "pinmon_gpu_pcie_link_width",
                 "pinmon_gpu_pcie_link_theoretical_bytes_per_second", "pinmon_gpu_pcie_rx_bytes_total"):
        assert name not in names(text), name
    assert value(text, "pinmon_gpu_pcie_link_gen_max", **G0) == 5
    assert value(text, "pinmon_gpu_info", pcie_method="", **G0) == 1


def test_host_values():
    text = render([make.full_snapshot()])
    assert value(text, "pinmon_host_info", hostname="box") == 1
    assert value(text, "pinmon_host_memory_total_bytes") == 128 * GIB
    assert value(text, "pinmon_host_memory_available_bytes") == 100 * GIB
    assert value(text, "pinmon_host_effective_memory_limit_bytes") == 96 * GIB
    assert value(text, "pinmon_host_pinned_bytes_estimate") == 10 * GIB
    assert value(text, "pinmon_host_mlocked_bytes") == 0  # a real 0 is exported
    assert value(text, "pinmon_host_memlock_limit_bytes") == 8 * MIB
    assert value(text, "pinmon_host_memlock_unlimited") == 0


def test_host_nulls_are_not_exported():
    host = HostMemory(hostname="box", memlock_unlimited=True)
    text = render([Snapshot(time=1.0, host=host)])
    host_names = {n for n in names(text) if n.startswith("pinmon_host_")}
    assert host_names == {"pinmon_host_info", "pinmon_host_memlock_unlimited"}
    assert value(text, "pinmon_host_memlock_unlimited") == 1


def test_processes_top_n_plus_other():
    text = render([make.full_snapshot(processes=make.full_processes(15))], top=10)
    series = [dict(labs) for (n, labs) in samples(text) if n == "pinmon_process_pinned_bytes"]
    assert len(series) == 11
    pids = {s["pid"] for s in series}
    assert pids == {str(100 + i) for i in range(5, 15)} | {"other"}
    # The rest: job0..job4 with 1..5 MiB pinned, 0..4 bytes write-combined.
    assert value(text, "pinmon_process_pinned_bytes", pid="other") == 15 * MIB
    assert value(text, "pinmon_process_write_combined_bytes", pid="other") == 10
    assert value(text, "pinmon_process_pinned_bytes", pid=114, name="job14", user="alice", source="est.") == 15 * MIB
    assert value(text, "pinmon_processes") == 15


def test_the_top_processes_are_those_holding_the_most_write_combined_and_vmpin_included():
    """An io_uring user (VmPin only) and a write-combined holder rank by all they hold, and
    process_held_bytes serves that figure; a row holding nothing known goes to "other"."""
    rows = (make.process(1, "small", pinned_bytes=MIB), make.process(2, "uring", vm_pinned_bytes=640 * MIB),
            make.process(3, "wc", pinned_bytes=MIB, write_combined_bytes=256 * MIB), make.process(4, "unknown"))
    text = render([make.full_snapshot(processes=rows)], top=2)
    assert {dict(labs)["pid"] for (n, labs) in samples(text) if n == "pinmon_process_held_bytes"} == {"2", "3", "other"}
    assert value(text, "pinmon_process_held_bytes", pid=2) == 640 * MIB
    assert value(text, "pinmon_process_pinned_bytes", pid=2) is None  # its pinned part is unknown, not 0
    assert value(text, "pinmon_process_held_bytes", pid=3) == 257 * MIB
    assert value(text, "pinmon_process_held_bytes", pid="other") == MIB


def test_process_source_label_and_zero_top():
    text = render([make.full_snapshot(processes=make.full_processes(3))], top=3)
    assert value(text, "pinmon_process_pinned_bytes", pid=100, source="traced") == MIB
    assert value(text, "pinmon_process_pinned_bytes", pid="other") == 0
    text = render([make.full_snapshot(processes=make.full_processes(3))], top=0)
    assert value(text, "pinmon_process_pinned_bytes", pid="other") == 6 * MIB


def test_probe_metrics():
    text = render([make.full_snapshot(time=1000.0)])
    common = {"gpu": "0", "size_bytes": str(64 * MIB)}
    assert value(text, "pinmon_probe_copy_bytes_per_second", memory="pinned", direction="h2d", **common) == 55e9
    assert value(text, "pinmon_probe_copy_bytes_per_second", memory="pageable", direction="d2h", **common) == 15.5e9
    assert value(text, "pinmon_probe_pinned_speedup_ratio", direction="h2d", **common) == pytest.approx(55 / 8.8)
    assert value(text, "pinmon_probe_pinned_link_share_ratio", direction="h2d", **common) == pytest.approx(55 / 63)
    assert value(text, "pinmon_probe_age_seconds", gpu=0) == 10.0
    assert value(text, "pinmon_probe_ok", gpu=0) == 1
    # The 4 KiB pinned row has no pageable partner: not a like-for-like figure.
    assert value(text, "pinmon_probe_copy_bytes_per_second", size_bytes=4096) is None


def test_no_probe_no_probe_metrics():
    text = render([make.full_snapshot(with_probe=False)])
    assert not {n for n in names(text) if n.startswith("pinmon_probe_")}


def test_findings_and_status():
    findings = [make.finding(), make.finding("pcie-link-degraded", "warning", "gpu0"),
                make.finding("pcie-link-degraded", "warning", "gpu0")]  # a duplicate must not break the scrape
    text = render([make.full_snapshot()], findings)
    assert value(text, "pinmon_finding", rule="pinned-ram-share", severity="critical", subject="host") == 1
    assert value(text, "pinmon_finding", rule="pcie-link-degraded", severity="warning", subject="gpu0") == 1
    assert value(text, "pinmon_status") == 2
    assert value(text, "pinmon_last_snapshot_timestamp_seconds") == 1000.0
    assert value(render([make.full_snapshot()], [make.finding(severity="warning")]), "pinmon_status") == 1
    assert value(render([make.full_snapshot()], [make.finding(severity="info")]), "pinmon_status") == 0
    assert value(render([make.full_snapshot()]), "pinmon_status") == 0


def test_a_failing_section_is_counted_and_the_rest_served(monkeypatch):
    from pinmon.export.families import gpu as gpu_section

    def boom(view):
        raise RuntimeError("bad value")

    monkeypatch.setattr(gpu_section, "families", boom)
    state = ExportState()
    state.add_snapshot(make.full_snapshot())
    registry = build_registry(state)
    text = metrics_text(registry)
    assert "pinmon_gpu_up" not in names(text)
    assert value(text, "pinmon_host_memory_total_bytes") == 128 * GIB
    assert value(text, "pinmon_scrape_errors_total") == 1
    assert value(metrics_text(registry), "pinmon_scrape_errors_total") == 2


class FlakySource:
    live = True

    def __init__(self, snaps):
        self.snaps = list(snaps)

    def snapshot(self):
        item = self.snaps.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    def close(self):
        pass


def test_a_source_that_raises_is_counted_and_the_last_good_data_served():
    errors = []
    state = ExportState()
    r = Refresher(FlakySource([make.full_snapshot(time=1.0), OSError("nvml gone"), OSError("again")]), state,
                  advisor=lambda h: [make.finding()], on_error=lambda stage, e: errors.append((stage, str(e))))
    for _ in range(3):
        snap = r.read()
        if snap is not None:
            r.publish(snap)
    text = metrics_text(build_registry(state))
    assert value(text, "pinmon_collection_errors_total", stage="snapshot") == 2
    assert value(text, "pinmon_last_snapshot_timestamp_seconds") == 1.0
    assert value(text, "pinmon_status") == 2
    assert errors == [("snapshot", "nvml gone")]  # reported once, counted every time


def test_an_advisor_that_raises_keeps_the_previous_findings():
    calls = []

    def advisor(history):
        calls.append(len(history))
        if len(calls) > 1:
            raise ValueError("rule bug")
        return [make.finding()]

    state = ExportState()
    r = Refresher(FlakySource([make.full_snapshot(time=1.0), make.full_snapshot(time=2.0)]), state, advisor)
    r.publish(r.read())
    r.publish(r.read())
    text = metrics_text(build_registry(state))
    assert value(text, "pinmon_collection_errors_total", stage="advise") == 1
    assert value(text, "pinmon_last_snapshot_timestamp_seconds") == 2.0
    assert value(text, "pinmon_finding", rule="pinned-ram-share") == 1


def test_refresher_thread_plays_a_replay_and_holds_the_last_snapshot():
    class Finite(FlakySource):
        live = False
        interval_s = 1.0

        def snapshot(self):
            return self.snaps.pop(0) if self.snaps else None

    state = ExportState(live=False)
    r = Refresher(Finite([make.full_snapshot(time=t) for t in (10.0, 10.5, 11.0)]), state, lambda h: [], speed=50)
    r.start()
    assert r.finished.wait(5)
    r.stop()
    text = metrics_text(build_registry(state))
    assert value(text, "pinmon_last_snapshot_timestamp_seconds") == 11.0
    assert value(text, "pinmon_replay_finished") == 1
    assert value(text, "pinmon_snapshots_total") == 3
    assert value(text, "pinmon_gpu_pcie_rx_bytes_total", **G0) == 3000


def test_label_values_are_escaped_and_on_one_line():
    p = make.moved(make.full_processes(1)[0], name='we"ird\nname\\')
    text = render([make.full_snapshot(processes=[p])])
    assert value(text, "pinmon_process_pinned_bytes", name='we"ird name\\') == MIB


def test_an_integer_past_any_float_is_left_out_not_the_section():
    # JSON integers have no bound: a recording may hold one no float can carry.
    text = render([make.full_snapshot(mem_total_bytes=10 ** 400)])
    assert value(text, "pinmon_host_memory_total_bytes") is None
    assert value(text, "pinmon_host_memory_available_bytes") == 100 * GIB  # the rest of the section
    assert value(text, "pinmon_scrape_errors_total") == 0


def test_findings_per_rule_cover_every_registered_rule_and_severity():
    from pinmon.advise.registry import REGISTRY

    findings = [make.finding(), make.finding("pcie-link-degraded", "warning", "gpu0"),
                make.finding("pcie-link-degraded", "warning", "gpu1"),
                make.finding("pcie-link-degraded", "warning", "gpu1")]  # a repeat is one series, counted once
    text = render([make.full_snapshot()], findings)
    per_rule = {(dict(labels)["rule"], dict(labels)["severity"]): v
                for (name, labels), v in samples(text).items() if name == "pinmon_rule_findings"}
    assert set(per_rule) == {(r.id, s) for r in REGISTRY for s in r.severities}
    assert per_rule[("pinned-ram-share", "critical")] == 1 and per_rule[("pcie-link-degraded", "warning")] == 2
    assert per_rule[("pcie-link-degraded", "info")] == 0 and per_rule[("gpu-lost", "critical")] == 0
    assert "pinmon_rule_findings" not in names(render())  # nothing before the first snapshot
