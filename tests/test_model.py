"""The snapshot schema: round trips, nulls stay nulls, bad documents name the offending key."""
import json

import pytest

from pinmon.model import (
    Allocations,
    BulkCopies,
    Cgroup,
    Copies,
    CopyStats,
    Finding,
    Gpu,
    GpuProcess,
    GroupLimit,
    GroupOwner,
    HeldMemory,
    HostMemory,
    Link,
    Pcie,
    Placement,
    ProbeMeasurement,
    ProbeResult,
    ProcessIdentity,
    ProcessPinned,
    SchemaError,
    Snapshot,
    summed,
    worst_severity,
)
from pinmon.model.kinds import DIRECTIONS, GROUP_KIND_WORDS, GROUP_KINDS, HOST_MEMORY_KINDS

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
        processes=(ProcessPinned(pid=42, identity=ProcessIdentity(name="python", cgroup="docker/ab"),
                                 held=HeldMemory(pinned_bytes=1 << 30, mappings=3)),
                   ProcessPinned(pid=43, source="traced", identity=ProcessIdentity(name="train"),
                                 held=HeldMemory(pinned_bytes=1 << 20, write_combined_bytes=4096),
                                 copies=Copies(instrument="cupti", window_s=5.0,
                                               stats=(CopyStats("h2d", "pinned", bytes_per_s=1e9, count=3),
                                                      CopyStats("d2h", "write_combined", count=2)),
                                               bulk=(BulkCopies("h2d", 20e9, 0.5),), gpu_pci_bus_id="0000:00:06.0"),
                                 allocations=Allocations(instrument="hooks", per_s=2.0, flags={"write_combined": 1}),
                                 placement=Placement(gpu_indices=(0,), gpu_memory_bytes=1 << 30),
                                 call_sites={"alloc": "train.py:3"})),
        cgroups=(Cgroup(key="docker/ab", kind="docker", name="docker trainer", owner=GroupOwner(container_id="ab"),
                        limit=GroupLimit(limit_bytes=4 << 30), held=HeldMemory(pinned_bytes=1 << 30), processes=1),),
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
    assert next(iter(d)) == "schema" and d["schema"] == "pinmon.snapshot/2"
    assert set(d["host"]) >= REQUIRED_HOST
    g = d["gpus"][0]
    assert {"index", "name", "uuid", "pci_bus_id", "link", "pcie"} <= set(g)
    assert {"gen", "gen_max", "width", "width_max", "theoretical_bytes_per_s"} <= set(g["link"])
    assert {"rx_bytes_per_s", "tx_bytes_per_s", "method", "replay_delta", "recovery_delta", "error_delta"} <= set(g["pcie"])
    row = d["processes"][1]
    assert {"pid", "source", "identity", "held", "copies", "allocations", "placement", "call_sites"} == set(row)
    assert {"name", "user", "cmdline", "cgroup"} == set(row["identity"])
    assert {"pinned_bytes", "write_combined_bytes", "vm_pinned_bytes", "registered_bytes", "requested_bytes",
            "vm_locked_bytes", "mappings", "mappings_churn", "capped", "report_understated"} == set(row["held"])
    assert {"instrument", "window_s", "stats", "bulk", "default_stream_share", "gpu_pci_bus_id"} <= set(row["copies"])
    assert {"direction", "memory", "bytes_per_s", "bytes", "count", "achieved_bytes_per_s"} <= set(row["copies"]["stats"][0])
    assert {"key", "kind", "name", "path", "owner", "limit", "held", "processes", "notes"} == set(d["cgroups"][0])
    assert "bytes" not in row["held"]  # derived, not in the schema
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
    (lambda d: d["processes"][1].update(source="guessed"), "processes[1].source: 'guessed' is not one of"),
    (lambda d: d["processes"][1]["copies"].update(instrument=7), "processes[1].copies.instrument: a int is not"),
    (lambda d: d["processes"][1]["copies"]["stats"][0].update(direction="h2h"), "copies.stats[0].direction"),
    (lambda d: d["processes"][1]["copies"]["stats"][0].update(memory="vram"), "copies.stats[0].memory"),
    (lambda d: d["cgroups"][0].update(kind="lxc"), "cgroups[0].kind: 'lxc' is not one of 'pod'"),
    (lambda d: d["gpus"][0]["pcie"].update(method="guess"), "gpus[0].pcie.method"),
    (lambda d: d.update(source="elsewhere"), "snapshot.source"),
    (lambda d: d["probe"].update(kind="turbo"), "snapshot.probe.kind"),
    (lambda d: d["probe"]["measurements"][0].update(memory="hbm"), "probe.measurements[0].memory"),
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


# --- what no collector produces is refused, with the path of the key ---------------------------------

@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d.update(time=float("nan")), "snapshot.time: nan is not a finite number"),
    (lambda d: d.update(time=float("inf")), "snapshot.time: inf is not a finite number"),
    (lambda d: d.update(time=1e300), "snapshot.time: 1e+300 is not a time"),
    (lambda d: d.update(time=1e308), "snapshot.time"),
    (lambda d: d.update(time=-1.0), "snapshot.time: must be 0 or more"),
    (lambda d: d["host"].update(mem_total_bytes=-5), "snapshot.host.mem_total_bytes: must be 0 or more, got -5"),
    (lambda d: d["host"].update(pinned_bytes_est=2 ** 61), "snapshot.host.pinned_bytes_est"),
    (lambda d: d["host"].update(mem_total_bytes=10 ** 400), "a 1329-bit number"),
    (lambda d: d["gpus"][0]["pcie"].update(rx_bytes_per_s=float("-inf")), "gpus[0].pcie.rx_bytes_per_s"),
    (lambda d: d["gpus"][0]["pcie"]["counter_deltas"].update(replay=-3), "pcie.counter_deltas.replay"),
    (lambda d: d["gpus"][0].update(index=-1), "gpus[0].index: must be 0 or more"),
    (lambda d: d["processes"][0].update(pid=2 ** 64), "processes[0].pid"),
    (lambda d: d["probe"].update(time=float("nan")), "snapshot.probe.time"),
    (lambda d: d.update(gpus=[d["gpus"][0]] * 257), "snapshot.gpus: 257 GPUs, more than the 256"),
    (lambda d: d.update(processes=[d["processes"][0]] * 65_537), "65,537 processes, more than the 65,536"),
    (lambda d: d.update(notices=["n"] * 65_537), "snapshot.notices: 65,537 items"),
])
def test_impossible_values_are_refused(mutate, needle):
    d = full_snapshot().to_dict()
    mutate(d)
    with pytest.raises(SchemaError) as e:
        Snapshot.from_dict(d)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_too_many_gpus_are_refused_before_they_are_read():
    d = full_snapshot().to_dict()
    d["gpus"] = [None] * 10_000  # each item alone would be an error at gpus[0]; the count comes first
    with pytest.raises(SchemaError, match=r"snapshot\.gpus: 10,000 GPUs"):
        Snapshot.from_dict(d)


def test_limits_accept_what_a_real_box_has():
    d = full_snapshot().to_dict()
    d.update(gpus=[d["gpus"][0]] * 256, time=253_402_300_799.0)
    d["host"].update(mem_total_bytes=1 << 60)
    assert len(Snapshot.from_dict(d).gpus) == 256


def test_to_dict_is_always_valid_json():
    f = Finding(rule="r", severity="info", subject="s", message="m", advice="a",
                values={"ratio": float("nan"), "rate": float("inf"), "ok": 1.5})
    s = Snapshot(time=1.0, host=HostMemory(hostname="h"), interval_s=float("nan"))
    assert json.loads(json.dumps(f.to_dict(), allow_nan=False))["values"] == {"ratio": None, "rate": None, "ok": 1.5}
    assert json.loads(json.dumps(s.to_dict(), allow_nan=False))["interval_s"] is None


def test_link_below_max_needs_both_figures():
    assert Link(gen=4, gen_max=5, width=16, width_max=16).below_max
    assert Link(gen=5, gen_max=5, width=8, width_max=16).width_below_max
    assert not Link(gen=5, gen_max=5, width=16, width_max=16).below_max
    assert not Link(gen=4, gen_max=None, width=None, width_max=16).below_max  # unknown is not low
    assert Link(gen=4, gen_max=5).gen_below_max and not Link(gen=4, gen_max=5).width_below_max


def test_traffic_sums_the_directions_that_have_a_reading():
    assert Pcie(rx_bytes_per_s=12e9, tx_bytes_per_s=1e9).traffic_bytes_per_s == 13e9
    assert Pcie(rx_bytes_per_s=None, tx_bytes_per_s=2e9).traffic_bytes_per_s == 2e9
    assert Pcie().traffic_bytes_per_s is None
    assert "traffic_bytes_per_s" not in Pcie(rx_bytes_per_s=1.0).to_dict()  # derived, not in the schema


def test_evolve_is_replace_without_init():
    import dataclasses

    from pinmon.model import ProcessPinned
    from pinmon.model.serial import evolve

    row = ProcessPinned(pid=7, identity=ProcessIdentity(name="python"), held=HeldMemory(pinned_bytes=1 << 20))
    moved = evolve(row, source="traced")
    assert moved == dataclasses.replace(row, source="traced")
    assert row.source == "est."  # the original is untouched
    with pytest.raises(dataclasses.FrozenInstanceError):
        moved.source = "x"  # type: ignore[misc]
    with pytest.raises(TypeError, match="no field"):
        evolve(row, sauce="x")


# --- held bytes: one figure for a process and a group ------------------------------------------------

@pytest.mark.parametrize("parts, held", [
    ({}, None),
    ({"pinned_bytes": 0}, 0),
    ({"vm_pinned_bytes": 640 << 20}, 640 << 20),  # io_uring only: its bytes, not unknown
    ({"pinned_bytes": 100, "write_combined_bytes": 20, "vm_pinned_bytes": 3}, 123),
    ({"write_combined_bytes": 20, "vm_locked_bytes": 1 << 30, "registered_bytes": 5}, 20),  # mlock is apart
])
def test_held_bytes_are_pinned_write_combined_and_vmpin(parts, held):
    assert HeldMemory(**parts).bytes == held


def test_summed_adds_each_part_and_keeps_unknown_unknown():
    total = summed([HeldMemory(pinned_bytes=1, vm_pinned_bytes=10), HeldMemory(write_combined_bytes=5, capped=True),
                    HeldMemory()])
    assert (total.pinned_bytes, total.write_combined_bytes, total.vm_pinned_bytes, total.bytes) == (1, 5, 10, 16)
    assert total.capped
    assert summed([]).bytes is None and summed([HeldMemory()]).pinned_bytes is None


# --- copies: one record for every instrument ---------------------------------------------------------

def test_copies_sum_the_known_stats_of_a_direction_and_kind():
    c = Copies(instrument="uprobes", stats=(
        CopyStats("h2d", "pinned", bytes_per_s=10.0), CopyStats("h2d", "pageable", bytes_per_s=2.0),
        CopyStats("d2h", "pageable", bytes_per_s=3.0), CopyStats("d2h", "write_combined", count=4),
        CopyStats("d2h", "managed")))
    assert c.bytes_per_s("h2d") == 12.0 and c.bytes_per_s("d2h") == 3.0 and c.bytes_per_s() == 15.0
    assert c.bytes_per_s("h2d", "pinned") == 10.0 and c.bytes_per_s("d2h", "pinned") is None
    assert c.pageable_bytes_per_s == 5.0 and c.wc_readbacks == 4
    assert c.get("d2h", "write_combined").count == 4 and c.get("h2d", "managed") is None
    empty = Copies(instrument="hooks")
    assert empty.bytes_per_s("h2d") is None and empty.pageable_bytes_per_s is None and empty.wc_readbacks is None
    assert empty.bulk_of("h2d") is None


def test_the_instrument_of_a_row_is_its_copies_else_its_allocations():
    assert ProcessPinned(pid=1).instrument is None
    assert ProcessPinned(pid=1, allocations=Allocations(instrument="hooks")).instrument == "hooks"
    both = ProcessPinned(pid=1, copies=Copies(instrument="cupti"), allocations=Allocations(instrument="hooks"))
    assert both.instrument == "cupti"


def test_closed_sets_are_the_literals_values():
    assert DIRECTIONS == ("h2d", "d2h")
    assert {"pinned", "pageable", "write_combined"} <= set(HOST_MEMORY_KINDS)
    assert set(GROUP_KIND_WORDS) == set(GROUP_KINDS)


def test_a_group_is_named_in_its_kinds_words():
    g = Cgroup(key="slurm/42/0", kind="slurm", name="job 42.0")
    assert g.subject == "Slurm job 42.0" and g.short == "job 42.0"  # the kind's word is not said twice
    g = Cgroup(key="slurm/42/0", kind="slurm", name="job 42.0", owner=GroupOwner(job="42", step="0"))
    assert (g.subject, g.short) == ("Slurm job 42 step 0", "job 42.0")
    docker = Cgroup(key="d", kind="docker", name="docker 1a2b3c")
    assert (docker.subject, docker.short) == ("Docker container 1a2b3c", "docker 1a2b3c")
    assert Cgroup(key="x", kind="unknown", name="/x").subject == "group /x"
    assert GroupLimit(oom_kills=3, oom_kills_at_start=1).oom_kills_since_start == 2
    assert GroupLimit(oom_kills=3).oom_kills_since_start is None


def test_copy_gpu_is_the_gpu_the_copies_name_else_the_only_one():
    gpus = (Gpu(index=0, pci_bus_id="00000000:17:00.0"), Gpu(index=1, pci_bus_id="00000000:9A:00.0"))
    snap = Snapshot(time=1.0, host=HostMemory(hostname="h"), gpus=gpus)
    named = ProcessPinned(pid=1, copies=Copies(instrument="cupti", gpu_pci_bus_id="0000:9a:00.0"))
    assert snap.copy_gpu(named).index == 1
    elsewhere = ProcessPinned(pid=1, copies=Copies(instrument="cupti", gpu_pci_bus_id="0000:01:00.0"))
    assert snap.copy_gpu(elsewhere) is None
    assert snap.copy_gpu(ProcessPinned(pid=1, placement=Placement(gpu_indices=(1,)))).index == 1
    assert snap.copy_gpu(ProcessPinned(pid=1)) is None  # two GPUs, nothing says which
