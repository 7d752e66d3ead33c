"""Pure view helpers shared by the widgets: link states, shares, probe tables, process sorting.

No Textual here, so what decides what the user sees (is a link degraded or just idle?) is
unit-tested without an app. Where a rule's threshold decides it, the threshold is the advisor's
(``Thresholds``, as the user configured it), never a figure of the TUI's own.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ...advise.thresholds import Thresholds
from ...model import EXACT_PCIE_METHODS, Gpu, HostMemory, ProbeResult, ProcessPinned
from ...units import fmt_bytes, fmt_main_node, fmt_rate, fmt_seconds, printable, share

SPARK_SAMPLES = 60

# Where the GPUs would be, live on a machine without one (the notice bar says why there is none).
NO_GPU_HINT = "no GPU here: `pinmon demo` plays a session recorded on an H200"

# What a panel says before the first snapshot (the app draws its frame first, then reads the source).
COLLECTING = "collecting…"

SEVERITY_STYLE = {"critical": "$error", "warning": "$warning", "info": "$primary"}
SEVERITY_LABEL = {"critical": "CRIT", "warning": "WARN", "info": "INFO"}


def link_state(gpu: Gpu, thresholds: Thresholds) -> str:
    """'lost', 'unknown', 'full', 'degraded' (below max under load) or 'downshift' (below max, idle).

    Under ``thresholds.link_degraded_traffic_bytes_per_s`` of traffic (the ``pcie-link-degraded``
    rule's floor) a link running below its maximum is the driver saving power (ASPM / dynamic link
    speed), not a fault: it retrains to full speed as soon as transfers start."""
    if gpu.lost:
        return "lost"
    link = gpu.link
    if link.gen is None and link.width is None:
        return "unknown"
    if not link.below_max:
        return "full"
    traffic = gpu.pcie.traffic_bytes_per_s
    if traffic is not None and traffic >= thresholds.link_degraded_traffic_bytes_per_s:
        return "degraded"
    return "downshift"


def method_label(method: str | None) -> str:
    """How the rate was measured, in the fewest characters that stay honest."""
    if method in EXACT_PCIE_METHODS:
        return "exact"
    return "est." if method == "sampled" else "n/a"


def error_total(gpu: Gpu) -> int | None:
    """Replays + recoveries + the other error counters, increase since pinmon started; None = no counters."""
    p = gpu.pcie
    parts = (p.replay_delta, p.recovery_delta, p.error_delta)
    if all(v is None for v in parts):
        return None
    return sum(v or 0 for v in parts)


def error_text(gpu: Gpu, detail: bool = True) -> str:
    total = error_total(gpu)
    if total is None:
        return "errors n/a"
    if not total or not detail:
        return f"errors +{total}"
    p = gpu.pcie
    named = {"replay": p.replay_delta, "recovery": p.recovery_delta}
    named.update({k: v for k, v in p.counter_deltas.items() if k not in ("replay", "l0_to_recovery")})
    parts = [f"{k} +{v}" for k, v in named.items() if v]
    return f"errors +{total} ({', '.join(parts)})"


def fmt_time(t: float | None, with_date: bool = True) -> str:
    if t is None:
        return "n/a"
    return time.strftime("%Y-%m-%d %H:%M:%S" if with_date else "%H:%M:%S", time.localtime(t))


# --- probe ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProbeRow:
    direction: str  # "h2d" / "d2h"
    pinned_bytes_per_s: float | None
    pageable_bytes_per_s: float | None
    link_bytes_per_s: float | None

    @property
    def speedup(self) -> float | None:
        if self.pinned_bytes_per_s is None or not self.pageable_bytes_per_s:
            return None
        return self.pinned_bytes_per_s / self.pageable_bytes_per_s

    @property
    def pinned_share_of_link(self) -> float | None:
        return share(self.pinned_bytes_per_s, self.link_bytes_per_s)


def probe_rows(result: ProbeResult, fallback_link_bytes_per_s: float | None = None) -> list[ProbeRow]:
    link = result.link_theoretical_bytes_per_s or fallback_link_bytes_per_s
    return [ProbeRow(d, result.rate(d, "pinned"), result.rate(d, "pageable"), link) for d in ("h2d", "d2h")]


def sweep_sizes(result: ProbeResult) -> list[int]:
    return sorted({m.size_bytes for m in result.measurements if m.kind == "copy"})


def other_measurements(result: ProbeResult) -> list[str]:
    """One line per non-copy measurement (allocation cost, CPU access to pinned/WC memory...)."""
    lines = []
    for m in result.measurements:
        if m.kind == "copy":
            continue
        figure = fmt_rate(m.bytes_per_s) if m.bytes_per_s is not None else fmt_seconds(m.seconds)
        note = f"  ({printable(m.note)})" if m.note else ""
        lines.append(f"{printable(m.kind, 11):<11} {printable(m.memory, 14):<14} {fmt_bytes(m.size_bytes):>10}"
                     f"  {figure}{note}")
    return lines


# --- processes -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SortColumn:
    key: str
    label: str
    descending: bool
    value: Callable[[ProcessPinned], float | str]  # what the rows sort by


def _num(v: float | None) -> float:
    # Unknown sorts after every reading whatever the direction: see sort_processes.
    return float("-inf") if v is None else float(v)


# "pinned" is what a process holds in all (HeldMemory.bytes: pinned, write-combined and VmPin), the
# figure its PINNED cell shows.
SORT_COLUMNS: tuple[SortColumn, ...] = (
    SortColumn("pinned", "pinned", True, lambda p: _num(p.held.bytes)),
    SortColumn("wc", "write-combined", True, lambda p: _num(p.held.write_combined_bytes)),
    SortColumn("churn", "churn", True, lambda p: _num(p.held.mappings_churn)),
    SortColumn("gpu_mem", "GPU memory", True, lambda p: _num(p.placement.gpu_memory_bytes)),
    SortColumn("pid", "pid", False, lambda p: p.pid),
    SortColumn("user", "user", False, lambda p: (p.identity.user or "").lower()),
    SortColumn("command", "command", False, lambda p: (p.identity.cmdline or p.identity.name or "").lower()),
)


def command_text(p: ProcessPinned, max_len: int = 200) -> str:
    """The command line (else the name) as one printable line: a ``python -c`` script's newlines
    become spaces and terminal escapes are shown, not sent."""
    return printable(p.identity.cmdline or p.identity.name or None, max_len)


# Programs that run a script named among their arguments: the script is what tells their rows apart.
_INTERPRETER = re.compile(r"^(python|pypy|ipython|node|ruby|perl|php|julia|bash|sh|zsh|Rscript|torchrun|"
                          r"accelerate|deepspeed)[0-9.]*$")
# Interpreter options that take the next argument as their value (python -X opt, -W arg, -m module...).
_OPTION_WITH_VALUE = frozenset({"-X", "-W", "-Q", "-O", "--nproc_per_node", "--nproc-per-node", "--nnodes",
                                "--master_port", "--master-port", "--config_file", "--num_processes"})


def command_brief(p: ProcessPinned, max_len: int = 200) -> str:
    """The command line's meaningful part as one printable line: the program's name without its
    directory, and for an interpreter the script without its directory ("python3 train.py --lr 3"),
    or its module ("python3 -m pinmon.trace train.py"); the other arguments as they are. Falls back
    to the name when the command line is unknown (a kernel thread, a process that denied it)."""
    who = p.identity
    line = printable(who.cmdline or None, 4096) if who.cmdline else ""
    args = line.split(" ") if line.strip() else []
    if not args:
        return printable(who.name or None, max_len)
    out = [_base(args[0])]
    rest = args[1:]
    if _INTERPRETER.match(out[0]):
        # Options stay (-u, -m module); the first argument that is no option is the script.
        i = 0
        while i < len(rest) and rest[i].startswith("-") and rest[i] != "-c":
            option = rest[i]
            takes_value = option in _OPTION_WITH_VALUE or option == "-m"
            out += rest[i:i + 2] if takes_value else [option]
            i += 2 if takes_value else 1
            if option == "-m":
                break  # the module's own arguments follow: its script among them
        rest = rest[i:]
        if rest and not rest[0].startswith("-"):
            rest = [_base(rest[0])] + rest[1:]
    text = " ".join(out + [a for a in rest if a != ""])
    return printable(text, max_len)


def _base(arg: str) -> str:
    """``/opt/venv/bin/python3`` -> ``python3``; an argument ending in "/" keeps its last part."""
    base = arg.rstrip("/").rsplit("/", 1)[-1]
    return base or arg


def name_text(p: ProcessPinned) -> str:
    """The process name (else the command line), one printable line."""
    return printable(p.identity.name or p.identity.cmdline or None, 60)


def user_text(p: ProcessPinned) -> str:
    return printable(p.identity.user or None, 32)


def sort_processes(procs: Sequence[ProcessPinned], column: SortColumn) -> list[ProcessPinned]:
    # Ties broken by pid so the table does not shuffle between refreshes.
    rows = sorted(procs, key=lambda p: p.pid)
    return sorted(rows, key=column.value, reverse=column.descending)


def filter_processes(procs: Sequence[ProcessPinned], text: str,
                     group_names: Mapping[str, str] | None = None) -> list[ProcessPinned]:
    """Substring match on pid, name, user, command line or the name of its group (container, pod,
    job: ``group_names`` maps a group's key to it), case-insensitive."""
    needle = text.strip().lower()
    if not needle:
        return list(procs)
    names = group_names or {}
    return [p for p in procs
            if needle in str(p.pid) or needle in (p.identity.name or "").lower()
            or needle in (p.identity.user or "").lower() or needle in (p.identity.cmdline or "").lower()
            or needle in names.get(p.identity.cgroup or "", "").lower()]


# --- NUMA placement ------------------------------------------------------------------------------

def multi_node(host: HostMemory) -> bool:
    """Whether the host has more than one NUMA node (``HostMemory.numa_nodes``; None: unknown)."""
    return host.numa_nodes is not None and len(host.numa_nodes) > 1


def node_cell(p: ProcessPinned) -> str:
    """"1 (75%)": the node holding most of the process's pinned pages, as ``pinmon check`` prints it."""
    return fmt_main_node(p.placement.pinned_bytes_by_node)


def local_share(p: ProcessPinned, gpus: Sequence[Gpu]) -> float | None:
    """The share of the process's pinned pages on the NUMA nodes of the GPUs it uses; None where
    its placement, its GPUs or their nodes are unknown."""
    by_node = p.placement.pinned_bytes_by_node
    nodes = {str(g.numa_node) for g in gpus if g.index in p.placement.gpu_indices and g.numa_node is not None}
    if not nodes or not by_node:
        return None
    total = sum(v for v in by_node.values() if v > 0)
    if total <= 0:
        return None
    return sum(v for n, v in by_node.items() if n in nodes and v > 0) / total
