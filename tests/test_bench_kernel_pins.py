"""bench/kernel_pins_h200.py without a GPU: its child protocol and parsing, the io_uring control
scenario end to end, a GPU scenario failing cleanly without CuPy, and the JSON it writes."""
import importlib.util
import json
import os
import sys

import pytest

from tests.bench_scripts import load_bench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def bench():
    return load_bench("kernel_pins_h200")


def test_parse_message(bench):
    assert bench.parse_message('{"step": "ctx", "pid": 5}\n') == {"step": "ctx", "pid": 5}
    for line in ("warning: something\n", "[1, 2]\n", '{"pid": 5}\n', ""):
        assert bench.parse_message(line) is None


def test_summarize_check_of_a_real_check_document(bench, tmp_path):
    import subprocess

    p = subprocess.run([sys.executable, "-m", "pinmon", "check", "--json", "--window", "0.2"], capture_output=True,
                       text=True, timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    s = bench.summarize_check(p.stdout)
    assert s["status"] in ("ok", "warning", "critical")
    assert set(s["host"]) >= {"kernel_pinned_bytes", "unattributed_pinned_bytes", "pinned_bytes_source"}
    assert isinstance(s["findings"], list) and isinstance(s["rules"], list)
    assert "parse_error" in bench.summarize_check("not json")


# Pins pages or reads the host-wide pinned count: one worker runs all such tests, one at a time.
@pytest.mark.xdist_group("host-pinned-pages")
def test_io_uring_control_and_a_gpu_scenario_without_cupy(bench):
    from pinmon.collect.host.kernel_pins import KernelPinsReader

    reader = KernelPinsReader("/")
    if reader.read().pinned_bytes is None:
        pytest.skip("no nr_foll_pin_* counters in /proc/vmstat")
    try:
        import tests.iouring as iouring

        with iouring.PinnedBuffer(1 << 20):
            pass
    except iouring.Unavailable as e:
        pytest.skip(str(e))

    def kernel():
        return KernelPinsReader("/").read().pinned_bytes  # a fresh reading each time

    truth = bench.SCENARIOS["io_uring_256m"][0]
    for _attempt in range(3):  # another process may pin or unpin meanwhile: retry on a mismatch
        row = bench.run_allocation("io_uring_256m", kernel)
        assert "error" not in row, row
        if row["kernel_alloc_delta_bytes"] == row["kernel_free_delta_bytes"] == truth:
            break
    assert row["truth_bytes"] == truth
    assert row["kernel_alloc_delta_bytes"] == row["kernel_free_delta_bytes"] == truth
    assert row["pinned_bytes_source"] == "kernel" and row["maps_pinned_bytes"] == 0
    # io_uring's pages show in no mapping but in the process's VmPin: explained, not unattributed.
    assert row["row_vm_pinned_bytes"] == truth and row["unattributed_pinned_bytes"] < truth // 2
    if importlib.util.find_spec("cupy") is None:
        row = bench.run_allocation("context_only", kernel)
        assert "No module named 'cupy'" in row["error"] and row["kernel_alloc_delta_bytes"] is None


def test_write_json_replaces_whole(bench, tmp_path):
    path = str(tmp_path / "out.json")
    bench.write_json(path, {"a": 1, "obj": object()})
    doc = json.loads(open(path).read())
    assert doc["a"] == 1 and isinstance(doc["obj"], str)
    assert os.listdir(tmp_path) == ["out.json"]
    assert bench.main(["--bad"]) == 2
