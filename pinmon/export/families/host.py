"""Host memory metrics: RAM, the effective (cgroup) limit, swap, shmem, mlocked, pinned (kernel's count and estimate).

Unknown values are not exported. ``memlock_limit_bytes`` is absent when the limit is unlimited;
``pinmon_host_memlock_unlimited`` says which. Node series are served for NUMA node numbers below
``MAX_NUMA_NODES`` only: a recording may name any key, and each one would be a series.
"""
from __future__ import annotations

from prometheus_client.core import Metric

from ..state import StateView
from .base import Gauge, emit

# (metric name, HostMemory field, help)
FIELDS = (
    ("host_memory_total_bytes", "mem_total_bytes", "MemTotal"),
    ("host_memory_available_bytes", "mem_available_bytes", "available RAM, capped by the room left under the cgroup limit"),
    ("host_effective_memory_limit_bytes", "effective_mem_limit_bytes", "min(MemTotal, cgroup memory limit): what this process tree can use"),
    ("host_cgroup_memory_limit_bytes", "cgroup_limit_bytes", "cgroup memory limit (tightest ancestor)"),
    ("host_swap_used_bytes", "swap_used_bytes", "swap in use"),
    ("host_shmem_bytes", "shmem_bytes", "Shmem from /proc/meminfo"),
    ("host_mlocked_bytes", "mlocked_bytes", "Mlocked from /proc/meminfo (CUDA pinned memory is not in it)"),
    ("host_pinned_bytes_estimate", "pinned_bytes_est", "CUDA pinned host memory, sum of the per-process /proc/PID/maps estimates"),
    ("host_write_combined_bytes_estimate", "write_combined_bytes_est", "write-combined pinned memory, estimated"),
    ("host_memlock_limit_bytes", "memlock_limit_bytes", "RLIMIT_MEMLOCK soft limit of the exporter (absent when unlimited)"),
    ("host_kernel_pinned_bytes", "kernel_pinned_bytes", "pages pinned now (FOLL_PIN, /proc/vmstat): the kernel's exact, host-wide count; write-combined memory is not in it"),
    ("host_unattributed_pinned_bytes", "unattributed_pinned_bytes", "the kernel's pinned count minus what the process rows explain (cudaHostRegister, RDMA, VFIO, io_uring)"),
)

# Linux's largest MAX_NUMNODES (CONFIG_NODES_SHIFT 10).
MAX_NUMA_NODES = 1024


def numa_node(key: object) -> bool:
    """A NUMA node number as sysfs writes it: ASCII digits below ``MAX_NUMA_NODES``."""
    text = str(key)
    return 0 < len(text) <= 4 and text.isascii() and text.isdigit() and int(text) < MAX_NUMA_NODES


def families(view: StateView) -> list[Metric]:
    snap = view.snapshot
    if snap is None:
        return []
    h = snap.host
    info = Gauge("host_info", "host identity (value 1)", ("hostname",))
    info.add((h.hostname,), 1)
    gauges = [info]
    for name, attr, doc in FIELDS:
        gauge = Gauge(name, doc)
        gauge.add((), getattr(h, attr))
        gauges.append(gauge)
    unlimited = Gauge("host_memlock_unlimited", "1 when RLIMIT_MEMLOCK is unlimited")
    if h.memlock_unlimited is not None:
        unlimited.add((), 1 if h.memlock_unlimited else 0)
    gauges.append(unlimited)
    pci = Gauge("host_nvidia_pci_gpus", "NVIDIA GPUs on the PCI bus, counted from sysfs without NVML"
                " (more than pinmon_gpu_up reports: GPUs that NVML does not see)")
    pci.add((), snap.nvidia_pci_gpus)
    gauges.append(pci)
    by_node = Gauge("host_kernel_pinned_node_bytes", "the kernel's pinned count on one NUMA node", ("node",))
    for node, value in sorted((h.kernel_pinned_bytes_by_node or {}).items()):
        if numa_node(node):
            by_node.add((node,), value)
    total = Gauge("host_pinned_bytes", "all pinned host memory, best figure: the kernel's count + write-combined "
                  "(source=\"kernel\"), else the per-process estimates (source=\"est.\")", ("source",))
    total.add((h.pinned_bytes_source or "est.",), h.pinned_bytes_total)
    gauges += [by_node, total]
    return emit(*gauges)
