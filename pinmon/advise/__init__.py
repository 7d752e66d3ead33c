"""The advisor: pure rules over snapshots that return findings; no I/O.

``advise(history)`` runs every rule (or the ``only`` ones) over a snapshot history, oldest first, and
returns the findings worst first. ``RULE_DOCS`` has a one-line description per stable rule id, with
the default thresholds, for the README and ``--help``.
"""
from __future__ import annotations

import re
from typing import Iterable, Optional, Sequence

from ..model import Finding, Snapshot
from .rules import RULES
from .thresholds import Thresholds

__all__ = ["advise", "Thresholds", "RULES", "RULE_DOCS"]

RULE_DOCS: dict[str, str] = {
    "gpu-lost": "critical: a GPU fell off the bus (NVML lost it)",
    "pinned-ram-share": "pinned host memory vs effective RAM: warning at 30%, critical above 50%",
    "low-available-memory": "available RAM below 10% of effective RAM while pinned memory is in use",
    "pinned-growth": "a process's pinned memory grew steadily to over 1 GiB and by over 50% in 10 min",
    "pinned-small-allocs": "10+ pinned allocations/s with a median under 1 MiB (allocate once, reuse)",
    "pageable-bulk-copies": "100 MB/s or more of host-device copies from pageable memory",
    "pinned-rounding-waste": "traced: 256 MiB+ and 25%+ of a process's pinned memory held beyond what it requested",
    "wc-cpu-readback": "traced: device-to-host copies into write-combined memory, read uncached (info: holds it)",
    "pcie-link-degraded": "link below its rated gen/width under 1 GB/s+ of traffic (info: narrow while idle)",
    "pcie-errors": "PCIe replay or error counters rose since start (info: link recoveries alone)",
    "probe-below-link": "the probe's best pinned copy ran below 70% of the link's theoretical rate",
    "slow-pinned-copies": "traced with CUPTI: pinned copies of 1 MiB+ under 50% of the probe's rate over 1 s+ of copying",
    "memlock-limit-low": "info: RLIMIT_MEMLOCK under 64 MiB (caps mlock and RDMA, not CUDA pinning)",
    "gpu-driver-unavailable": "critical: NVIDIA GPUs on the PCI bus but NVML could not start (driver broken or missing)",
    "pinned-unattributed": "1 GiB+ and 20%+ of the kernel's pinned count explained by no process (registered, RDMA, io_uring)",
    "mlock-not-pinned": "a CUDA process with 1 GiB+ mlock()ed (VmLck): locked is not pinned, copies run at pageable speed",
    "pinned-numa-remote": "256 MiB+ and 10%+ of a process's pinned pages on a NUMA node other than its GPUs'",
}

_SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


def _natural(text: str) -> tuple:
    """'gpu10' after 'gpu2', 'pid 99' before 'pid 100'."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Worst first (critical, warning, info), then by rule id, then by subject."""
    return sorted(findings, key=lambda f: (_SEVERITY_ORDER.get(f.severity, 3), f.rule, _natural(f.subject)))


def advise(history: Sequence[Snapshot], thresholds: Thresholds = Thresholds(),
           only: Optional[Iterable[str]] = None) -> list[Finding]:
    """Findings for the latest snapshot of ``history`` (oldest first), worst first.

    ``only`` limits the run to these rule ids; an unknown id raises ``ValueError``.
    A single ``Snapshot`` is accepted as a history of one.
    """
    if isinstance(history, Snapshot):
        history = (history,)
    history = tuple(history)  # a deque or a generator works too; rules index into it
    if only is None:
        ids = list(RULES)
    else:
        ids = list(dict.fromkeys((only,) if isinstance(only, str) else only))
        unknown = [i for i in ids if i not in RULES]
        if unknown:
            raise ValueError(f"unknown rule id {unknown[0]!r} (known: {', '.join(RULES)})")
    if not history:
        return []
    findings: list[Finding] = []
    for rule_id in ids:
        findings.extend(RULES[rule_id](history, thresholds))
    return sort_findings(findings)
