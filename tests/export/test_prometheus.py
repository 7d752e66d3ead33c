"""End to end with a real Prometheus server: it scrapes ``pinmon export --replay``, the values it stores
are the recording's, the contrib alert rules load and evaluate, and every dashboard query runs.

Loopback only. Skipped only where the ``prometheus`` binary is absent (.ci/run installs it).
"""
import json
import shutil
import signal
import socket
import subprocess
import urllib.parse
import urllib.request

import pytest

from tests.cli.commands.test_export import start_exporter
from tests.factories import GIB, UUID0
from tests.waiting import wait_until

from .helpers import recording_snapshots, write_recording
from .test_contrib import ALERTS, dashboard_exprs

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="prometheus binary not installed "
                                "(Debian package prometheus; .ci/run installs it)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode())


def query(base, expr):
    data = get_json(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert data["status"] == "success", (expr, data)
    return data["data"]["result"]


def one(base, expr):
    result = query(base, expr)
    assert len(result) == 1, (expr, result)
    return float(result[0]["value"][1]), result[0]["metric"]


def wait_for_prometheus(what, check, timeout_s, proc, log):
    """``wait_until`` that stops at once if Prometheus has exited, with its log in the failure."""
    def ready():
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited {proc.returncode}")
        return check()
    try:
        return wait_until(ready, timeout_s=timeout_s, interval_s=0.25, what=what, retry_on=(OSError, ValueError))
    except (AssertionError, RuntimeError) as e:
        raise AssertionError(f"{what}: {e}\n{log.read_text()}") from None


def stop(proc, timeout=15):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_real_prometheus_scrapes_the_recordings_values(tmp_path):
    snaps = recording_snapshots()
    rec = write_recording(tmp_path / "rec.jsonl.gz", snaps)
    exporter = prom = None
    log = tmp_path / "prometheus.log"
    try:
        exporter, url = start_exporter(["--replay", rec, "--speed", "20", "--listen", "127.0.0.1:0"])
        target = urllib.parse.urlsplit(url).netloc
        shutil.copy(ALERTS, tmp_path / "pinmon-alerts.yml")
        (tmp_path / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "rule_files:\n  - pinmon-alerts.yml\n"
            "scrape_configs:\n  - job_name: pinmon\n    static_configs:\n"
            f"      - targets: ['{target}']\n")
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with open(log, "w") as log_f:
            prom = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                     f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                                    stdout=log_f, stderr=subprocess.STDOUT, cwd=tmp_path)
        wait_for_prometheus("prometheus ready", lambda: urllib.request.urlopen(f"{base}/-/ready", timeout=2).status == 200,
                   60, prom, log)
        # The replay has ended and been held once pinmon_replay_finished reads 1 in Prometheus.
        wait_for_prometheus("a scrape of the finished replay", lambda: query(base, "pinmon_replay_finished == 1"), 60, prom, log)

        up, _ = one(base, 'up{job="pinmon"}')
        assert up == 1
        last = snaps[-1]
        g = last.gpus[0]
        rx_total, labels = one(base, "pinmon_gpu_pcie_rx_bytes_total")
        assert rx_total == sum(s.gpus[0].pcie.rx_bytes for s in snaps)
        assert labels["uuid"] == UUID0 and labels["gpu"] == "0" and labels["pci_bus_id"] == g.pci_bus_id
        assert one(base, "pinmon_gpu_pcie_tx_bytes_total")[0] == sum(s.gpus[0].pcie.tx_bytes for s in snaps)
        assert one(base, "pinmon_gpu_pcie_rx_bytes_per_second")[0] == g.pcie.rx_bytes_per_s
        assert one(base, "pinmon_gpu_pcie_link_gen")[0] == g.link.gen
        assert one(base, "pinmon_gpu_pcie_link_width_max")[0] == g.link.width_max
        assert one(base, "pinmon_gpu_up")[0] == 1
        assert one(base, 'pinmon_gpu_info{name="NVIDIA H200", pcie_method="counters"}')[0] == 1
        assert one(base, "pinmon_host_pinned_bytes_estimate")[0] == last.host.pinned_bytes_est == 60 * GIB
        assert one(base, "pinmon_host_effective_memory_limit_bytes")[0] == last.host.effective_mem_limit_bytes
        assert one(base, "pinmon_host_memlock_limit_bytes")[0] == last.host.memlock_limit_bytes
        assert one(base, 'pinmon_process_pinned_bytes{pid="7", name="hog", user="bob", source="est."}')[0] == 60 * GIB
        assert one(base, 'pinmon_process_pinned_bytes{pid="other"}')[0] == 0
        assert one(base, 'pinmon_finding{rule="pinned-ram-share", severity="critical", subject="host"}')[0] == 1
        assert one(base, "pinmon_status")[0] == 2
        assert one(base, "pinmon_last_snapshot_timestamp_seconds")[0] == last.time
        probe = last.probe
        assert one(base, 'pinmon_probe_copy_bytes_per_second{memory="pinned", direction="h2d"}')[0] == \
            probe.rate("h2d", "pinned")
        assert one(base, 'pinmon_probe_age_seconds')[0] == pytest.approx(last.time - probe.time)
        assert one(base, 'sum(pinmon_collection_errors_total)')[0] == 0
        assert one(base, 'pinmon_scrape_errors_total')[0] == 0

        # The contrib rules load, evaluate without error, and the critical pinned share is seen.
        def rules_evaluated():
            groups = get_json(f"{base}/api/v1/rules")["data"]["groups"]
            rules = [r for grp in groups for r in grp["rules"]]
            return rules if rules and all(r.get("lastEvaluation", "").startswith("20") for r in rules) else None
        rules = wait_for_prometheus("rule evaluation", rules_evaluated, 30, prom, log)
        assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]
        # "pending" at first: the rule holds for a minute before it fires.
        wait_for_prometheus("the pinned-ram-share alert", lambda: [a for a in get_json(f"{base}/api/v1/alerts")["data"]["alerts"]
                                                          if a["labels"]["alertname"] == "PinmonPinnedRamShareCritical"
                                                          and a["state"] in ("pending", "firing")], 30, prom, log)

        # Every dashboard query is valid PromQL against real data ($__rate_interval is Grafana's).
        _, exprs, _ = dashboard_exprs()
        for expr in exprs:
            expr = expr.replace("$__rate_interval", "1m").replace('=~"$instance"', '=~".+"')
            query(base, expr)
        assert query(base, 'rate(pinmon_gpu_pcie_rx_bytes_total{instance=~".+"}[1m]) or '
                           'pinmon_gpu_pcie_rx_bytes_per_second{instance=~".+"}')
    finally:
        stop(prom)
        stop(exporter)
        shutil.rmtree(tmp_path / "tsdb", ignore_errors=True)
    assert exporter.returncode == 0
