"""bench/trace_coverage.py without a GPU: the probe's rates it sets beside the traced ones are read
from a real ``pinmon probe --json`` document (the H200's, committed)."""
import json
import os

import pytest

from tests.bench_scripts import load_bench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def bench():
    return load_bench("trace_coverage")


def test_probe_rates_of_a_real_probe_document(bench):
    with open(os.path.join(ROOT, "bench", "results", "probe_sweep_modes_h200.json")) as f:
        doc = json.load(f)
    rates = bench.probe_rates_of(doc)
    result = doc["results"][0]["result"]
    assert rates["status"] == result["status"] == "ok"
    for key in ("h2d.pinned", "h2d.pageable", "d2h.pinned", "d2h.pageable"):
        direction, memory = key.split(".")
        copies = [m for m in result["measurements"] if m["kind"] == "copy" and m["direction"] == direction
                  and m["memory"] == memory]
        largest = max(copies, key=lambda m: m["size_bytes"])
        assert rates[key] == {"size_bytes": largest["size_bytes"], "bytes_per_s": largest["bytes_per_s"]}
        assert rates[key]["bytes_per_s"] > 1e9


def test_probe_rates_of_a_document_without_results_raises_for_the_caller(bench):
    with pytest.raises((KeyError, IndexError)):
        bench.probe_rates_of({"results": []})
