"""The snapshot model and what every side shares about it.

- ``snapshot``: the frozen dataclasses of a snapshot (``Snapshot``, ``HostMemory``, ``Gpu``, ``Link``,
  ``Pcie``, ``ProbeResult``, ``Finding``...) and the one JSON schema, ``pinmon.snapshot/2``; its names
  are re-exported here;
- ``process``: a process row (``ProcessPinned``) and its records (``ProcessIdentity``, ``HeldMemory``,
  ``Copies`` of ``CopyStats`` and ``BulkCopies``, ``Allocations``, ``Placement``);
- ``group``: a group of processes under one memory limit (``Cgroup``: ``GroupOwner``, ``GroupLimit``);
- ``kinds``: the closed sets of words (``Literal`` types and the tuples of their values);
- ``serial``: their generic, bounded (de)serialisation; ``migrate``: a ``/1`` document as a ``/2`` one;
- ``source``: the ``Source`` protocol that a live collector, a replay and a test fake share;
- ``oom``: ``OomKill``, a memory cgroup OOM kill from the kernel's log;
- ``probe_join``: how a probe result joins a snapshot and which result is kept;
- ``link``: PCIe link arithmetic (a generation and width's payload rate);
- ``traffic``: how much of each GPU's link traffic the processes' measured copies explain.

Nothing here does I/O.
"""
from .group import Cgroup, GroupLimit, GroupOwner
from .oom import OomKill
from .process import (
    Allocations,
    BulkCopies,
    Copies,
    CopyStats,
    HeldMemory,
    Placement,
    ProcessIdentity,
    ProcessPinned,
    summed,
)
from .serial import SchemaError
from .snapshot import (
    CHECK_SCHEMA,
    EXACT_PCIE_METHODS,
    SEVERITY_RANK,
    SNAPSHOT_SCHEMA,
    Finding,
    Gpu,
    GpuProcess,
    HostMemory,
    Link,
    Pcie,
    ProbeMeasurement,
    ProbeResult,
    Snapshot,
    bus_key,
    worst_severity,
)

__all__ = ["CHECK_SCHEMA", "EXACT_PCIE_METHODS", "SEVERITY_RANK", "SNAPSHOT_SCHEMA", "Allocations", "BulkCopies",
           "Cgroup", "Copies", "CopyStats", "Finding", "Gpu", "GpuProcess", "GroupLimit", "GroupOwner", "HeldMemory",
           "HostMemory", "Link", "OomKill", "Pcie", "Placement", "ProbeMeasurement", "ProbeResult", "ProcessIdentity",
           "ProcessPinned", "SchemaError", "Snapshot", "bus_key", "summed", "worst_severity"]
