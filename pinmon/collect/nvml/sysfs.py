"""What the kernel's sysfs says about a GPU's PCI device: its address there and its NUMA node.

NVML spells a bus id "00000000:17:00.0"; sysfs names the device "0000:17:00.0". The node is the
host node nearest the device, which is what pinned-memory placement needs.
"""
from __future__ import annotations

import os


def sysfs_pci_address(pci_bus_id: str | None) -> str | None:
    """NVML's "00000000:17:00.0" -> sysfs's "0000:17:00.0" (domain as %04x, lower case)."""
    if not pci_bus_id:
        return None
    parts = pci_bus_id.strip().lower().split(":")
    if len(parts) != 3:
        return None
    try:
        domain = int(parts[0], 16)
    except ValueError:
        return None
    return f"{domain:04x}:{parts[1]}:{parts[2]}"


def sysfs_numa_node_text(pci_bus_id: str | None, sysfs_root: str = "/sys") -> str | None:
    """The device's ``numa_node`` file as the kernel writes it ("-1" where it does not know, as on a
    one-node VM); None if unreadable."""
    addr = sysfs_pci_address(pci_bus_id)
    if addr is None:
        return None
    try:
        with open(os.path.join(sysfs_root, "bus/pci/devices", addr, "numa_node")) as f:
            return f.read().strip()
    except OSError:
        return None


def sysfs_numa_node(pci_bus_id: str | None, sysfs_root: str = "/sys") -> int | None:
    """The NUMA node the kernel assigns to the GPU's PCI device; None if unknown (-1 or unreadable)."""
    text = sysfs_numa_node_text(pci_bus_id, sysfs_root)
    try:
        node = int(text) if text is not None else -1
    except ValueError:
        return None
    return node if node >= 0 else None
