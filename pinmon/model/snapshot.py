"""The snapshot model: plain frozen dataclasses and the one JSON schema, ``pinmon.snapshot/1``.

Everything downstream of collection (advisor, check report, ``--json``, recordings, replay, TUI,
exporter) reads these types and nothing else, so a recorded snapshot and a live one are
indistinguishable. Units are bytes and bytes/second; ``None`` means "unknown" and is written as
JSON ``null``, never as a 0 that pretends to be a reading.

``to_dict``/``from_dict`` are ``serial.Serial``'s: ``from_dict`` ignores keys it does not know (a
newer writer may add fields) and refuses what no collector can produce with ``SchemaError``, naming
the path of the first bad value.
"""
from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Any, Optional

from .oom import OomKill
from .serial import SchemaError, Serial, from_dict_of, to_json

SNAPSHOT_SCHEMA = "pinmon.snapshot/1"
CHECK_SCHEMA = "pinmon.check/1"

SEVERITY_RANK = {"ok": 0, "info": 0, "warning": 1, "critical": 2}


# --- the model ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class HostMemory(Serial):
    hostname: str
    mem_total_bytes: Optional[int] = None
    mem_available_bytes: Optional[int] = None
    # min(MemTotal, cgroup memory limit): what this process tree can really use.
    effective_mem_limit_bytes: Optional[int] = None
    cgroup_limit_bytes: Optional[int] = None
    swap_used_bytes: Optional[int] = None
    shmem_bytes: Optional[int] = None
    mlocked_bytes: Optional[int] = None
    # Sum of the per-process pinned estimates (see collect/processes/procmaps.py); an estimate, not a reading.
    pinned_bytes_est: Optional[int] = None
    write_combined_bytes_est: Optional[int] = None
    # RLIMIT_MEMLOCK soft limit of pinmon itself; None = unlimited or unknown (see memlock_unlimited).
    memlock_limit_bytes: Optional[int] = None
    memlock_unlimited: Optional[bool] = None
    # The kernel's count of pages pinned now (FOLL_PIN, /proc/vmstat), in bytes: exact and host-wide,
    # cudaHostRegister'ed, RDMA, VFIO and io_uring memory included, write-combined memory not.
    kernel_pinned_bytes: Optional[int] = None
    kernel_pinned_bytes_by_node: Optional[dict[str, int]] = None  # {"0": bytes, ...}
    # The best figure of all pinned memory: kernel's count + write-combined (est.) where the kernel
    # counts pins ("kernel"), else pinned (est.) + write-combined (est.) ("est.").
    pinned_bytes_total: Optional[int] = None
    pinned_bytes_source: Optional[str] = None
    # The kernel's count minus what the process rows explain (never below 0); None without the count.
    unattributed_pinned_bytes: Optional[int] = None
    numa_nodes: Optional[tuple[int, ...]] = None  # online NUMA node ids

    @property
    def used_bytes(self) -> Optional[int]:
        if self.mem_total_bytes is None or self.mem_available_bytes is None:
            return None
        return self.mem_total_bytes - self.mem_available_bytes


@dataclass(frozen=True)
class Link(Serial):
    gen: Optional[int] = None
    gen_max: Optional[int] = None
    width: Optional[int] = None
    width_max: Optional[int] = None
    # Payload rate of the link as it runs now (gen x width, after line encoding).
    theoretical_bytes_per_s: Optional[float] = None
    # The same at the link's maximum generation and width: what the slot is rated for.
    max_theoretical_bytes_per_s: Optional[float] = None

    @property
    def gen_below_max(self) -> bool:
        return self.gen is not None and self.gen_max is not None and self.gen < self.gen_max

    @property
    def width_below_max(self) -> bool:
        return self.width is not None and self.width_max is not None and self.width < self.width_max

    @property
    def below_max(self) -> bool:
        """Running below its rated generation or width (both figures known)."""
        return self.gen_below_max or self.width_below_max


# PCIe methods that count every link byte over the interval (see Pcie.method).
EXACT_PCIE_METHODS = frozenset({"gpm", "counters"})


@dataclass(frozen=True)
class Pcie(Serial):
    rx_bytes_per_s: Optional[float] = None
    tx_bytes_per_s: Optional[float] = None
    # "gpm": exact link bytes from chained GPM samples (Hopper and newer); "counters": exact link
    # bytes from NVML's cumulative 32-bit counters; "sampled": NVML's 20 ms throughput sample
    # extrapolated; None: no reading.
    method: Optional[str] = None
    rx_bytes: Optional[int] = None  # link bytes over the interval (exact methods only)
    tx_bytes: Optional[int] = None
    interval_s: Optional[float] = None
    replay_delta: Optional[int] = None
    recovery_delta: Optional[int] = None
    error_delta: Optional[int] = None  # sum of the error counters below
    counter_deltas: dict[str, Optional[int]] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        """Whether the bytes were counted (GPM or the link counters), not extrapolated."""
        return self.method in EXACT_PCIE_METHODS

    @property
    def traffic_bytes_per_s(self) -> Optional[float]:
        """RX + TX, of the directions that have a reading; None when neither has one."""
        known = [v for v in (self.rx_bytes_per_s, self.tx_bytes_per_s) if v is not None]
        return sum(known) if known else None


@dataclass(frozen=True)
class GpuProcess(Serial):
    pid: int
    gpu_memory_bytes: Optional[int] = None


@dataclass(frozen=True)
class Gpu(Serial):
    index: int
    name: Optional[str] = None
    uuid: Optional[str] = None
    pci_bus_id: Optional[str] = None
    link: Link = field(default_factory=Link)
    pcie: Pcie = field(default_factory=Pcie)
    memory_total_bytes: Optional[int] = None
    memory_used_bytes: Optional[int] = None
    cpu_affinity: Optional[str] = None  # CPU list, e.g. "0-15"
    numa_node: Optional[int] = None
    processes: tuple[GpuProcess, ...] = ()
    lost: bool = False  # NVML said the GPU fell off the bus
    notices: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProcessPinned(Serial):
    pid: int
    name: Optional[str] = None
    user: Optional[str] = None
    cmdline: Optional[str] = None
    pinned_bytes: Optional[int] = None
    write_combined_bytes: Optional[int] = None
    # "est." from /proc/PID/maps, "traced" from an in-process tracer report (exact).
    source: str = "est."
    pinned_mappings: Optional[int] = None
    # Pinned mappings that appeared or vanished since the previous scan (churn).
    mappings_churn: Optional[int] = None
    pinned_allocs_per_s: Optional[float] = None
    median_alloc_bytes: Optional[int] = None
    wc_readbacks: Optional[int] = None
    pageable_copy_bytes_per_s: Optional[float] = None
    registered_bytes: Optional[int] = None
    requested_pinned_bytes: Optional[int] = None
    gpu_memory_bytes: Optional[int] = None
    gpu_indices: tuple[int, ...] = ()
    # The tracer's call site (file:line) per behaviour: "alloc", "register", "rounding_waste",
    # "pageable_copy", "wc_readback"; each finding names the site of its own behaviour. Untrusted
    # text: shown through units.printable. A recording's older single "call_site" is not mapped to
    # a category (it could be any of them) and is ignored with the other unknown keys.
    call_sites: dict[str, str] = field(default_factory=dict)
    # True when the figures were lowered to what the process has resident (its pinned-looking
    # mappings are larger) or to RAM; see collect/processes/resident.py.
    estimate_capped: bool = False
    # {"node": bytes} of its pinned (/dev/zero) mappings' pages, from /proc/PID/numa_maps; multi-node hosts only.
    pinned_bytes_by_node: Optional[dict[str, int]] = None
    # VmLck from /proc/PID/status: mlock()ed bytes, which are not CUDA-pinned.
    vm_locked_bytes: Optional[int] = None
    # VmPin from /proc/PID/status: pages pinned through the kernel's own accounting (io_uring
    # registered buffers, RDMA memory regions); CUDA's pinning does not move it.
    vm_pinned_bytes: Optional[int] = None
    # The key of its group in Snapshot.cgroups (pod container, container, Slurm step, unit, cgroup).
    cgroup: Optional[str] = None
    # Traced with CUPTI ("cupti") or the CuPy/PyTorch hooks alone ("hooks"); None: not traced.
    trace_engine: Optional[str] = None
    # From CUPTI, over the tracer's window (about 5 s of GPU time): this process's host<->device copy
    # bytes per second of wall time, every host memory kind.
    h2d_copy_bytes_per_s: Optional[float] = None
    d2h_copy_bytes_per_s: Optional[float] = None
    # Its copies of 1 MiB or more from/to pinned memory on one GPU (the one with the most such bytes):
    # bytes over the GPU time they took (achieved rate), that GPU time, and the share of their bytes
    # on the legacy default stream (serialised with the stream's kernels).
    h2d_pinned_bulk_bytes_per_s: Optional[float] = None
    h2d_pinned_bulk_busy_s: Optional[float] = None
    d2h_pinned_bulk_bytes_per_s: Optional[float] = None
    d2h_pinned_bulk_busy_s: Optional[float] = None
    pinned_bulk_default_stream_share: Optional[float] = None
    copy_gpu_pci_bus_id: Optional[str] = None  # that GPU, as CUDA names it ("0000:41:00.0")
    # Traced: its copies per direction and host memory kind, keyed "h2d.pinned", "h2d.pageable",
    # "d2h.pinned", "d2h.pageable" (see TRANSFER_KEYS), each {"bytes_per_s": over the tracer's window
    # of wall time, "achieved_bytes_per_s": bytes over the GPU time of all its traced copies of that
    # kind, "rate_p50"/"rate_p10": median and 10th percentile of per-copy rates}; the last three are
    # CUPTI's (None with the hooks alone, which see no GPU time).
    transfers: Optional[dict[str, dict[str, Optional[float]]]] = None


TRANSFER_KEYS = ("h2d.pinned", "h2d.pageable", "d2h.pinned", "d2h.pageable")
TRANSFER_FIGURES = ("bytes_per_s", "achieved_bytes_per_s", "rate_p50", "rate_p10")


@dataclass(frozen=True)
class Cgroup(Serial):
    """A group of processes under one memory limit: a pod's container, a Docker or Podman container,
    a Slurm job step, a systemd unit, or a plain cgroup. Its text is printable and bounded."""

    key: str                                  # stable identity; ProcessPinned.cgroup names it
    kind: str                                 # "pod", "docker", "podman", "slurm", "systemd", "cgroup", "unknown"
    name: str                                 # what to call it: "ns/pod/container", a job step, a unit, a path
    path: Optional[str] = None                # its cgroup, as /proc/PID/cgroup writes it
    pod: Optional[str] = None
    namespace: Optional[str] = None
    container: Optional[str] = None           # the container's name where the node says it
    container_id: Optional[str] = None
    pod_uid: Optional[str] = None
    job: Optional[str] = None                 # Slurm job id
    step: Optional[str] = None                # Slurm step: a number, "batch", "extern", "interactive"
    unit: Optional[str] = None                # systemd unit
    memory_limit_bytes: Optional[int] = None  # the tightest limit on its path; None: none (or unknown)
    limit_path: Optional[str] = None          # the cgroup that sets that limit
    memory_current_bytes: Optional[int] = None
    oom_kills: Optional[int] = None           # the kernel's count of OOM kills in it
    oom_kills_at_start: Optional[int] = None  # that count when pinmon first saw the group
    pinned_bytes: Optional[int] = None        # its processes' pinned bytes (est. or traced) and VmPin
    write_combined_bytes: Optional[int] = None
    vm_pinned_bytes: Optional[int] = None     # of which VmPin (io_uring, RDMA)
    processes: int = 0                        # its processes in the snapshot's rows
    notes: tuple[str, ...] = ()               # why a figure is unknown
    # The user owning the delegated subtree it sits in (user@UID.service, or a directory on its path
    # not owned by root): its kind and ids are what that user named its cgroup, not the runtime's word.
    delegated_uid: Optional[int] = None


@dataclass(frozen=True)
class ProbeMeasurement(Serial):
    """One timed operation. ``kind``: "copy", "alloc", "free", "cpu_read", "cpu_write", "kernel_read"."""

    kind: str
    memory: str  # "pinned", "pageable", "write_combined", "mapped", "portable", "registered", "device"
    size_bytes: int
    direction: Optional[str] = None  # "h2d" / "d2h" for copies
    bytes_per_s: Optional[float] = None
    seconds: Optional[float] = None  # median time of one operation
    repeats: Optional[int] = None
    note: Optional[str] = None
    host_numa_node: Optional[int] = None  # the NUMA node the host buffer's pages were on (probe --numa)


@dataclass(frozen=True)
class ProbeResult(Serial):
    time: float
    gpu_index: Optional[int] = None
    status: str = "ok"  # "ok" or "unavailable"
    reason: Optional[str] = None
    kind: str = "quick"  # "quick", "sweep", "modes"
    link_theoretical_bytes_per_s: Optional[float] = None
    duration_s: Optional[float] = None
    max_pinned_bytes: Optional[int] = None
    measurements: tuple[ProbeMeasurement, ...] = ()
    # The GPU's link traffic while the probe ran, the probe's own included: the mean of the
    # collector's readings whose intervals overlap the probe (joined by the app, never measured by
    # the probe itself), the seconds those readings span, and their Pcie.method.
    link_rx_bytes_per_s: Optional[float] = None
    link_tx_bytes_per_s: Optional[float] = None
    link_window_s: Optional[float] = None
    link_method: Optional[str] = None

    def rate(self, direction: str, memory: str, size_bytes: Optional[int] = None) -> Optional[float]:
        """Bandwidth of the largest (or the given) copy of this direction and memory kind."""
        rows = [m for m in self.measurements
                if m.kind == "copy" and m.direction == direction and m.memory == memory
                and m.bytes_per_s is not None and (size_bytes is None or m.size_bytes == size_bytes)]
        if not rows:
            return None
        return max(rows, key=lambda m: m.size_bytes).bytes_per_s


@dataclass(frozen=True)
class Finding(Serial):
    rule: str
    severity: str
    subject: str
    message: str
    advice: str
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Snapshot(Serial):
    time: float
    host: HostMemory
    schema: str = SNAPSHOT_SCHEMA
    gpus: tuple[Gpu, ...] = ()
    processes: tuple[ProcessPinned, ...] = ()
    probe: Optional[ProbeResult] = None
    notices: tuple[str, ...] = ()
    interval_s: Optional[float] = None
    source: str = "live"  # "live", "replay" or "snapshot"
    # NVIDIA GPUs on the PCI bus (sysfs), counted without NVML; None when unknown.
    nvidia_pci_gpus: Optional[int] = None
    # Why NVML gives no GPU data (it could not start, or sees no GPU); None when it runs or was
    # not asked. With nvidia_pci_gpus > 0 it means GPUs that nothing monitors.
    nvml_error: Optional[str] = None
    # The groups (containers, pods, jobs) of the processes above, each with its own memory limit.
    cgroups: tuple[Cgroup, ...] = ()
    # Memory cgroup OOM kills in the kernel's log within the lookback (default 24 h), oldest first:
    # their groups may be gone.
    oom_kills: tuple[OomKill, ...] = ()

    def to_dict(self) -> dict:
        d = to_json(self)
        return {"schema": d.pop("schema"), **d}  # schema first: it is what a reader checks

    @classmethod
    def from_dict(cls, data: Any, path: str | None = None) -> "Snapshot":
        if not isinstance(data, dict):
            raise SchemaError(f"snapshot: expected an object, got {type(data).__name__}")
        schema = data.get("schema")
        if schema != SNAPSHOT_SCHEMA:
            raise SchemaError(f"snapshot: schema is {schema!r}, expected {SNAPSHOT_SCHEMA!r}")
        return from_dict_of(cls, data, "snapshot")


def worst_severity(findings: "typing.Iterable[Finding]") -> str:
    """"ok", "warning" or "critical" (info findings do not raise the status)."""
    rank = max((SEVERITY_RANK[f.severity] for f in findings), default=0)
    return {0: "ok", 1: "warning", 2: "critical"}[rank]
