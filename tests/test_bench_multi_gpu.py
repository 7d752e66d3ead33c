"""bench/multi_gpu_batch.sh's Python pieces without a GPU: the load's arguments and timeline, the box
facts' parsing and the choice of GPUs per NUMA node, the NVML view of the first GPUs, the watch, and
the summariser's verdicts on synthetic results (a run within 2%, one GPU off, two GPUs swapped)."""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest

from tests.bench_scripts import load_bench
from tests.fakes.fake_pynvml import FakeNvml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SNAPS = os.path.join(ROOT, "tests", "tui", "__snapshots__", "test_eight_gpus")
GB = 1e9


@pytest.fixture(scope="module")
def load_mod():
    return load_bench("multi_load")


@pytest.fixture(scope="module")
def gpu_mod():
    return load_bench("multi_gpu")


@pytest.fixture(scope="module")
def summ():
    return load_bench("multi_gpu_summary")


# --- multi_load ----------------------------------------------------------------------------------

def test_each_gpu_gets_its_own_rate_and_the_sizes_vary(load_mod):
    rates = [load_mod.target_rate(k) for k in range(8)]
    assert rates == [6e9 * (k + 1) for k in range(8)]
    assert len({load_mod.copy_size(k) for k in range(8)}) == 5


def test_parse_gpus(load_mod):
    assert load_mod.parse_gpus("all", 8) == list(range(8))
    assert load_mod.parse_gpus("0,2,5", 8) == [0, 2, 5]
    for bad in ("8", "x", "", "-1"):
        with pytest.raises(ValueError, match=r"not a GPU list|no CUDA device"):
            load_mod.parse_gpus(bad, 8)


def test_timeline_keeps_one_point_per_step_and_the_last(load_mod):
    tl = load_mod.Timeline(step_s=0.1)
    for k in range(25):
        tl.add(100.0 + k * 0.01, k * 10)
    points = tl.finish()
    assert points[0] == [100.0, 0] and points[-1] == [100.24, 240]
    assert len(points) == 4  # 100.0, 100.1, 100.2 (rounding aside), then the last
    assert all(b - a >= 0.1 - 1e-9 for (a, _), (b, _) in itertools.pairwise(points[:-1]))


def test_local_cpus_reads_the_devices_cpulist_in_nvml_spelling(load_mod, tmp_path):
    dev = tmp_path / "bus" / "pci" / "devices" / "0000:17:00.0"
    dev.mkdir(parents=True)
    (dev / "local_cpulist").write_text("0-3,8\n")
    assert load_mod.local_cpus("00000000:17:00.0", str(tmp_path)) == {0, 1, 2, 3, 8}
    assert load_mod.local_cpus("0000:17:00.0", str(tmp_path)) == {0, 1, 2, 3, 8}
    assert load_mod.local_cpus("00000000:99:00.0", str(tmp_path)) is None
    assert load_mod.local_cpus(None, str(tmp_path)) is None


def test_load_without_cupy_writes_why_and_exits_1(load_mod, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    out = tmp_path / "load.json"
    assert load_mod.main([str(out), "--seconds", "1"]) == 1
    doc = json.loads(out.read_text())
    assert doc["gpus"] == [] and "cupy" in doc["error"].lower()
    assert capsys.readouterr().err.count("\n") == 1


def test_load_rejects_bad_numbers(load_mod):
    with pytest.raises(SystemExit) as e:
        load_mod.main(["/nonexistent/x.json", "--seconds", "0"])
    assert e.value.code == 2


# --- multi_gpu: facts, pick, FirstGpus, watch, scale ---------------------------------------------

def test_parse_smi_csv(gpu_mod):
    text = "0, 00000000:17:00.0, NVIDIA H200, 5, 5, 16, 16\n1, 00000000:27:00.0, NVIDIA H200, 1, 5, 16, 16\n\nbad\n"
    rows = gpu_mod.parse_smi_csv(text)
    assert rows[1] == {"index": 1, "pci.bus_id": "00000000:27:00.0", "name": "NVIDIA H200",
                       "pcie.link.gen.current": 1, "pcie.link.gen.max": 5, "pcie.link.width.current": 16,
                       "pcie.link.width.max": 16}
    assert len(rows) == 2
    assert gpu_mod.parse_smi_csv("0, x, y, [N/A], 5, 16, 16")[0]["pcie.link.gen.current"] == "[N/A]"


def _box(nodes, per_node=4):
    gpus = [{"index": k, "pinmon_numa_node": nodes[k // per_node] if nodes else None} for k in range(8)]
    return {"gpus": gpus, "host": {"nodes": list(nodes), "memory_nodes": list(nodes)}}


def test_pick_first_gpu_of_each_node_and_a_far_node(gpu_mod):
    box = _box((0, 1))
    assert gpu_mod.pick("nodes", box) == ["0 0", "4 1"]
    assert gpu_mod.pick("remote", box) == ["0 0 1"]
    one = _box((0,), per_node=8)
    assert gpu_mod.pick("nodes", one) == ["0 0"]
    assert gpu_mod.pick("remote", one) == []
    assert gpu_mod.pick("remote", {"gpus": [{"index": 0, "pinmon_numa_node": None}], "host": {}}) == []
    unknown = _box(())
    unknown["host"] = {"nodes": [0, 1], "memory_nodes": [0, 1]}
    assert gpu_mod.pick("nodes", unknown) == ["0 unknown", "7 unknown"]
    assert gpu_mod.pick("remote", unknown) == []


def test_pick_cli_on_a_missing_file_says_one_line(gpu_mod, tmp_path, capsys):
    assert gpu_mod.main(["pick", "nodes", str(tmp_path / "none.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_sysfs_node_and_host_nodes(gpu_mod, tmp_path):
    dev = tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:17:00.0"
    dev.mkdir(parents=True)
    (dev / "numa_node").write_text("1\n")
    assert gpu_mod.sysfs_node_text("00000000:17:00.0", str(tmp_path / "sys")) == "1"
    assert gpu_mod.sysfs_node_text("00000000:18:00.0", str(tmp_path / "sys")) is None
    base = tmp_path / "sys" / "devices" / "system" / "node"
    for n, cpus in ((0, "0-3"), (1, "4-7")):
        (base / f"node{n}").mkdir(parents=True)
        (base / f"node{n}" / "cpulist").write_text(cpus + "\n")
        (base / f"node{n}" / "meminfo").write_text(f"Node {n} MemTotal:       1000 kB\n")
    (base / "online").write_text("0-1\n")
    (base / "has_memory").write_text("0-1\n")
    h = gpu_mod.host_nodes(str(tmp_path))
    assert h["nodes"] == [0, 1] and h["memory_nodes"] == [0, 1]
    assert h["cpus"] == {"0": "0-3", "1": "4-7"} and h["cpu_count"] == {"0": 4, "1": 4}
    assert h["mem_total_kib"] == {"0": 1000, "1": 1000}


def test_first_gpus_shows_the_collector_only_the_first(gpu_mod):
    from pinmon.collect.live import LiveCollector

    nvml = FakeNvml(8)
    with LiveCollector(nvml=gpu_mod.FirstGpus(nvml, 1)) as col:
        assert [g.index for g in col.snapshot().gpus] == [0]
    with LiveCollector(nvml=gpu_mod.FirstGpus(FakeNvml(2), 5)) as col:
        assert len(col.snapshot().gpus) == 2


def test_scale_compares_all_gpus_with_one(gpu_mod, monkeypatch):
    res = gpu_mod.scale(3, nvml=FakeNvml(8), settle_s=0.0)
    assert res["one_gpu"]["gpus"] == 1 and res["all_gpus"]["gpus"] == 8
    assert res["ratio_all_over_one_cpu"] > 0


def test_scale_without_nvml_has_no_ratio(gpu_mod):
    nvml = FakeNvml(8)
    nvml.fail("nvmlInit", "library_not_found")
    res = gpu_mod.scale(2, nvml=nvml, settle_s=0.0)
    assert res["ratio_all_over_one_cpu"] is None and res["all_gpus"]["nvml_error"]


def test_watch_rows_carry_every_gpus_bus_id_and_link_bytes(gpu_mod):
    from pinmon.collect.live import LiveCollector

    res = gpu_mod.watch(0.35, 0.1, collector=LiveCollector(interval_s=0.1, nvml=FakeNvml(3)))
    assert len(res["snapshots"]) == 3
    rows = res["snapshots"][-1]["gpus"]
    assert [r["index"] for r in rows] == [0, 1, 2]
    assert rows[2]["pci_bus_id"] == "00000000:37:00.0"
    assert set(rows[0]) >= {"rx_bytes", "interval_s", "method", "gen", "width"}


# --- the summariser ------------------------------------------------------------------------------

T0 = 1_000_000.0


def synthetic(errors=None, swap=None, n=8, seconds=20, method="gpm"):
    """A load of ``n`` GPUs at 6, 12 ... GB/s from T0 to T0 + seconds, and a watch at 1 Hz whose RX
    link bytes are payload x 1.078 x (1 + errors[k]); ``swap`` (a, b) files GPU a's reading under b's
    bus id and the other way round."""
    errors = errors or {}
    bus = [f"0000:{0x17 + 0x10 * k:02x}:00.0" for k in range(n)]
    nvml_bus = [f"00000000:{0x17 + 0x10 * k:02X}:00.0" for k in range(n)]
    gpus = []
    for k in range(n):
        rate = 6e9 * (k + 1)
        timeline = [[T0 + s * 0.5, rate * s * 0.5] for s in range(2 * seconds + 1)]
        gpus.append({"cuda_index": k, "pci_bus_id": bus[k], "target_bytes_per_s": rate, "copy_bytes": 1 << 28,
                     "payload_bytes": rate * seconds, "start": T0, "end": T0 + seconds, "timeline": timeline})
    snaps = []
    for s in range(-3, seconds + 3):  # idle intervals before and after the load, outside the window
        t = T0 + s + 1
        rows = []
        for k in range(n):
            src = k
            if swap and k in swap:
                src = swap[1] if k == swap[0] else swap[0]
            loaded = T0 + 1 <= t <= T0 + seconds
            rx = 6e9 * (src + 1) * 1.078 * (1 + errors.get(src, 0.0)) if loaded else 1e6
            rows.append({"index": k, "pci_bus_id": nvml_bus[k], "method": method,
                         "rx_bytes": None if method == "sampled" else int(rx), "interval_s": 1.0,
                         "gen": 5, "width": 16})
        snaps.append({"time": t, "gpus": rows})
    return {"gpus": gpus}, {"snapshots": snaps}


def test_payload_between_interpolates(summ):
    tl = [[0.0, 0], [1.0, 100], [2.0, 300]]
    assert summ.payload_between(tl, 0.5, 1.5) == pytest.approx(50 + 100)
    assert summ.payload_between(tl, -1, 5) == 300
    assert summ.payload_at([], 3) == 0


def test_accuracy_within_two_percent_passes(summ):
    load, watch = synthetic(errors={3: 0.015, 6: -0.019})
    res = summ.accuracy(load, watch)
    assert res["pass"] is True and res["mixed_up"] == []
    assert len(res["gpus"]) == 8
    g3 = res["gpus"][3]
    assert g3["ratio_corrected"] == pytest.approx(1.015, abs=1e-6)
    assert g3["intervals"] == 19  # the first second of the load settles, then 19 whole intervals
    assert g3["nearest_reading_gpu"] == g3["pci_bus_id"] == "0000:47:00.0"


def test_accuracy_one_gpu_off_fails_that_gpu(summ):
    res = summ.accuracy(*synthetic(errors={5: 0.03}))
    assert res["pass"] is False
    assert [g["cuda_index"] for g in res["gpus"] if not g["pass"]] == [5]


def test_accuracy_two_gpus_swapped_are_mixed_up(summ):
    res = summ.accuracy(*synthetic(swap=(1, 6)))
    assert res["pass"] is False
    assert sorted(res["mixed_up"]) == ["0000:27:00.0", "0000:77:00.0"]


def test_accuracy_without_exact_bytes_fails_with_a_reason(summ):
    res = summ.accuracy(*synthetic(method="sampled"))
    assert res["pass"] is False
    assert all("no exact link bytes" in g["reason"] for g in res["gpus"])


def test_accuracy_with_a_failed_load(summ):
    load, watch = synthetic()
    load["gpus"][2] = {"cuda_index": 2, "error": "CUDARuntimeError: out of memory"}
    res = summ.accuracy(load, watch)
    assert res["pass"] is False and len(res["gpus"]) == 7 and res["load_errors"][0]["cuda_index"] == 2
    no_cuda = summ.accuracy({"error": "no CUDA device to load", "gpus": []}, watch)
    assert no_cuda["pass"] is None


def _eight_gpu_screens(swap=()):
    """The load and watch under the fake eight-GPU snapshots (GPU k's link rate fakes.multi_rx(k));
    ``swap`` (a, b): the screen's GPU a is load b's GPU and the other way round."""
    from tests.tui.fakes import multi_rx

    load = {"gpus": [{"pci_bus_id": f"0000:{k:02x}:00.0", "payload_bytes": multi_rx(k) / 1.078 * 10,
                      "start": 0.0, "end": 10.0} for k in range(8)]}

    def bus(k):
        if k in swap:
            k = swap[1] if k == swap[0] else swap[0]
        return f"00000000:{k:02X}:00.0"

    watch = {"snapshots": [{"gpus": [{"index": k, "pci_bus_id": bus(k)} for k in range(8)]}]}
    return load, watch


def test_screenshots_of_eight_gpus_at_80x24(summ):
    paths = [os.path.join(SNAPS, name) for name in ("test_eight_gpus_tabs[overview-80x24].svg",
                                                    "test_eight_gpus_tabs[gpus-80x24].svg",
                                                    "test_eight_gpus_last_selected_80x24.svg")]
    res = summ.screenshots(paths, *_eight_gpu_screens())
    assert res["gpus_seen"] == list(range(8)) and res["mixed_up"] == []
    assert res["pass"] is True
    assert res["shots"]["test_eight_gpus_tabs[overview-80x24].svg"] == {"0": 5.0e9, "1": 10.1e9, "2": 15.2e9}
    # GPUs 2 and 5 swapped between the screen's index and the loads: each shows the other's traffic.
    swapped = summ.screenshots(paths, *_eight_gpu_screens((2, 5)))
    assert swapped["pass"] is False and {m["gpu"] for m in swapped["mixed_up"]} == {2, 5}
    # Only the first screen: GPUs 3-7 never shown.
    assert summ.screenshots(paths[:1], *_eight_gpu_screens())["pass"] is False


def test_svg_lines_keep_columns(summ):
    with open(os.path.join(SNAPS, "test_eight_gpus_tabs[overview-80x24].svg"), encoding="utf-8") as f:
        lines = summ.svg_lines(f.read())
    assert len(lines) == 24
    assert any(line.startswith("  GPU 2 Gen4 x16 DEGRADED  RX 15.2 GB/s") for line in lines)


def test_overhead_scale_probe_numa_verdicts(summ):
    ok = {"tui": {"cpu_share": 0.006}, "nvitop": {"cpu_share": 0.008}}
    bad = {"tui": {"cpu_share": 0.009}, "nvitop": {"cpu_share": 0.008}}
    assert summ.overhead({"tui_first": ok, "nvitop_first": ok})["pass"] is True
    assert summ.overhead({"tui_first": ok, "nvitop_first": bad})["pass"] is False
    assert summ.overhead({"tui_first": ok, "nvitop_first": None})["pass"] is None
    assert summ.overhead({"tui_first": {"tui": {"cpu_share": 0.01}, "nvitop": {"skipped": "x"}}})["pass"] is None

    real = {"one_gpu": {"snapshot_cpu_ms": 4.0, "gpus": 1}, "all_gpus": {"snapshot_cpu_ms": 7.0, "gpus": 8},
            "ratio_all_over_one_cpu": 1.75}
    assert summ.scale(real, None)["pass"] is True
    assert summ.scale(dict(real, ratio_all_over_one_cpu=2.4), None)["pass"] is False
    assert summ.scale({"ratio_all_over_one_cpu": None}, None)["pass"] is None

    def entry(k, h2d, d2h, link=63e9):
        ms = [{"kind": "copy", "memory": "pinned", "direction": d, "size_bytes": size, "bytes_per_s": v * f}
              for d, v in (("h2d", h2d), ("d2h", d2h)) for size, f in ((1 << 20, 0.5), (64 << 20, 1.0))]
        return {"cuda_index": k, "pci_bus_id": f"0000:{k:02x}:00.0",
                "result": {"status": "ok", "link_theoretical_bytes_per_s": link, "measurements": ms}}

    doc = {"results": [entry(0, 55e9, 55.1e9), entry(1, 50e9, 55e9)]}
    res = summ.probe(doc, 21.5, None)
    assert res["pass"] is False and [g["pass"] for g in res["gpus"]] == [True, False]
    assert res["gpus"][0]["h2d_share"] == pytest.approx(55 / 63) and res["wall_s"] == 21.5
    # Idle, the link may read Gen1: the share is against the rated link from the box facts.
    idle = {"results": [entry(0, 55e9, 55.1e9, link=4e9)]}
    box = {"gpus": [{"pci.bus_id": "00000000:00:00.0", "pcie.link.gen.max": 5, "pcie.link.width.max": 16}]}
    assert summ.probe(idle, 3.0, box)["gpus"][0]["h2d_share"] == pytest.approx(55 / 63.0, rel=1e-3)
    assert summ.probe({"results": [], "reason": "probe unavailable: x"}, 0.2, None)["pass"] is None

    holder = {"pid": 4242, "gpu": 0, "node": 1}
    check = {"status": "warning", "findings": [{"rule": "pinned-numa-remote", "values": {"pid": 4242}}]}
    assert summ.numa_remote(holder, check)["pass"] is True
    assert summ.numa_remote(holder, {"findings": [{"rule": "pinned-numa-remote", "values": {"pid": 1}}]})["pass"] is False
    assert summ.numa_remote(dict(holder, error="OSError: x"), check)["pass"] is False
    assert summ.numa_remote(None, check)["pass"] is None
    two_nodes = {"host": {"nodes": [0, 1]}, "gpus": [{"index": 0, "pinmon_numa_node": None}]}
    assert "no GPU's NUMA node is known" in summ.numa_remote(None, None, two_nodes)["reason"]
    assert "one NUMA node" in summ.numa_remote(None, None, {"host": {"nodes": [0]}, "gpus": []})["reason"]


def test_numa_probe_figures_per_node(summ):
    ms = [{"kind": "copy", "memory": "pinned", "direction": d, "size_bytes": 64 << 20, "bytes_per_s": v,
           "host_numa_node": n} for n, d, v in ((0, "h2d", 54e9), (0, "d2h", 55e9), (1, "h2d", 40e9), (1, "d2h", 38e9))]
    out = summ.numa_probe([{"results": [{"cuda_index": 0, "pci_bus_id": "0000:17:00.0",
                                         "result": {"status": "ok", "measurements": ms}}]}])
    assert out[0]["nodes"]["1"]["h2d_pinned_bytes_per_s"] == 40e9 and out[0]["nodes"]["0"]["d2h_pinned_bytes_per_s"] == 55e9


def test_summary_cli_end_to_end(summ, tmp_path):
    load, watch = synthetic()
    (tmp_path / "load.json").write_text(json.dumps(load))
    (tmp_path / "watch.json").write_text(json.dumps(watch))
    (tmp_path / "probe_all_time.txt").write_text("wall 12.50 s, exit 0\n")
    (tmp_path / "probe_all.json").write_text(json.dumps({"results": []}))
    assert summ.main([str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["goals"]["accuracy"]["pass"] is True
    assert doc["goals"]["probe"]["wall_s"] == 12.5
    assert doc["goals"]["overhead"]["pass"] is None and doc["goals"]["numa"]["pass"] is None
    assert summ.main([str(tmp_path / "missing")]) == 2


# --- the batch script and the screenshot options -------------------------------------------------

def test_batch_script_parses_and_names_every_part():
    script = os.path.join(ROOT, "bench", "multi_gpu_batch.sh")
    assert subprocess.run(["bash", "-n", script]).returncode == 0
    text = open(script).read()
    for part in ["box", "load", "probe", "numa", "scale", "overhead", "summary"]:
        assert f"\n{part})\n" in text


def test_batch_summary_part_on_an_empty_outdir(tmp_path):
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python3").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    (shim / "python3").chmod(0o755)
    out = tmp_path / "out"
    p = subprocess.run(["bash", os.path.join(ROOT, "bench", "multi_gpu_batch.sh"), str(out), "summary"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}"))
    assert p.returncode == 0, p.stderr
    assert "accuracy     n/a" in p.stdout
    assert json.loads((out / "summary.json").read_text())["goals"]["scale"]["pass"] is None


def test_screenshot_shot_option():
    shots = load_bench("tui_screenshots")
    assert shots.parse_shot("last=g,g,g") == ("last", ["g", "g", "g"])
    assert shots.parse_shot("gpus=2") == ("gpus", ["2"])
    import argparse

    for bad in ("gpus", "=2", "a/b=2", "x="):
        with pytest.raises(argparse.ArgumentTypeError):
            shots.parse_shot(bad)
