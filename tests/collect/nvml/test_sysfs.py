"""A GPU's PCI device in sysfs: NVML's bus id spelled as sysfs spells it, and its NUMA node."""
from pinmon.collect.nvml import sysfs_numa_node, sysfs_pci_address


def test_sysfs_address_and_numa_node(tmp_path):
    assert sysfs_pci_address("00000000:17:00.0") == "0000:17:00.0"
    assert sysfs_pci_address("00000000:AB:00.0") == "0000:ab:00.0"
    assert sysfs_pci_address("00010000:01:00.0") == "10000:01:00.0"  # VMD domains are wider
    assert sysfs_pci_address("garbage") is None and sysfs_pci_address(None) is None
    dev = tmp_path / "bus/pci/devices/0000:ab:00.0"
    dev.mkdir(parents=True)
    (dev / "numa_node").write_text("1\n")
    assert sysfs_numa_node("00000000:AB:00.0", str(tmp_path)) == 1
    (dev / "numa_node").write_text("-1\n")
    assert sysfs_numa_node("00000000:AB:00.0", str(tmp_path)) is None
    assert sysfs_numa_node("00000000:CD:00.0", str(tmp_path)) is None
