"""A fake sysfs PCI tree: ``<root>/bus/pci/devices/<address>/{vendor,class}`` as the kernel writes them."""
from __future__ import annotations

import os

NVIDIA = 0x10DE
GPU_3D = 0x030200       # an H100/H200: 3D controller
GPU_VGA = 0x030000
AUDIO = 0x040300        # a GPU's HDMI audio function
NVSWITCH = 0x068000     # a bridge


def fake_pci(root: str, devices) -> str:
    """``devices``: (vendor, class) pairs, one PCI function each; returns ``root`` for sysfs_root=."""
    base = os.path.join(root, "bus", "pci", "devices")
    os.makedirs(base, exist_ok=True)
    for i, (vendor, klass) in enumerate(devices):
        d = os.path.join(base, f"0000:{0x10 + i:02x}:00.0")
        os.makedirs(d)
        with open(os.path.join(d, "vendor"), "w") as f:
            f.write(f"0x{vendor:04x}\n")
        if klass is not None:
            with open(os.path.join(d, "class"), "w") as f:
                f.write(f"0x{klass:06x}\n")
    return root


def nvidia_gpus(root: str, n: int) -> str:
    """A box with ``n`` NVIDIA GPUs (plus an Intel host bridge and a GPU's audio function)."""
    return fake_pci(root, [(0x8086, 0x060000), (NVIDIA, AUDIO)] + [(NVIDIA, GPU_3D)] * n)
