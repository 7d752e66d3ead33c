"""Groups (containers, pods, jobs, units) as the Containers tab shows them: each group's pinned share
of its own memory limit, its severity, its row of cells and, on Enter, its rows in full.

No Textual here: what the user reads is a function of the snapshot's ``Cgroup`` and the advisor's
findings, unit-tested figure by figure. A group's severity is the worst active finding that names
it (``pinned-cgroup-share``, ``cgroup-oom-kills``), so the view follows the configured thresholds
and never decides a level of its own. A group whose processes have all gone stays in the snapshot
for a few minutes (the collector keeps its OOM count); it is shown as gone.
"""
from __future__ import annotations

from collections.abc import Sequence

from ...model import Cgroup, Finding, ProcessPinned, Snapshot
from ...units import fmt_bytes, fmt_int, fmt_share, printable, share
from .detail_row import DetailRow
from .format import command_brief, user_text

SEVERITY_RANK = {"critical": 2, "warning": 1}
# The pop-up lists a group's processes, the largest holders first, up to this many.
MAX_PROCESS_ROWS = 12


def group_findings(g: Cgroup, findings: Sequence[Finding]) -> list[Finding]:
    return [f for f in findings if f.values.get("cgroup") == g.key]


def group_severity(g: Cgroup, findings: Sequence[Finding]) -> str | None:
    """"critical", "warning" or None: the worst active finding about the group."""
    worst = max((f.severity for f in group_findings(g, findings) if f.severity in SEVERITY_RANK),
                key=SEVERITY_RANK.__getitem__, default=None)
    return worst


def limit_share(g: Cgroup) -> float | None:
    """What it holds (``HeldMemory.bytes``) as a fraction of its memory limit; None without a limit."""
    return share(g.held.bytes, g.limit.limit_bytes)


def gone(g: Cgroup) -> bool:
    """No process of the group is in the snapshot: it ended, or holds no pinned memory now."""
    return g.processes == 0


def sort_groups(groups: Sequence[Cgroup], findings: Sequence[Finding]) -> list[Cgroup]:
    """Worst first: severity (an OOM-killed group that has gone among the first), then the live ones
    before the gone, then share of the limit, then bytes held."""
    return sorted(groups, key=lambda g: (-SEVERITY_RANK.get(group_severity(g, findings) or "", 0), gone(g),
                                         -(limit_share(g) or 0.0), -(g.held.bytes or 0), g.key))


def group_of(p: ProcessPinned, snapshot: Snapshot | None) -> Cgroup | None:
    """The group of process ``p`` in ``snapshot``; None where it has none."""
    key = p.identity.cgroup
    if snapshot is None or not key:
        return None
    return next((g for g in snapshot.cgroups if g.key == key), None)


def group_summary(g: Cgroup) -> str:
    """"ml/trainer/worker: pinned 401.0 GiB = 78% of its 512.0 GiB limit": a group in one line."""
    held, limit = g.held.bytes, g.limit.limit_bytes
    if limit:
        figure = f"pinned {fmt_bytes(held)} = {fmt_share(held, limit)} of its {fmt_bytes(limit)} limit"
    else:
        figure = f"pinned {fmt_bytes(held)}, no memory limit"
    return f"{printable(g.name, 80)}: {figure}"


def members(g: Cgroup, snapshot: Snapshot | None) -> list[ProcessPinned]:
    """The group's processes in the snapshot, the largest holders first."""
    if snapshot is None:
        return []
    rows = [p for p in snapshot.processes if p.identity.cgroup == g.key]
    return sorted(rows, key=lambda p: (-(p.held.bytes or 0), p.pid))


def ungrouped(snapshot: Snapshot | None) -> list[ProcessPinned]:
    """Processes in no group (their cgroup unreadable, or a snapshot older than group figures)."""
    if snapshot is None:
        return []
    keys = {g.key for g in snapshot.cgroups}
    return [p for p in snapshot.processes if p.identity.cgroup not in keys]


def _identity_rows(g: Cgroup) -> list[DetailRow]:
    rows = []
    o = g.owner
    if g.kind == "pod":
        for label, value in (("namespace", o.namespace), ("pod", o.pod), ("container", o.container),
                             ("pod uid", o.pod_uid), ("container id", o.container_id)):
            if value:
                rows.append(DetailRow(label, printable(value, 200)))
        if not o.pod:
            rows.append(DetailRow("", "pod name n/a: the node's kubelet files do not say it (ids only)", "dim"))
    elif g.kind in ("docker", "podman"):
        for label, value in (("container", o.container), ("container id", o.container_id)):
            if value:
                rows.append(DetailRow(label, printable(value, 200)))
    elif g.kind == "slurm":
        job = printable(o.job, 40) if o.job else "n/a"
        rows.append(DetailRow("job", job + (f", step {printable(o.step, 40)}" if o.step else "")))
    elif g.kind == "systemd" and o.unit:
        rows.append(DetailRow("unit", printable(o.unit, 200)))
    if g.path:
        rows.append(DetailRow("cgroup", printable(g.path, 400)))
    return rows


def _limit_rows(g: Cgroup, found: Sequence[Finding]) -> list[DetailRow]:
    held, lim = g.held, g.limit
    flagged = "warning" if any(f.rule == "pinned-cgroup-share" for f in found) else ""
    if lim.limit_bytes:
        rows = [DetailRow("limit", fmt_bytes(lim.limit_bytes)
                          + (f" (set by {printable(lim.limit_path, 300)})" if lim.limit_path and lim.limit_path != g.path
                             else ""))]
        rows.append(DetailRow("pinned", f"{fmt_bytes(held.bytes)} = {fmt_share(held.bytes, lim.limit_bytes)} of the"
                                        " limit", flagged))
    else:
        rows = [DetailRow("limit", "none: only the host's RAM bounds it (pinned-ram-share)", "dim"),
                DetailRow("pinned", fmt_bytes(held.bytes))]
    parts = []
    if held.vm_pinned_bytes:
        parts.append(f"VmPin {fmt_bytes(held.vm_pinned_bytes)} (io_uring, RDMA)")
    if held.write_combined_bytes:
        parts.append(f"write-combined {fmt_bytes(held.write_combined_bytes)}")
    if parts:
        rows.append(DetailRow("", "of which " + ", ".join(parts)))
    if held.capped:
        rows.append(DetailRow("", "held to its memory in use: its processes' figures add up to more than the"
                                  " kernel charges the group", "dim"))
    share_text = (f" = {fmt_share(lim.current_bytes, lim.limit_bytes)} of the limit"
                  if lim.limit_bytes and lim.current_bytes is not None else "")
    rows.append(DetailRow("in use", f"{fmt_bytes(lim.current_bytes)}{share_text}, pinned or not"
                                    " (memory.current)"))
    return rows


def _oom_row(g: Cgroup, found: Sequence[Finding]) -> DetailRow:
    since = g.limit.oom_kills_since_start
    if g.limit.oom_kills is None:
        return DetailRow("OOM kills", "n/a (the kernel gives no count for this group)", "dim")
    text = f"{fmt_int(g.limit.oom_kills)} in all"
    if since is not None:
        text += f", {fmt_int(since)} since pinmon started"
    return DetailRow("OOM kills", text, "warning" if any(f.rule == "cgroup-oom-kills" for f in found) else "")


def group_rows(g: Cgroup, snapshot: Snapshot | None = None, findings: Sequence[Finding] = ()) -> list[DetailRow]:
    """The pop-up's rows for ``g``: who it is, its limit and pinned share, OOM kills, its processes."""
    found = group_findings(g, findings)
    rows = [DetailRow("group", printable(g.subject, 200), "head")]
    rows += _identity_rows(g)
    rows += _limit_rows(g, found)
    rows.append(_oom_row(g, found))
    for note in g.notes:
        rows.append(DetailRow("", printable(note, 200), "dim"))
    procs = members(g, snapshot)
    if not procs:
        rows.append(DetailRow("processes", "none in this snapshot: gone, or none holds pinned memory now", "dim"))
    for i, p in enumerate(procs[:MAX_PROCESS_ROWS]):
        vm = f" VmPin {fmt_bytes(p.held.vm_pinned_bytes)}" if p.held.vm_pinned_bytes else ""
        rows.append(DetailRow("processes" if not i else "",
                              f"{p.pid:>8} {fmt_bytes(p.held.bytes):>10}{vm}  {user_text(p)[:8]}"
                              f"  {command_brief(p, 120)}"))
    if len(procs) > MAX_PROCESS_ROWS:
        rows.append(DetailRow("", f"... and {len(procs) - MAX_PROCESS_ROWS} more (4: Processes, / filter)", "dim"))
    if found:
        rules = ", ".join(dict.fromkeys(printable(f.rule, 40) for f in found))
        rows.append(DetailRow("findings", rules + " (6: Advisor)", "warning"))
    return rows
