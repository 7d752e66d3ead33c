"""NVIDIA GPUs on the PCI bus, counted from sysfs: what NVML should see, asked without NVML.

When NVML cannot start, "no GPU" and "a GPU with a broken driver" look alike from NVML; the PCI
bus tells them apart. A GPU is a device of vendor 0x10de whose class is a display controller
(VGA 0x0300 or 3D 0x0302); the same vendor's audio, USB and NVSwitch functions are not GPUs.
"""
from __future__ import annotations

import os

from ..rawfile import read_bytes

NVIDIA_VENDOR_ID = 0x10DE
# PCI base class and subclass (the class file's top 16 of 24 bits) of a GPU.
GPU_CLASSES = frozenset({0x0300, 0x0302})
# A PCI bus holds at most 256 buses x 32 devices x 8 functions per domain; a tree listing more
# than this is not sysfs, and is not walked.
MAX_PCI_DEVICES = 65536


def _hex_file(path: str) -> int | None:
    try:
        return int(read_bytes(path)[:32].strip(), 16)
    except (OSError, ValueError):
        return None


def count_nvidia_gpus(sysfs_root: str = "/sys") -> int | None:
    """NVIDIA GPUs in ``<sysfs_root>/bus/pci/devices``; None when that cannot be listed (no PCI
    sysfs: unknown, not zero). A device whose class cannot be read is counted: a GPU missed would
    turn "broken driver" into "no GPU"."""
    base = os.path.join(sysfs_root, "bus", "pci", "devices")
    try:
        names = os.listdir(base)
    except OSError:
        return None
    if len(names) > MAX_PCI_DEVICES:
        return None
    count = 0
    for name in names:
        if _hex_file(os.path.join(base, name, "vendor")) != NVIDIA_VENDOR_ID:
            continue
        klass = _hex_file(os.path.join(base, name, "class"))
        if klass is None or (klass >> 8) in GPU_CLASSES:
            count += 1
    return count
