"""``probe-below-link`` (``advise.probe``) at, just below and just above its threshold."""
import pytest

from pinmon.advise import Thresholds
from pinmon.advise import probe as probe_rules
from tests import factories as make

T = Thresholds()


# --- probe-below-link ----------------------------------------------------------------------------

@pytest.mark.parametrize("h2d, d2h, fires", [
    (69.99e9, 50e9, True), (70e9, 50e9, False), (70.01e9, 50e9, False),
    (50e9, 70e9, False),                 # the best direction counts
    (None, 69e9, True), (None, None, False),
])
def test_probe_below_link_levels(h2d, d2h, fires):
    snap = make.snapshot(gpus=[make.gpu()], probe=make.probe(h2d_pinned=h2d, d2h_pinned=d2h, link=100e9))
    out = probe_rules.probe_below_link([snap], T)
    assert [f.severity for f in out] == (["warning"] if fires else [])


def test_probe_below_link_message_and_numa_node():
    snap = make.snapshot(gpus=[make.gpu(numa_node=1)], probe=make.probe(h2d_pinned=30.1e9, d2h_pinned=29e9))
    [f] = probe_rules.probe_below_link([snap], T)
    assert f.subject == "gpu0"
    assert f.message == "best pinned copy 30.1 GB/s (H2D) = 48% of the link's 63.0 GB/s (Gen5 x16)"
    assert "numactl --cpunodebind=1 --membind=1" in f.advice and "LnkSta" in f.advice
    assert "other traffic" in f.advice
    assert f.values["numa_node"] == 1


def test_probe_below_link_quotes_cpu_affinity_when_numa_node_unknown():
    snap = make.snapshot(gpus=[make.gpu(cpu_affinity="0-15")], probe=make.probe(h2d_pinned=30e9, d2h_pinned=30e9))
    [f] = probe_rules.probe_below_link([snap], T)
    assert "numactl --physcpubind=0-15 --localalloc" in f.advice


def test_probe_below_link_falls_back_to_the_gpu_link_rate():
    snap = make.snapshot(gpus=[make.gpu()], probe=make.probe(h2d_pinned=40e9, d2h_pinned=40e9, link=None))
    [f] = probe_rules.probe_below_link([snap], T)
    assert f.values["link_theoretical_bytes_per_s"] == pytest.approx(63.0e9, rel=1e-3)
    # without either rate it cannot judge
    snap = make.snapshot(gpus=[], probe=make.probe(h2d_pinned=40e9, d2h_pinned=40e9, link=None))
    assert probe_rules.probe_below_link([snap], T) == []


def test_probe_below_link_silent_when_probe_unavailable():
    snap = make.snapshot(gpus=[make.gpu()], probe=make.probe(h2d_pinned=1e9, status="unavailable"))
    assert probe_rules.probe_below_link([snap], T) == []
