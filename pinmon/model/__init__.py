"""The snapshot model and what every side shares about it.

- ``snapshot``: the frozen dataclasses of a snapshot (``Snapshot``, ``HostMemory``, ``Gpu``, ``Link``,
  ``Pcie``, ``ProcessPinned``, ``ProbeResult``, ``Finding``...) and the one JSON schema,
  ``pinmon.snapshot/1``; its names are re-exported here;
- ``serial``: their generic, bounded (de)serialisation;
- ``source``: the ``Source`` protocol that a live collector, a replay and a test fake share;
- ``oom``: ``OomKill``, a memory cgroup OOM kill from the kernel's log;
- ``probe_join``: how a probe result joins a snapshot and which result is kept;
- ``link``: PCIe link arithmetic (a generation and width's payload rate).

Nothing here does I/O.
"""
from .oom import OomKill
from .serial import SchemaError
from .snapshot import (
                       CHECK_SCHEMA,
                       EXACT_PCIE_METHODS,
                       SEVERITY_RANK,
                       SNAPSHOT_SCHEMA,
                       TRANSFER_FIGURES,
                       TRANSFER_KEYS,
                       Cgroup,
                       Finding,
                       Gpu,
                       GpuProcess,
                       HostMemory,
                       Link,
                       Pcie,
                       ProbeMeasurement,
                       ProbeResult,
                       ProcessPinned,
                       Snapshot,
                       worst_severity,
)

__all__ = ["CHECK_SCHEMA", "EXACT_PCIE_METHODS", "SEVERITY_RANK", "SNAPSHOT_SCHEMA", "TRANSFER_FIGURES",
           "TRANSFER_KEYS", "Cgroup", "Finding", "Gpu", "GpuProcess", "HostMemory", "Link", "OomKill", "Pcie", "ProbeMeasurement",
           "ProbeResult", "ProcessPinned", "SchemaError", "Snapshot", "worst_severity"]
