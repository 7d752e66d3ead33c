"""The test factories build what a collector could: every scene survives the schema's round trip
(``from_dict`` refuses impossible figures), and ``snapshot()`` routes its keywords to the right place."""
import pytest

from pinmon.model import Snapshot
from tests import factories as make

SCENES = {
    "snapshot": lambda: make.snapshot(gpus=[make.gpu(0), make.gpu(1, gen=4, width=8, rx=12e9)],
                                      processes=[make.process(pinned_bytes=make.GIB)],
                                      probe=make.probe(allocs=[(make.MIB, 0.01)], cpu_reads={"pinned": 9e9})),
    "null": make.null_snapshot,
    "full": make.full_snapshot,
    "box": lambda: make.box_snapshot(3, probe=make.box_probe("sweep")),
    "box_kernel": lambda: make.box_kernel_snapshot(nodes=2),
    "quick_result": lambda: make.snapshot(probe=make.quick_result()),
    "series": lambda: make.pinned_series([make.MIB, 2 * make.MIB])[-1],
    "groups": lambda: make.box_groups_snapshot(oom_kills=2),
}


@pytest.mark.parametrize("name", sorted(SCENES))
def test_every_scene_survives_the_schema_round_trip(name):
    snap = SCENES[name]()
    assert Snapshot.from_dict(snap.to_dict()) == snap


def test_snapshot_keywords_set_snapshot_fields_or_host_fields():
    snap = make.snapshot(notices=("n",), source="replay", pinned_bytes_est=make.GIB)
    assert snap.notices == ("n",) and snap.source == "replay"
    assert snap.host.pinned_bytes_est == make.GIB and snap.host.hostname == "testbox"
    with pytest.raises(TypeError):
        make.snapshot(host=make.host(), pinned_bytes_est=make.GIB)


def test_link_rates_follow_the_link_unless_given():
    assert make.link().theoretical_bytes_per_s == pytest.approx(63.015e9, rel=1e-4)
    assert make.link(gen=4, width=8).theoretical_bytes_per_s == pytest.approx(make.GEN4_X8, rel=1e-3)
    assert make.link(theoretical_bytes_per_s=None).theoretical_bytes_per_s is None
    assert make.gpu(link=make.link(gen=3)).link.gen == 3


def test_process_and_cgroup_take_their_records_fields_by_name():
    p = make.process(7, "trainer", user="alice", cgroup="k", pinned_bytes=make.GIB, vm_pinned_bytes=5, capped=True,
                     gpu_indices=(1,), source="traced")
    assert (p.identity.name, p.identity.user, p.identity.cgroup) == ("trainer", "alice", "k")
    assert (p.held.pinned_bytes, p.held.vm_pinned_bytes, p.held.capped, p.placement.gpu_indices) == \
        (make.GIB, 5, True, (1,))
    again = make.moved(p, pinned_bytes=1, name="other")
    assert again.held.vm_pinned_bytes == 5 and again.held.pinned_bytes == 1 and again.identity.user == "alice"
    g = make.cgroup(pod="p", limit_bytes=10, current_bytes=4, pinned_bytes=2, processes=1)
    assert (g.owner.pod, g.limit.limit_bytes, g.limit.current_bytes, g.held.pinned_bytes, g.processes) == \
        ("p", 10, 4, 2, 1)
    with pytest.raises(TypeError):
        make.process(no_such_field=1)
