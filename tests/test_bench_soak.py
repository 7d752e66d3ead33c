"""A short soak (3 minutes of recording at 1 Hz, 8 GPUs) through bench/soak.py: every stage runs.

The 24-hour figures live in bench/results/soak.json; timing is not asserted here.
"""
import json

import pytest

from tests.bench_scripts import load_bench

pytestmark = pytest.mark.hardening


def test_short_soak(tmp_path):
    soak = load_bench("soak")
    out = tmp_path / "soak.json"
    assert soak.main(["--hours", str(180 / 3600), "--tui-snapshots", "12", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["write"]["snapshots"] == 180
    rep = r["replay_advisor_exporter"]
    assert rep["snapshots"] == 180 and rep["notices"] == [] and isinstance(rep["findings_by_rule"], dict)
    assert r["tui"].get("snapshots") == 12 or "skipped" in r["tui"]


def test_synthetic_day_fires_the_findings_it_is_built_for():
    from pinmon.advise import advise

    soak = load_bench("soak")
    rules = set()
    for i in (7_300 + 3_600 * 0, 31_000):  # loader hour (pinned share), degraded-link hour
        rules |= {f.rule for f in advise([soak.synth_snapshot(i)])}
    assert {"pinned-ram-share", "pcie-link-degraded"} <= rules
