"""contrib/: the alert rules pass promtool (syntax and unit tests), the dashboard asks only for served metrics."""
import dataclasses
import json
import os
import re
import shutil
import subprocess

import pytest

from pinmon.export import ExportState
from tests import factories as make

from .helpers import names, render

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTRIB = os.path.join(ROOT, "contrib")
ALERTS = os.path.join(CONTRIB, "prometheus", "pinmon-alerts.yml")
METRIC = re.compile(r"\bpinmon_[a-z0-9_]+")


def served_names():
    """Every sample name the exporter serves for a full snapshot (probe, processes, findings, replay)."""
    state = ExportState(live=False)
    state.finish_replay()
    group = make.cgroup(limit_bytes=4 << 30, current_bytes=3 << 30, oom_kills=1,
                        oom_kills_at_start=0, pinned_bytes=2 << 30, write_combined_bytes=1 << 20,
                        vm_pinned_bytes=1 << 20, processes=1)
    snap = dataclasses.replace(make.full_snapshot(), cgroups=(group,))
    return names(render([snap], [make.finding()], state=state))


def dashboard_exprs():
    with open(os.path.join(CONTRIB, "grafana", "pinmon-dashboard.json")) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    queries = [v["query"] for v in dash.get("templating", {}).get("list", []) if isinstance(v.get("query"), str)]
    return dash, exprs, queries


def test_dashboard_uses_only_served_metrics():
    dash, exprs, queries = dashboard_exprs()
    assert exprs and len(dash["panels"]) >= 6
    used = {m for e in exprs + queries for m in METRIC.findall(e)}
    missing = used - served_names()
    assert not missing, f"dashboard asks for metrics the exporter does not serve: {sorted(missing)}"
    for wanted in ("pinmon_gpu_pcie_rx_bytes_total", "pinmon_gpu_pcie_tx_bytes_per_second", "pinmon_gpu_pcie_link_gen",
                   "pinmon_gpu_pcie_link_width", "pinmon_host_pinned_bytes_estimate", "pinmon_process_held_bytes",
                   "pinmon_finding"):
        assert wanted in used, wanted


def test_alert_rules_use_only_served_metrics():
    with open(ALERTS) as f:
        text = f.read()
    exprs = re.findall(r"expr:\s*(\|[\s\S]*?(?=\n\s+for:|\n\s+labels:)|.+)", text)
    used = {m for e in exprs for m in METRIC.findall(e)}
    assert used and not used - served_names(), sorted(used - served_names())


def promtool():
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool is not installed (Debian package prometheus; .ci/run installs it)")
    return path


def test_promtool_check_rules():
    p = subprocess.run([promtool(), "check", "rules", ALERTS], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


def test_promtool_alert_unit_tests():
    # Runs from tests/export so the test file's relative rule_files path resolves.
    here = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run([promtool(), "test", "rules", "alerts_test.yml"], cwd=here, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


def test_promtool_check_scrape_example():
    p = subprocess.run([promtool(), "check", "config", os.path.join(CONTRIB, "prometheus", "scrape.yml")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
