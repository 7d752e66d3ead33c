"""The closed sets of words a snapshot uses: each a ``Literal`` type and the tuple of its values.

A field typed with one of these reads and writes the bare word in JSON; ``serial.from_dict`` refuses a
word outside the set (a ``SchemaError`` naming the path), so a view or a rule may compare with these
values and know it has seen every case. The tuples are derived from the types (``typing.get_args``),
so the two never disagree.
"""
from __future__ import annotations

from typing import Literal, get_args

# How a process row's figures were got: its /proc/PID/maps estimate, an in-process tracer's report,
# or uprobes attached to a running process's libcuda.
RowSource = Literal["est.", "traced", "attached"]
ROW_SOURCES: tuple[RowSource, ...] = get_args(RowSource)

# Host-to-device and device-to-host.
Direction = Literal["h2d", "d2h"]
DIRECTIONS: tuple[Direction, ...] = get_args(Direction)

# The host side of a copy: pinned (page-locked, cudaHostAlloc or registered), pageable, write-combined
# pinned; CUPTI also names managed (unified) memory, and "other" is any other or unknown kind.
HostMemoryKind = Literal["pinned", "pageable", "write_combined", "managed", "other"]
HOST_MEMORY_KINDS: tuple[HostMemoryKind, ...] = get_args(HostMemoryKind)

# What measured a process's copies and allocations: CUPTI activity records or the CuPy/PyTorch hooks
# of the in-process tracer, or uprobes on libcuda.
Instrument = Literal["cupti", "hooks", "uprobes"]
INSTRUMENTS: tuple[Instrument, ...] = get_args(Instrument)

# What a group of processes under one memory limit is.
GroupKind = Literal["pod", "docker", "podman", "slurm", "systemd", "cgroup", "unknown"]
GROUP_KINDS: tuple[GroupKind, ...] = get_args(GroupKind)

# How a GPU's PCIe bytes were read: GPM samples or the link counters (both count every byte), or
# NVML's 20 ms throughput sample extrapolated.
PcieMethod = Literal["gpm", "counters", "sampled"]
PCIE_METHODS: tuple[PcieMethod, ...] = get_args(PcieMethod)

# Where the host's best pinned figure comes from: the kernel's count, or the per-process estimates.
PinnedTotalSource = Literal["kernel", "est."]
PINNED_TOTAL_SOURCES: tuple[PinnedTotalSource, ...] = get_args(PinnedTotalSource)

# Where a snapshot came from: read from this machine now, played from a recording, read from a file.
SnapshotOrigin = Literal["live", "replay", "snapshot"]
SNAPSHOT_ORIGINS: tuple[SnapshotOrigin, ...] = get_args(SnapshotOrigin)

# A finding's severity, and the status of a set of findings (info findings do not raise it).
Severity = Literal["info", "warning", "critical"]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
Status = Literal["ok", "warning", "critical"]
STATUSES: tuple[Status, ...] = get_args(Status)

# The probe: what a run measured (its plan), whether it could, and each measurement's operation and memory.
ProbeKind = Literal["quick", "sweep", "alloc", "modes", "numa"]
PROBE_KINDS: tuple[ProbeKind, ...] = get_args(ProbeKind)
ProbeStatus = Literal["ok", "unavailable"]
PROBE_STATUSES: tuple[ProbeStatus, ...] = get_args(ProbeStatus)
MeasurementKind = Literal["init", "copy", "alloc", "free", "register", "cpu_read", "cpu_write", "kernel_read"]
MEASUREMENT_KINDS: tuple[MeasurementKind, ...] = get_args(MeasurementKind)
ProbeMemory = Literal["pinned", "pageable", "write_combined", "mapped", "portable", "registered", "device"]
PROBE_MEMORIES: tuple[ProbeMemory, ...] = get_args(ProbeMemory)

# Where an OOM kill's memory limit comes from: the limit the kernel logged at the kill, or the
# limit its cgroup has now (read since).
LimitSource = Literal["kernel log", "cgroup"]
LIMIT_SOURCES: tuple[LimitSource, ...] = get_args(LimitSource)

# Words for a group kind, as a finding's subject names it ("pod ml/trainer/worker", "Docker container
# 1a2b..."), and in short where room is scarce ("docker 1a2b...", "unit x.service").
GROUP_KIND_WORDS: dict[GroupKind, str] = {
    "pod": "pod", "docker": "Docker container", "podman": "Podman container",
    "slurm": "Slurm job", "systemd": "systemd unit", "cgroup": "cgroup", "unknown": "group"}
GROUP_KIND_SHORT: dict[GroupKind, str] = {
    "pod": "pod", "docker": "docker", "podman": "podman", "slurm": "job", "systemd": "unit", "cgroup": "cgroup",
    "unknown": "group"}
# The word a collector's name of a group may start with, which the kind already says ("docker 1a2b...",
# "pod 5e1c7a2b/7d3a...", "job 4711.0"): left out where the kind's own words come first.
GROUP_NAME_LEAD: dict[GroupKind, str] = {"pod": "pod ", "docker": "docker ", "podman": "podman ", "slurm": "job "}
