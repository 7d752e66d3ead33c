"""The host's memory: /proc/meminfo and the cgroup limit (``memory``), the kernel's count of pinned
pages (``kernel_pins``), NUMA nodes and where a process's pinned pages sit (``numa``), NVIDIA GPUs on
the PCI bus (``pci``), and the snapshot's pinned totals from these and the process rows
(``pinned_total``)."""
