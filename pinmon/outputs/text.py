"""The human report of ``pinmon check`` (and of ``pinmon`` without a terminal app): plain text.

Estimates are labelled "est."; unknown values print "n/a". Lines are wrapped to ``width``. Every
text that comes from outside (host and process names, GPU names, notices, a snapshot file's
strings, the findings built from them) goes through ``units.printable``: one line, no terminal
escapes, bounded, so it can neither move the cursor nor break a table row.
"""
from __future__ import annotations

import textwrap
import time
from collections.abc import Sequence

from ..model import Cgroup, Finding, Gpu, HostMemory, OomKill, ProcessPinned, Snapshot, worst_severity
from ..model.traffic import CopyShare, TrafficExplained, explain_traffic
from ..units import (
    fmt_bytes,
    fmt_int,
    fmt_link,
    fmt_main_node,
    fmt_nodes,
    fmt_pct,
    fmt_rate,
    fmt_share,
    fmt_traffic,
    printable,
)

# Longest a finding's message or advice may print (it wraps); names and notices are shorter.
_MAX_TEXT = 2000


def host_lines(s: Snapshot) -> list[str]:
    h = s.host
    eff = h.effective_mem_limit_bytes
    lines = [
        f"RAM      {fmt_bytes(h.mem_total_bytes)} total, {fmt_bytes(h.mem_available_bytes)} available,"
        f" effective limit {fmt_bytes(eff)}"
        + (f" (cgroup {fmt_bytes(h.cgroup_limit_bytes)})" if h.cgroup_limit_bytes else ""),
        *pinned_lines(h),
        f"other    swap used {fmt_bytes(h.swap_used_bytes)}, Shmem {fmt_bytes(h.shmem_bytes)},"
        f" Mlocked {fmt_bytes(h.mlocked_bytes)}, memlock limit "
        + ("unlimited" if h.memlock_unlimited else fmt_bytes(h.memlock_limit_bytes)),
    ]
    return lines


def pinned_lines(h: HostMemory) -> list[str]:
    """The pinned figures: the kernel's exact count where the snapshot has it (with what the process
    rows explain of it, the rest, and its split by NUMA node), else the /proc/PID/maps estimate."""
    eff = h.effective_mem_limit_bytes
    wc = f"write-combined {fmt_bytes(h.write_combined_bytes_est)} (est.)"
    if h.kernel_pinned_bytes is None:
        return [f"pinned   {fmt_bytes(h.pinned_bytes_est)} (est.) = {fmt_share(h.pinned_bytes_est, eff)}"
                f" of effective RAM; {wc}",
                "         kernel's count n/a (no FOLL_PIN counters in /proc/vmstat)"]
    explained = None
    if h.unattributed_pinned_bytes is not None:
        explained = max(0, h.kernel_pinned_bytes - h.unattributed_pinned_bytes)
    lines = [f"pinned   {fmt_bytes(h.kernel_pinned_bytes)} (kernel's count) + {wc}"
             f" = {fmt_share(h.pinned_bytes_total, eff)} of effective RAM",
             f"         processes' mappings and VmPin explain {fmt_bytes(explained)},"
             f" unattributed {fmt_bytes(h.unattributed_pinned_bytes)}"]
    by_node = h.kernel_pinned_bytes_by_node
    if by_node and len(by_node) > 1:
        lines[-1] += "; by node: " + fmt_nodes(by_node)
    return lines


def gpu_line(g: Gpu) -> str:
    name, bus = printable(g.name, 60), printable(g.pci_bus_id, 40)
    if g.lost:
        return f"GPU {g.index}  {name}  {bus if g.pci_bus_id else ''}  LOST (fell off the bus)"
    link, p = g.link, g.pcie
    method = {"gpm": "link bytes, GPM", "counters": "link bytes", "sampled": "est., 20 ms sample"}.get(
        p.method or "", "n/a")
    errs = [f"{printable(k, 40)} +{v}" for k, v in sorted(p.counter_deltas.items()) if v]
    node = f"  NUMA node {g.numa_node}" if g.numa_node is not None else ""
    return (f"GPU {g.index}  {name}  {bus}{node}\n"
            f"    link {fmt_link(link.gen, link.width)} (max {fmt_link(link.gen_max, link.width_max)},"
            f" {fmt_rate(link.theoretical_bytes_per_s)} now)  {fmt_traffic(p.rx_bytes_per_s, p.tx_bytes_per_s)}"
            f" ({method}; {fmt_share(p.traffic_bytes_per_s, link.theoretical_bytes_per_s)} of link)\n"
            f"    PCIe errors since start: {', '.join(errs) if errs else 'none'}")


_METHOD_WORDS = {"gpm": "link bytes, GPM", "counters": "link bytes", "sampled": "est., 20 ms sample"}
_MEMORY_SHORT = {"write_combined": "write-combined"}


def _share_text(s: CopyShare, direction: bool = False) -> str:
    way = f"{'H2D' if s.direction == 'h2d' else 'D2H'} " if direction else ""
    name = f" ({printable(s.name, 24)})" if s.name else ""
    return f"{fmt_rate(s.bytes_per_s)} pid {s.pid}{name}, {way}{_MEMORY_SHORT.get(s.memory, printable(s.memory, 16))}"


def traffic_lines(explained: TrafficExplained, limit: int = 5) -> list[str]:
    """Per GPU and direction, the link's traffic and the measured copies on it, largest first ("GPU 0
    RX 40.0 GB/s (link bytes): 32.0 GB/s pid 123, pinned; 6.0 GB/s pid 456, pageable = 95% explained");
    then the copies whose GPU cannot be known, and what a share leaves out."""
    out = []
    for link in explained.links:
        if not link.shares and not link.link_bytes_per_s:
            continue
        method = _METHOD_WORDS.get(link.method or "", "no reading")
        head = f"GPU {link.gpu_index} {link.word} {fmt_rate(link.link_bytes_per_s)} ({method}): "
        shown = [_share_text(s) for s in link.shares[:limit]]
        rest = link.shares[limit:]
        if rest:
            shown.append(f"{fmt_rate(sum(s.bytes_per_s for s in rest))} {len(rest)} more")
        body = "; ".join(shown) if shown else "no measured copies"
        tail = f" = {fmt_pct(link.explained_share)} explained" if link.shares and link.explained_share is not None else ""
        out.append(head + body + tail)
    if explained.unplaced:
        shown = [_share_text(s, direction=True) for s in explained.unplaced[:limit]]
        more = len(explained.unplaced) - limit
        why = ("GPU not known (a process on several GPUs, or one NVML does not list)" if explained.links
               else "no GPU monitored, no link to compare with")
        out.append(f"{why}: " + "; ".join(shown) + (f"; and {more} more" if more > 0 else ""))
    if out and explained.links:
        out.append("(link bytes include protocol overhead, ~7% on RX; TX also carries the read requests of"
                   " H2D copies; copies are over their own window)")
    return out


def process_table(procs: Sequence[ProcessPinned], limit: int = 10, nodes: bool = False) -> list[str]:
    """The top ``limit`` rows by held bytes (``HeldMemory.bytes``: pinned, write-combined and VmPin),
    which PINNED shows; WC and VMPIN are parts of it. ``nodes``: a NODE column (multi-node hosts); a
    VMPIN column where a row has VmPin (io_uring, RDMA)."""
    rows = sorted(procs, key=lambda p: -(p.held.bytes or 0))[:limit]
    node_head = f" {'NODE':<9}" if nodes else ""
    vmpin = any(p.held.vm_pinned_bytes for p in procs)
    vmpin_head = f" {'VMPIN':>10}" if vmpin else ""
    out = [f"{'PID':>7} {'USER':<10} {'PINNED':>10}{vmpin_head} {'WC':>10} {'MAPS':>5}{node_head} {'SRC':<8} COMMAND"]
    for p in rows:
        held, who = p.held, p.identity
        node = f" {fmt_main_node(p.placement.pinned_bytes_by_node):<9}" if nodes else ""
        pin = f" {fmt_bytes(held.vm_pinned_bytes):>10}" if vmpin else ""
        pid = p.pid if p.pid else "-"  # pid 0: a row read from a saved maps file, no process
        out.append(f"{pid:>7} {printable(who.user, 10):<10} {fmt_bytes(held.bytes):>10}{pin}"
                   f" {fmt_bytes(held.write_combined_bytes):>10} {fmt_int(held.mappings):>5}{node}"
                   f" {printable(p.source, 8):<8} {printable(who.name, 30)}")
    if len(procs) > limit:
        out.append(f"... and {len(procs) - limit} more")
    return out


def group_head(g: Cgroup) -> str:
    """A group's line: its name, its limit and its held share of that limit, OOM kills."""
    held, limit_bytes = g.held.bytes or 0, g.limit.limit_bytes
    capped = " (held to its memory in use)" if g.held.capped else ""
    limit = (f"limit {fmt_bytes(limit_bytes)}, pinned {fmt_bytes(held)}{capped} ="
             f" {fmt_share(held, limit_bytes)} of it") if limit_bytes else \
        f"no limit, pinned {fmt_bytes(held)}{capped}"
    kills = ""
    since = g.limit.oom_kills_since_start
    if since:
        kills = f", {fmt_int(since)} OOM kill(s) since start"
    elif g.limit.oom_kills_at_start:
        kills = f", {fmt_int(g.limit.oom_kills_at_start)} OOM kill(s) before pinmon started"
    return f"{printable(g.subject, 80)}: {limit}{kills}"


def grouped_process_lines(procs: Sequence[ProcessPinned], groups: Sequence[Cgroup], limit: int = 10,
                          nodes: bool = False, max_groups: int = 10) -> list[str]:
    """The process table, one block per group (container, pod, job) with the group's limit and
    pinned share; as one table where the snapshot has no groups."""
    if not groups:
        return process_table(procs, limit=limit, nodes=nodes)
    by_key: dict[str | None, list[ProcessPinned]] = {}
    for p in procs:
        by_key.setdefault(p.identity.cgroup, []).append(p)
    shown = [g for g in groups if g.key in by_key][:max_groups]
    out: list[str] = []
    for g in shown:
        out.append(group_head(g))
        out += ["  " + line for line in process_table(by_key[g.key], limit=limit, nodes=nodes)]
    rest = [g for g in groups if g.key in by_key][max_groups:]
    if rest:
        out.append(f"... and {len(rest)} more group{'s' if len(rest) != 1 else ''}")
    loose = by_key.get(None, []) + [p for k, ps in by_key.items()
                                     if k is not None and k not in {g.key for g in groups} for p in ps]
    if loose:
        out.append("no group")
        out += ["  " + line for line in process_table(loose, limit=limit, nodes=nodes)]
    return out


def oom_kill_line(k: OomKill) -> str:
    """One kill from the kernel's log: when, the group (named as live groups are), the process, the
    limit and the shared (pinned) memory at the kill."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(k.time))
    limit = f"limit {fmt_bytes(k.memory_limit_bytes)}" if k.memory_limit_bytes is not None else "limit n/a"
    shmem = ""
    if k.shmem_rss_bytes is not None and k.rss_bytes:
        shmem = (f", shmem {fmt_bytes(k.shmem_rss_bytes)} of {fmt_bytes(k.rss_bytes)} resident"
                 f" ({fmt_share(k.shmem_rss_bytes, k.rss_bytes)})")
    uid = f" uid {k.uid}" if k.uid is not None else ""
    return (f"{when}  {printable(k.kind, 10)} {printable(k.name, 64)}: {printable(k.process, 32)} pid {k.pid}{uid},"
            f" {limit}{shmem}")


def oom_kill_lines(kills: Sequence[OomKill], limit: int = 10) -> list[str]:
    """The newest ``limit`` kills, newest first."""
    newest = sorted(kills, key=lambda k: (k.time, k.seq or 0), reverse=True)
    out = [oom_kill_line(k) for k in newest[:limit]]
    if len(newest) > limit:
        out.append(f"... and {len(newest) - limit} more")
    return out


def finding_lines(findings: Sequence[Finding], width: int) -> list[str]:
    if not findings:
        return ["  no findings"]
    out = []
    for f in findings:
        head = f"  {printable(f.severity.upper(), 10):<8} {printable(f.rule, 60)} [{printable(f.subject, 80)}]"
        out.append(head)
        for label, text in (("", f.message), ("-> ", f.advice)):
            out.extend(textwrap.wrap(label + printable(text, _MAX_TEXT), width=width, initial_indent="           ",
                                     subsequent_indent="           "))
    return out


def format_check(snapshot: Snapshot, findings: Sequence[Finding], width: int = 100) -> str:
    status = worst_severity(findings)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snapshot.time))
    out = [f"pinmon check: {status.upper()}   host {printable(snapshot.host.hostname, 80)}   {when}"
           + ("   (from a saved snapshot)" if snapshot.source != "live" else ""), ""]
    out += ["Host memory"] + ["  " + line for line in host_lines(snapshot)] + [""]
    if snapshot.gpus:
        out += ["GPUs"] + ["  " + line for g in snapshot.gpus for line in gpu_line(g).splitlines()] + [""]
    elif snapshot.nvidia_pci_gpus and snapshot.nvml_error:
        out += [f"GPUs: none monitored ({snapshot.nvidia_pci_gpus} on the PCI bus; NVML could not start)", ""]
    else:
        out += ["GPUs: none found", ""]
    explained = explain_traffic(snapshot)
    if explained.measured:
        out += ["Link traffic the measured copies explain"] + ["  " + line for line in traffic_lines(explained)] + [""]
    if snapshot.processes:
        by_group = " by container, pod or job" if snapshot.cgroups else ""
        out += [f"Processes holding pinned memory{by_group} (pinned from /proc/PID/maps unless traced)"]
        multi_node = snapshot.host.numa_nodes is not None and len(snapshot.host.numa_nodes) > 1
        out += ["  " + line for line in grouped_process_lines(snapshot.processes, snapshot.cgroups,
                                                              nodes=multi_node)] + [""]
    if snapshot.oom_kills:
        out += ["Memory cgroup OOM kills in the kernel's log (the groups may be gone)"]
        out += ["  " + line for line in oom_kill_lines(snapshot.oom_kills)] + [""]
    if snapshot.probe is not None:
        from .probe_text import headline
        out += ["Probe", "  " + printable(headline(snapshot.probe), _MAX_TEXT), ""]
    out += [f"Findings ({len(findings)})"] + finding_lines(findings, width) + [""]
    if snapshot.notices:
        out += ["Notices"] + [f"  - {printable(n, _MAX_TEXT)}" for n in snapshot.notices]
    return "\n".join(out).rstrip() + "\n"
