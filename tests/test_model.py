"""The snapshot schema: round trips, nulls stay nulls, bad documents name the offending key."""
import json

import pytest

from pinmon.model import (Finding, Gpu, GpuProcess, HostMemory, Link, Pcie, ProbeMeasurement, ProbeResult,
                          ProcessPinned, SchemaError, Snapshot, worst_severity)

REQUIRED_HOST = {"hostname", "mem_total_bytes", "mem_available_bytes", "effective_mem_limit_bytes",
                 "swap_used_bytes", "shmem_bytes", "mlocked_bytes", "pinned_bytes_est", "memlock_limit_bytes"}


def full_snapshot():
    return Snapshot(
        time=1764700000.5,
        host=HostMemory(hostname="h200", mem_total_bytes=128 << 30, mem_available_bytes=100 << 30,
                        effective_mem_limit_bytes=128 << 30, pinned_bytes_est=1 << 30),
        gpus=(Gpu(index=0, name="NVIDIA H200", uuid="GPU-1", pci_bus_id="00000000:00:06.0",
                  link=Link(gen=5, gen_max=5, width=16, width_max=16, theoretical_bytes_per_s=63.0e9),
                  pcie=Pcie(rx_bytes_per_s=55e9, tx_bytes_per_s=1e6, method="counters",
                            counter_deltas={"replay": 0, "bad_tlp": None}),
                  processes=(GpuProcess(pid=42, gpu_memory_bytes=None),)),),
        processes=(ProcessPinned(pid=42, name="python", pinned_bytes=1 << 30, source="est."),),
        probe=ProbeResult(time=1.0, measurements=(ProbeMeasurement(kind="copy", memory="pinned", size_bytes=64 << 20,
                                                                   direction="h2d", bytes_per_s=55e9),)),
        notices=("x",),
    )


def test_round_trip_through_json():
    s = full_snapshot()
    text = json.dumps(s.to_dict())
    assert Snapshot.from_dict(json.loads(text)) == s


def test_contract_keys_present_and_schema_first():
    d = full_snapshot().to_dict()
    assert list(d)[0] == "schema" and d["schema"] == "pinmon.snapshot/1"
    assert REQUIRED_HOST <= set(d["host"])
    g = d["gpus"][0]
    assert {"index", "name", "uuid", "pci_bus_id", "link", "pcie"} <= set(g)
    assert {"gen", "gen_max", "width", "width_max", "theoretical_bytes_per_s"} <= set(g["link"])
    assert {"rx_bytes_per_s", "tx_bytes_per_s", "method", "replay_delta", "recovery_delta", "error_delta"} <= set(g["pcie"])
    assert {"pid", "name", "user", "pinned_bytes", "write_combined_bytes", "source", "pinned_allocs_per_s",
            "median_alloc_bytes", "wc_readbacks", "pageable_copy_bytes_per_s"} <= set(d["processes"][0])
    assert "probe" in d and "notices" in d


def test_unknown_is_null_not_zero():
    d = Snapshot(time=0.0, host=HostMemory(hostname="x")).to_dict()
    assert d["host"]["mem_total_bytes"] is None and d["probe"] is None


def test_unknown_keys_are_ignored_for_forward_compatibility():
    d = full_snapshot().to_dict()
    d["future_field"] = 1
    d["host"]["future"] = {"a": 1}
    assert Snapshot.from_dict(d) == full_snapshot()


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d.update(schema="other/1"), "schema"),
    (lambda d: d["host"].update(mem_total_bytes="lots"), "host.mem_total_bytes"),
    (lambda d: d["gpus"][0].update(index=None), "gpus[0].index"),
    (lambda d: d["gpus"][0]["link"].update(gen=True), "gpus[0].link.gen"),
    (lambda d: d.update(processes={}), "processes"),
    (lambda d: d.pop("host"), "host"),
    (lambda d: d.update(time="now"), "time"),
])
def test_bad_documents_name_the_key(mutate, needle):
    d = full_snapshot().to_dict()
    mutate(d)
    with pytest.raises(SchemaError) as e:
        Snapshot.from_dict(d)
    assert needle in str(e.value)


def test_not_an_object():
    with pytest.raises(SchemaError):
        Snapshot.from_dict([1, 2])


def test_probe_rate_picks_largest_size():
    p = ProbeResult(time=0, measurements=(
        ProbeMeasurement(kind="copy", memory="pinned", size_bytes=1 << 20, direction="h2d", bytes_per_s=10e9),
        ProbeMeasurement(kind="copy", memory="pinned", size_bytes=64 << 20, direction="h2d", bytes_per_s=55e9),
        ProbeMeasurement(kind="alloc", memory="pinned", size_bytes=64 << 20, seconds=0.03)))
    assert p.rate("h2d", "pinned") == 55e9
    assert p.rate("h2d", "pinned", 1 << 20) == 10e9
    assert p.rate("d2h", "pinned") is None


def test_worst_severity():
    f = lambda s: Finding(rule="r", severity=s, subject="host", message="m", advice="a")
    assert worst_severity([]) == "ok"
    assert worst_severity([f("info")]) == "ok"
    assert worst_severity([f("info"), f("warning")]) == "warning"
    assert worst_severity([f("critical"), f("warning")]) == "critical"
