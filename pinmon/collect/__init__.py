"""Collection: reads the machine (NVML, /proc, /sys, cgroups) into ``Snapshot`` objects; no UI, no advice.

- ``live``: ``LiveCollector``, the live ``Source``: the parts below joined into one snapshot;
- ``host/``: host memory and its cgroup limit, the kernel's count of pinned pages, NUMA nodes and
  placement, NVIDIA GPUs on the PCI bus, the snapshot's pinned totals;
- ``processes/``: each process's pinned estimate from ``/proc/PID/maps`` (checked against the kernel
  objects behind its mappings, capped by what it has resident), its ``VmLck``;
- ``traced/``: reading the in-process tracer's report files, and what a report may put in a CUDA
  process's row;
- ``cgroups/``: who owns a process (pod, container, job, unit) and its group's memory limit;
- ``nvml/``: NVIDIA GPUs through NVML;
- ``rawfile``: small /proc and /sys files read with plain ``os.read``.
"""
