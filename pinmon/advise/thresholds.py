"""The advisor's thresholds: one frozen dataclass whose field names are the config file's API.

Every field carries its unit in its name and a ``kind`` in its metadata ("fraction", "bytes",
"bytes_per_s", "per_s", "seconds") that ``pinmon.cli.config`` uses to validate a ``[thresholds]`` table
and the rule docs use to print its default, plus a one-line ``doc`` that starts with the id of the
rule reading it (the rule declares it too: ``registry``). A "seconds" field that says how far back a
rule reads the snapshot history carries ``lookback`` too: the advisor's history (``history``) keeps
that much time. Changing a name breaks users' config files: add, never rename.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..units import GIB, MIB


def _t(default, kind: str, doc: str, lookback: bool = False):
    return field(default=default, metadata={"kind": kind, "doc": doc, "lookback": lookback})


@dataclass(frozen=True)
class Thresholds:
    """Limits the rules compare against. Bytes are bytes, rates bytes/second, fractions 0..1."""

    # pinned-ram-share
    pinned_ram_warning_fraction: float = _t(
        0.30, "fraction", "pinned-ram-share: warning when pinned / effective RAM is at or above this")
    pinned_ram_critical_fraction: float = _t(
        0.50, "fraction", "pinned-ram-share: critical when pinned / effective RAM is above this")
    # pinned-small-allocs
    small_alloc_rate_per_s: float = _t(
        10.0, "per_s", "pinned-small-allocs: pinned allocations per second at or above which to warn")
    small_alloc_median_bytes: int = _t(
        1 * MIB, "bytes", "pinned-small-allocs: ...when the median allocation is below this many bytes")
    # pcie-link-degraded
    link_degraded_traffic_bytes_per_s: float = _t(
        1e9, "bytes_per_s", "pcie-link-degraded: rx+tx traffic at or above which a slow link is a warning")
    # pageable-bulk-copies
    pageable_copy_bytes_per_s: float = _t(
        100e6, "bytes_per_s", "pageable-bulk-copies: pageable copy rate at or above which to warn")
    # probe-below-link
    probe_link_fraction: float = _t(
        0.70, "fraction", "probe-below-link: warn when the best pinned copy is below this share of the link")
    # low-available-memory
    low_available_fraction: float = _t(
        0.10, "fraction", "low-available-memory: warn when available / effective RAM is below this")
    # pinned-growth
    growth_window_s: float = _t(
        600.0, "seconds", "pinned-growth: look-back window in seconds", lookback=True)
    growth_min_bytes: int = _t(
        1 * GIB, "bytes", "pinned-growth: a process must end the window above this many pinned bytes")
    growth_min_fraction: float = _t(
        0.50, "fraction", "pinned-growth: ...and have grown by more than this share of its first sample")
    growth_max_drop_fraction: float = _t(
        0.05, "fraction", "pinned-growth: a drop larger than this between samples means it is not a leak")
    growth_fill_horizon_s: float = _t(
        600.0, "seconds", "pinned-growth: or, growing steadily, it would use up the available memory within this many seconds")
    growth_fast_min_span_s: float = _t(
        10.0, "seconds", "pinned-growth: ...judged from at least this many seconds of samples")
    # pinned-rounding-waste
    rounding_waste_min_bytes: int = _t(
        256 * MIB, "bytes", "pinned-rounding-waste: pinned bytes held beyond those requested, at or above which to warn")
    rounding_waste_min_fraction: float = _t(
        0.25, "fraction", "pinned-rounding-waste: ...when that waste is at least this share of the pinned bytes")
    # slow-pinned-copies
    slow_copy_fraction: float = _t(
        0.50, "fraction", "slow-pinned-copies: warn when pinned copies of 1 MiB+ reach under this share of the probe's rate")
    slow_copy_min_busy_s: float = _t(
        1.0, "seconds", "slow-pinned-copies: ...over at least this many seconds of copying in the tracer's window")
    # memlock-limit-low
    memlock_low_bytes: int = _t(
        64 * MIB, "bytes", "memlock-limit-low: RLIMIT_MEMLOCK below this many bytes is reported")
    # pinned-unattributed
    unattributed_min_bytes: int = _t(
        1 * GIB, "bytes", "pinned-unattributed: pinned bytes no process row explains, at or above which to warn")
    unattributed_min_fraction: float = _t(
        0.20, "fraction", "pinned-unattributed: ...when they are at least this share of the kernel's count")
    # mlock-not-pinned
    mlock_min_bytes: int = _t(
        1 * GIB, "bytes", "mlock-not-pinned: VmLck of a CUDA process at or above which to warn")
    # pinned-cgroup-share
    cgroup_pinned_warning_fraction: float = _t(
        0.30, "fraction", "pinned-cgroup-share: warning when a group's pinned bytes / its memory limit is at or above this")
    cgroup_pinned_critical_fraction: float = _t(
        0.50, "fraction", "pinned-cgroup-share: critical when a group's pinned bytes / its memory limit is above this")
    # oom-killed
    oom_shmem_critical_fraction: float = _t(
        0.50, "fraction", "oom-killed: critical when shared memory (where CUDA's pinned memory is) was at least"
        " this share of the killed process's resident memory")
    # pinned-numa-remote
    numa_remote_min_bytes: int = _t(
        256 * MIB, "bytes", "pinned-numa-remote: a process's pinned bytes on nodes other than its GPUs', at or above which to warn")
    numa_remote_min_fraction: float = _t(
        0.10, "fraction", "pinned-numa-remote: ...when they are at least this share of its pinned pages")


def lookback_fields() -> tuple[str, ...]:
    """The fields that say, in seconds, how far back a rule reads the snapshot history."""
    return tuple(f.name for f in fields(Thresholds) if f.metadata.get("lookback"))


def threshold_fields() -> dict[str, tuple[str, str]]:
    """{field name: (kind, doc)} in declaration order."""
    return {f.name: (f.metadata["kind"], f.metadata["doc"]) for f in fields(Thresholds)}
