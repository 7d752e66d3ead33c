"""The NVML package's modules import each other one way: no cycle, and the lower modules (the call
wrapper, values, sysfs, counters, GPM, the throughput fallback) never reach up to the sampler or
the collector."""
from tests.import_graph import cycles, graph

LOWER = ("call", "values", "sysfs", "counters", "gpm", "sampled")
UPPER = {"pinmon.collect.nvml.sampler", "pinmon.collect.nvml.gpus"}


def test_no_import_cycle_in_collect_or_its_nvml_package():
    assert cycles("collect/nvml") == []
    assert cycles("collect") == []


def test_lower_modules_never_import_the_sampler_or_the_collector():
    g = graph("collect/nvml")
    for name in LOWER:
        assert not g[f"pinmon.collect.nvml.{name}"] & UPPER, name
    assert "pinmon.collect.nvml.gpus" not in g["pinmon.collect.nvml.sampler"]
