"""pinmon: PCIe and pinned-memory monitor for NVIDIA GPU servers."""
__version__ = "0.2.0"
