"""The check report's GPU lines: link labels, traffic and its share of the link."""
from pinmon.model import Gpu, Link, Pcie
from pinmon.outputs.text import gpu_line

GEN5_X16 = 63.0e9


def gpu(rx, tx, gen=5, width=16):
    return Gpu(index=0, name="H200", link=Link(gen=gen, gen_max=5, width=width, width_max=16,
                                               theoretical_bytes_per_s=GEN5_X16),
               pcie=Pcie(rx_bytes_per_s=rx, tx_bytes_per_s=tx, method="gpm"))


def test_traffic_and_its_share_of_the_link():
    line = gpu_line(gpu(12.6e9, 6.3e9)).splitlines()[1]
    assert line == ("    link Gen5 x16 (max Gen5 x16, 63.0 GB/s now)  RX 12.6 GB/s  TX 6.3 GB/s"
                    " (link bytes, GPM; 30% of link)")


def test_share_of_the_link_counts_the_direction_that_has_a_reading():
    assert "RX n/a  TX 6.3 GB/s (link bytes, GPM; 10% of link)" in gpu_line(gpu(None, 6.3e9))
    assert "RX n/a  TX n/a (link bytes, GPM; n/a of link)" in gpu_line(gpu(None, None))


def test_unknown_link_figures():
    assert "link Gen? x? " not in gpu_line(gpu(0.0, 0.0, gen=None, width=None))
    assert "link n/a (max Gen5 x16," in gpu_line(gpu(0.0, 0.0, gen=None, width=None))
    assert "link Gen4 x? (max Gen5 x16," in gpu_line(gpu(0.0, 0.0, gen=4, width=None))


def test_odd_node_keys_from_a_snapshot_file_print():
    """A recording's node key made of digits that are not ASCII is a name: the report prints it."""
    from pinmon.model import HostMemory, ProcessPinned, Snapshot
    from pinmon.outputs.text import format_check

    by_node = {"\u00b2": 5 << 30, "0": 3 << 30}
    snap = Snapshot.from_dict(Snapshot(
        time=1000.0, host=HostMemory(hostname="h", kernel_pinned_bytes=8 << 30, unattributed_pinned_bytes=0,
                                     kernel_pinned_bytes_by_node=by_node, numa_nodes=(0, 1)),
        processes=(ProcessPinned(pid=1, name="python", pinned_bytes=8 << 30, pinned_bytes_by_node=by_node),)).to_dict())
    text = format_check(snap, [])
    assert "by node: node0 3.0 GiB, node\u00b2 5.0 GiB" in text and "\u00b2 (62%)" in text
