"""NVIDIA GPUs through NVML: ``NvmlCollector`` reads each GPU into a ``Gpu`` model.

The modules, in the order they depend on each other: ``call`` (the one NVML call wrapper, its
failures and their words), ``values`` (NVML's answers as pinmon's values), ``sysfs`` (the GPU's PCI
device in sysfs: its address, its NUMA node), ``counters`` (the 32-bit cumulative counters and
their unwrapping), ``gpm`` (link bytes from GPM samples), ``sampled`` (the throughput fallback on
daemon workers), ``sampler`` (the background PCIe sampler of all GPUs), ``gpus`` (``NvmlCollector``).
"""
from .call import NVML_FUNCTIONS, NvmlFailure, call_nvml
from .gpus import NvmlCollector
from .sysfs import sysfs_numa_node, sysfs_pci_address
from .values import format_cpu_list

__all__ = ["NVML_FUNCTIONS", "NvmlCollector", "NvmlFailure", "call_nvml", "format_cpu_list",
           "sysfs_numa_node", "sysfs_pci_address"]
