"""``pinmon.snapshot/1`` documents read as ``/2`` ones (model/migrate.py): every v1 field lands in its
record, what v1 summed stays the same sum, and a bad v1 value is refused with its v1 path."""
import gzip
import json
from pathlib import Path

import pytest

from pinmon.model import SNAPSHOT_SCHEMA, SchemaError, Snapshot
from pinmon.model.migrate import cgroup_v1_to_v2, process_v1_to_v2

DEMO_V1 = Path(__file__).parent / "fixtures" / "recordings" / "demo-v1.jsonl.gz"

V1_TRACED = {
    "pid": 8080, "name": "trainer", "user": "dave", "cmdline": "python train.py", "source": "traced",
    "pinned_bytes": 8 << 30, "write_combined_bytes": 1 << 20, "pinned_mappings": 4, "mappings_churn": 1,
    "pinned_allocs_per_s": 3.5, "median_alloc_bytes": 4 << 20, "wc_readbacks": 7,
    "pageable_copy_bytes_per_s": 0.4e9, "registered_bytes": 2 << 30, "requested_pinned_bytes": 6 << 30,
    "gpu_memory_bytes": 20 << 30, "gpu_indices": [0], "call_sites": {"alloc": "train.py:42"},
    "estimate_capped": True, "pinned_bytes_by_node": {"0": 2 << 30, "1": 6 << 30}, "vm_locked_bytes": 4096,
    "vm_pinned_bytes": 1 << 20, "cgroup": "docker/ab", "trace_engine": "cupti",
    "h2d_copy_bytes_per_s": 11.0e9, "d2h_copy_bytes_per_s": 3.0e9,
    "h2d_pinned_bulk_bytes_per_s": 20.8e9, "h2d_pinned_bulk_busy_s": 2.5,
    "d2h_pinned_bulk_bytes_per_s": 50.76e9, "d2h_pinned_bulk_busy_s": 1.2, "pinned_bulk_default_stream_share": 0.75,
    "copy_gpu_pci_bus_id": "0000:17:00.0", "call_site": "ignored.py:1",
    "transfers": {"h2d.pinned": {"bytes_per_s": 10.5e9, "achieved_bytes_per_s": 20.9e9, "rate_p50": 21.5e9,
                                 "rate_p10": 9.0e9},
                  "h2d.pageable": {"bytes_per_s": 0.4e9, "achieved_bytes_per_s": 6.1e9, "rate_p50": None,
                                   "rate_p10": None},
                  "d2h.pinned": {"bytes_per_s": 3.0e9},
                  "d2h.pageable": {"bytes_per_s": 0.0}}}


def snapshot_v1(processes=(), cgroups=()):
    return {"schema": "pinmon.snapshot/1", "time": 1000.0, "host": {"hostname": "h"},
            "processes": list(processes), "cgroups": list(cgroups)}


def read(processes=(), cgroups=()):
    return Snapshot.from_dict(snapshot_v1(processes, cgroups))


def test_every_field_of_a_v1_traced_row_lands_in_its_record():
    p = read([V1_TRACED]).processes[0]
    assert (p.pid, p.source, p.instrument) == (8080, "traced", "cupti")
    assert (p.identity.name, p.identity.user, p.identity.cmdline, p.identity.cgroup) == \
        ("trainer", "dave", "python train.py", "docker/ab")
    h = p.held
    assert (h.pinned_bytes, h.write_combined_bytes, h.vm_pinned_bytes, h.registered_bytes, h.requested_bytes,
            h.vm_locked_bytes, h.mappings, h.mappings_churn, h.capped) == \
        (8 << 30, 1 << 20, 1 << 20, 2 << 30, 6 << 30, 4096, 4, 1, True)
    assert h.bytes == (8 << 30) + (2 << 20)
    assert p.placement.gpu_indices == (0,) and p.placement.gpu_memory_bytes == 20 << 30
    assert p.placement.pinned_bytes_by_node == {"0": 2 << 30, "1": 6 << 30}
    assert p.call_sites == {"alloc": "train.py:42"}
    c = p.copies
    pinned = c.get("h2d", "pinned")
    assert (pinned.bytes_per_s, pinned.achieved_bytes_per_s, pinned.rate_p50_bytes_per_s,
            pinned.rate_p10_bytes_per_s) == (10.5e9, 20.9e9, 21.5e9, 9.0e9)
    # v1's direction totals are the sums over the stats; what they held beyond the transfers (CUPTI's
    # managed and other host memory) is a stat of its own.
    assert c.bytes_per_s("h2d") == pytest.approx(11.0e9) and c.get("h2d", "other").bytes_per_s == pytest.approx(0.1e9)
    assert c.bytes_per_s("d2h") == 3.0e9 and c.get("d2h", "other") is None
    assert c.pageable_bytes_per_s == 0.4e9 and c.wc_readbacks == 7
    assert (c.bulk_of("h2d").achieved_bytes_per_s, c.bulk_of("h2d").busy_s) == (20.8e9, 2.5)
    assert (c.bulk_of("d2h").achieved_bytes_per_s, c.bulk_of("d2h").busy_s) == (50.76e9, 1.2)
    assert c.default_stream_share == 0.75 and c.gpu_pci_bus_id == "0000:17:00.0" and c.notes == ()
    a = p.allocations
    assert (a.instrument, a.per_s, a.median_bytes) == ("cupti", 3.5, 4 << 20)


def test_an_estimated_v1_row_has_no_copies_or_allocations():
    p = read([{"pid": 1, "name": "python", "pinned_bytes": 100, "source": "est."}]).processes[0]
    assert p.copies is None and p.allocations is None and p.instrument is None
    assert p.held.bytes == 100 and p.identity.name == "python" and not p.held.capped


def test_a_v1_row_of_a_tracer_without_engine_or_copy_table():
    # Before the tracer named its engine it was the hooks'; before its copy table its pageable rate was
    # of both directions together: no stat holds that, so it is said in a note.
    row = {"pid": 2, "source": "traced", "pageable_copy_bytes_per_s": 2.6e9, "wc_readbacks": 0}
    c = read([row]).processes[0].copies
    assert c.instrument == "hooks" and c.wc_readbacks == 0 and c.pageable_bytes_per_s is None
    assert c.notes == ("pageable copies 2.60 GB/s in both directions, not split by direction"
                       " (a recording of an older tracer)",)


def test_a_traced_v1_row_with_only_allocation_figures_keeps_its_instrument():
    p = read([{"pid": 3, "source": "traced", "trace_engine": "hooks"}]).processes[0]
    assert p.copies is None and p.allocations.instrument == "hooks" and p.instrument == "hooks"


def test_a_v1_group_gives_its_vmpin_back_to_its_own_field():
    v1 = {"key": "pod/u/c", "kind": "pod", "name": "ml/trainer/worker", "path": "/kubepods/x", "pod": "trainer",
          "namespace": "ml", "container": "worker", "container_id": "cd", "pod_uid": "u",
          "memory_limit_bytes": 512, "limit_path": "/kubepods", "memory_current_bytes": 430, "oom_kills": 2,
          "oom_kills_at_start": 1, "pinned_bytes": 400, "write_combined_bytes": 10, "vm_pinned_bytes": 50,
          "processes": 2, "notes": ["n"]}
    g = read(cgroups=[v1]).cgroups[0]
    assert (g.key, g.kind, g.name, g.path, g.processes, g.notes) == \
        ("pod/u/c", "pod", "ml/trainer/worker", "/kubepods/x", 2, ("n",))
    assert (g.owner.pod, g.owner.namespace, g.owner.container, g.owner.container_id, g.owner.pod_uid) == \
        ("trainer", "ml", "worker", "cd", "u")
    assert (g.limit.limit_bytes, g.limit.limit_path, g.limit.current_bytes, g.limit.oom_kills,
            g.limit.oom_kills_at_start) == (512, "/kubepods", 430, 2, 1)
    assert (g.held.pinned_bytes, g.held.vm_pinned_bytes, g.held.write_combined_bytes) == (350, 50, 10)
    assert g.held.bytes == 410  # v1's pinned (with VmPin) + write-combined: the figure v1 compared with the limit
    # A sum lowered to the group's memory in use below its VmPin: the VmPin is what is left of it.
    low = cgroup_v1_to_v2({**v1, "pinned_bytes": 30}, "g")
    assert (low["held"]["pinned_bytes"], low["held"]["vm_pinned_bytes"]) == (0, 30)
    job = read(cgroups=[{"key": "slurm/1/0", "kind": "slurm", "name": "job 1.0", "job": "1", "step": "0"}]).cgroups[0]
    assert (job.owner.job, job.owner.step, job.held.bytes) == ("1", "0", None)


@pytest.mark.parametrize("row, needle", [
    ({"pid": 1, "pinned_bytes": -1}, "snapshot.processes[0].pinned_bytes: must be 0 or more"),
    ({"pid": 1, "transfers": {"h2d.pinned": {"bytes_per_s": "fast"}}}, "snapshot.processes[0].transfers.h2d.pinned"),
    ({"pid": 1, "h2d_copy_bytes_per_s": float("nan")}, "snapshot.processes[0].h2d_copy_bytes_per_s"),
    ({"pid": 1, "estimate_capped": None}, "snapshot.processes[0].estimate_capped: null"),
    ({"pid": 1, "gpu_indices": [True]}, "snapshot.processes[0].gpu_indices[0]"),
    ({"pid": 1, "trace_engine": "magic", "wc_readbacks": 1}, "snapshot.processes[0].copies.instrument"),
    ({"pid": 1, "source": "guessed"}, "snapshot.processes[0].source"),
    ({"name": "no pid"}, "snapshot.processes[0]: missing key 'pid'"),
])
def test_a_bad_v1_row_is_refused_with_its_path(row, needle):
    with pytest.raises(SchemaError) as e:
        read([row])
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("group, needle", [
    ({"key": "k", "kind": "docker", "name": "n", "pinned_bytes": "much"}, "snapshot.cgroups[0].pinned_bytes"),
    ({"key": "k", "kind": "docker", "name": "n", "memory_limit_bytes": -3}, "snapshot.cgroups[0].memory_limit_bytes"),
    ({"key": "k", "kind": "lxc", "name": "n"}, "snapshot.cgroups[0].kind"),
    ({"kind": "docker", "name": "n"}, "snapshot.cgroups[0]: missing key 'key'"),
])
def test_a_bad_v1_group_is_refused_with_its_path(group, needle):
    with pytest.raises(SchemaError) as e:
        read(cgroups=[group])
    assert needle in str(e.value)


def test_odd_shapes_are_left_for_the_reader_to_refuse():
    with pytest.raises(SchemaError, match=r"snapshot\.processes: expected a list"):
        Snapshot.from_dict({**snapshot_v1(), "processes": {"pid": 1}})
    with pytest.raises(SchemaError, match=r"snapshot\.processes\[0\]: expected an object"):
        read(["row"])
    assert process_v1_to_v2({"pid": 1}, "p") == {"pid": 1, "identity": {}, "held": {}, "placement": {}}


def test_a_v1_document_comes_out_as_v2_and_writes_as_v2():
    s = read([V1_TRACED])
    assert s.schema == SNAPSHOT_SCHEMA == s.to_dict()["schema"] == "pinmon.snapshot/2"
    assert Snapshot.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_the_demos_v1_figures_survive_the_move():
    """Row by row over the whole v1 demo: the figures the views and rules read are v1's."""
    with gzip.open(DEMO_V1, "rt") as f:
        docs = [json.loads(line) for line in f]
    for doc in docs:
        snap = Snapshot.from_dict(doc)
        for v1, p in zip(doc["processes"], snap.processes):
            assert p.pid == v1["pid"] and p.held.pinned_bytes == v1.get("pinned_bytes")
            assert p.held.write_combined_bytes == v1.get("write_combined_bytes")
            assert p.placement.gpu_indices == tuple(v1.get("gpu_indices", ()))
            if p.copies is not None:
                for d in ("h2d", "d2h"):
                    if v1.get(f"{d}_copy_bytes_per_s") is not None:
                        assert p.copies.bytes_per_s(d) == pytest.approx(v1[f"{d}_copy_bytes_per_s"])
                assert p.copies.pageable_bytes_per_s == pytest.approx(v1.get("pageable_copy_bytes_per_s"))
                assert p.copies.wc_readbacks == v1.get("wc_readbacks")
            assert (p.allocations.per_s if p.allocations else None) == v1.get("pinned_allocs_per_s")
        for v1, g in zip(doc.get("cgroups", []), snap.cgroups):
            v1_held = None if v1.get("pinned_bytes") is None and v1.get("write_combined_bytes") is None else \
                (v1.get("pinned_bytes") or 0) + (v1.get("write_combined_bytes") or 0)
            assert g.held.bytes == v1_held and g.limit.limit_bytes == v1.get("memory_limit_bytes")


def test_a_v1_delegated_group_keeps_its_user_in_its_owner():
    v1 = {"key": "user/1500/podman/x@/u", "kind": "podman", "name": "user 1500: podman x", "container_id": "x",
          "delegated_uid": 1500, "pinned_bytes": 10}
    g = read(cgroups=[v1]).cgroups[0]
    assert g.owner.delegated_uid == 1500 and g.owner.container_id == "x" and g.held.pinned_bytes == 10
    with pytest.raises(SchemaError, match=r"snapshot\.cgroups\[0\]\.delegated_uid"):
        read(cgroups=[{**v1, "delegated_uid": "root"}])


def test_a_v1_oom_kill_reads_as_it_was_written():
    kill = {"time": 900.0, "pid": 5, "process": "python3", "kind": "slurm", "name": "job 1.0", "job": "1",
            "limit_source": "kernel log", "shmem_rss_bytes": 48}
    doc = {**snapshot_v1(), "oom_kills": [kill]}
    (k,) = Snapshot.from_dict(doc).oom_kills
    assert (k.kind, k.job, k.limit_source, k.subject, k.short) == ("slurm", "1", "kernel log", "Slurm job 1", "job 1")
    with pytest.raises(SchemaError, match=r"snapshot\.oom_kills\[0\]\.limit_source"):
        Snapshot.from_dict({**doc, "oom_kills": [{**kill, "limit_source": "guess"}]})
