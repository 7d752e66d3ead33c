"""Every rule of the advisor, in the order ``pinmon --help`` lists them, and what is derived from them.

Each rule is declared with ``@rule`` next to its check (id, one-line doc, the ``Thresholds`` fields
it reads, the severities it reports); ``REGISTRY`` lists them. ``RULES`` (id -> rule) and
``RULE_DOCS`` (id -> doc with the default thresholds) are built from it, and so are the rule
tables of README.md and docs/metrics.md (``readme_table``, ``metrics_table``; a test keeps the docs
equal to them) and the exporter's per-rule family.
"""
from __future__ import annotations

from . import cgroups, copies, memory, pcie, probe, traced
from .rule import Rule

REGISTRY: tuple[Rule, ...] = (
    pcie.gpu_lost,
    memory.pinned_ram_share,
    memory.low_available_memory,
    memory.pinned_growth,
    traced.pinned_small_allocs,
    traced.pageable_bulk_copies,
    traced.pinned_rounding_waste,
    traced.wc_cpu_readback,
    pcie.pcie_link_degraded,
    pcie.pcie_errors,
    probe.probe_below_link,
    copies.slow_pinned_copies,
    memory.memlock_limit_low,
    pcie.gpu_driver_unavailable,
    memory.pinned_unattributed,
    memory.mlock_not_pinned,
    memory.pinned_numa_remote,
    cgroups.pinned_cgroup_share,
    cgroups.cgroup_oom_kills,
    cgroups.oom_killed,
)

RULES: dict[str, Rule] = {r.id: r for r in REGISTRY}
RULE_DOCS: dict[str, str] = {r.id: r.doc for r in REGISTRY}

if len(RULES) != len(REGISTRY):
    raise ValueError("two rules share an id")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def readme_table() -> str:
    """README.md's table of the rules: id, severities, the thresholds it reads with their defaults
    (the ``[thresholds]`` keys of the config file), and the doc line."""
    rows = ["| rule | severity | default thresholds (`[thresholds]`) | finds |", "| --- | --- | --- | --- |"]
    for r in REGISTRY:
        defaults = ", ".join(f"`{d.name}` {d.shown}" for d in r.defaults) or "none"
        rows.append(f"| `{r.id}` | {', '.join(r.severities)} | {_cell(defaults)} | {_cell(r.doc)} |")
    return "\n".join(rows) + "\n"


def metrics_table() -> str:
    """docs/metrics.md's table of the values the ``rule`` and ``severity`` labels take."""
    rows = ["| `rule` | `severity` |", "| --- | --- |"]
    rows += [f"| `{r.id}` | {', '.join(f'`{s}`' for s in r.severities)} |" for r in REGISTRY]
    return "\n".join(rows) + "\n"
