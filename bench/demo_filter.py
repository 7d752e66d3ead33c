"""Take the recording box's own infrastructure out of demo snapshots: at recording time and in the bundled demo.

Usage: python3 bench/demo_filter.py [IN.jsonl.gz [OUT.jsonl.gz]] [--checkout DIR] [--box-process NAME]...
       [--box-cgroup PATH]...   (default: pinmon/data/demo.jsonl.gz in place, with the recording box's values)

The demo is recorded on a lent GPU box (``bench/record_demo.py``), whose agent runs as pid 1 and starts
each command in a cgroup of its own under ``/process_api``; the checkout sits at ``/work/main``. A
newcomer replaying the demo would read that box's noise as findings about their own. ``pinmon record``
records what it sees; only the demo's recorder calls ``BoxFilter`` on each snapshot before writing it,
and this script applies the same filter to a recording already made. The rule, and nothing more:

- a process row whose name is one of ``processes`` (the box's agents; default ``process_api``) is
  dropped, with its entry in each GPU's process list and any OOM kill of it;
- a group whose cgroup path is, or lies below, one of ``cgroup_prefixes`` (default ``/process_api``),
  or whose every row so far was an agent's, is dropped, with any OOM kill in it. The demo's workloads
  that the recorder started in its own cgroup (the agent's) keep their rows, in no group: shown as a
  process whose cgroup pinmon could not read is shown;
- a "denied access" notice of the process scan loses the pids of agents (its count with them; the
  notice goes when nothing else is left in it). A notice this script cannot parse is kept as it is;
- a command line's (and a call site's) arguments that start with ``checkout``/ lose that prefix:
  ``/work/main/bench/transfer_load.py 18`` reads ``bench/transfer_load.py 18``.

A dropped row's bytes leave every sum they were in, as ``repair_demo.py`` does for zombies: the host's
``pinned_bytes_est`` and ``write_combined_bytes_est``, and its group's held bytes (recomputed from the
rows left, held to the group's memory in use as the collector holds them) and process count. The
kernel's pinned count is host-wide: the agent's pinned pages are in it. Had the agent not been on the
box, neither its row nor its pages would be in the snapshot, so the pages its row explained (its
pinned bytes and VmPin, at most what the rows explained in all: ``kernel - unattributed``) leave the
kernel's count (per node: by the row's placement, else the only node, else in proportion) and
``pinned_bytes_total``; ``unattributed_pinned_bytes`` stays as it was. Left in the count, they would
have turned into unattributed memory, a finding about pages that a dropped row did explain. Pinned
pages an agent held without its row showing them (registered memory) cannot be told apart from
anyone's, and stay unattributed; the group's memory in use (the kernel's ``current_bytes``) is kept.

Snapshots are filtered as the model reads them, so this script writes ``pinmon.snapshot/2`` lines
whatever it reads: a ``/1`` line is read through ``pinmon.model.migrate`` (the one way /1 is read),
so the views see exactly what they saw of it. Deterministic: the same input gives the same bytes
(``repair_demo.write_lines``); running it on its own output changes nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

from repair_demo import DEMO, read_lines, write_lines

from pinmon.collect.cgroups.groups import held_within
from pinmon.collect.host.kernel_pins import KernelPins
from pinmon.collect.host.pinned_total import pinned_figures
from pinmon.model import Cgroup, HostMemory, ProcessPinned, Snapshot, summed
from pinmon.model.serial import evolve

# The recording box's values: the lent GPU box's agent (pid 1), the cgroup it starts each command
# in, and where the checkout sits there.
BOX_PROCESSES = ("process_api",)
BOX_CGROUP_PREFIXES = ("/process_api",)
BOX_CHECKOUT = "/work/main"

# collect/processes/scan.py's ``scan_notice``: "process scan: skipped N denied access: pid P (NAME),
# ... and M more (WHY)", then ", V exited during the scan" and "; ..." lines.
_NAMED = r"pid \d+ \([^()]*\)(?:, pid \d+ \([^()]*\))*(?: and \d+ more)?"
_DENIED = re.compile(rf"process scan: skipped (?P<n>\d+) denied access(?:: (?P<named>{_NAMED}))?"
                     r" \((?P<why>(?:run|even) as root[^()]*)\)(?P<rest>.*)\Z", re.S)
_PID = re.compile(r"pid (\d+) \(([^()]*)\)")
_MORE = re.compile(r" and (\d+) more\Z")


def under(path: str | None, prefixes: Iterable[str]) -> bool:
    """Whether cgroup ``path`` is one of ``prefixes`` or lies below one."""
    if not path:
        return False
    for prefix in prefixes:
        p = prefix.rstrip("/")
        if p and (path == p or path.startswith(p + "/")):
            return True
    return False


def key_path(key: str | None) -> str | None:
    """The cgroup path a group key holds (``collect/cgroups/ownership.py``: "KIND/PATH" for a plain
    group, "IDENT@PATH" for the others, "user/UID/" before either; a long path's head); None where
    the key holds none (a recording's older keys of containers and jobs)."""
    if not key:
        return None
    if "@" in key:
        return key.rpartition("@")[2]
    m = re.fullmatch(r"(?:user/\d+/)?[a-z]+/(/.*)", key, re.S)
    return m.group(1) if m else None


def group_path(g: Cgroup) -> str | None:
    """The group's cgroup path: as the group shows it, or its key's where it shows only its tail."""
    if g.path and not g.path.startswith("…"):
        return g.path
    return key_path(g.key)


def notice_without(text: str, names: Iterable[str]) -> str | None:
    """``text`` without the pids of processes called one of ``names`` in a scan's "denied access"
    part, written as ``scan_notice`` writes it; None when nothing is left; ``text`` unchanged where
    it is not such a notice or names none of them."""
    m = _DENIED.match(text)
    if m is None or not m.group("named"):
        return text
    named = m.group("named")
    more = _MORE.search(named)
    entries = _PID.findall(named[: more.start()] if more else named)
    names = set(names)
    kept = [(pid, name) for pid, name in entries if name not in names]
    if len(kept) == len(entries):
        return text
    n = int(m.group("n")) - (len(entries) - len(kept))
    rest = m.group("rest")
    if n > 0:
        shown = ", ".join(f"pid {pid} ({name})" for pid, name in kept)
        if shown and more:
            shown += more.group(0)
        return f"process scan: skipped {n} denied access{': ' + shown if shown else ''} ({m.group('why')}){rest}"
    if rest.startswith(", "):
        return "process scan: skipped " + rest[2:]
    if rest.startswith("; "):
        return "process scan: " + rest[2:]
    return None if not rest else text


def relative(text: str | None, checkout: str | None) -> str | None:
    """``text`` with each argument that starts with ``checkout``/ relative to it."""
    if not text or not checkout or checkout.rstrip("/") == "":
        return text
    return re.sub(r"(?<!\S)" + re.escape(checkout.rstrip("/") + "/"), "", text)


def _node_shares(by_node: dict[str, int], rows: list[ProcessPinned], shares: list[int]) -> dict[str, int]:
    """Per node, the bytes of ``shares`` (one per row): by each row's placement, else all on the only
    node, else in proportion to ``by_node``."""
    out = {n: 0 for n in by_node}
    total = sum(by_node.values())
    for r, share in zip(rows, shares):
        placed = {n: b for n, b in (r.placement.pinned_bytes_by_node or {}).items() if n in out and b > 0}
        weights = placed or (by_node if len(by_node) > 1 else {n: 1 for n in by_node})
        weight_sum = sum(weights.values()) or total
        if not weight_sum:
            continue
        for n, w in weights.items():
            out[n] += share * w // weight_sum
    return out


def host_without(host: HostMemory, rows: list[ProcessPinned]) -> HostMemory:
    """``host`` without the pinned bytes of ``rows`` (see the module's docstring)."""
    if not rows:
        return host
    pinned = sum(r.held.pinned_bytes or 0 for r in rows)
    wc = sum(r.held.write_combined_bytes or 0 for r in rows)
    pinned_est = None if host.pinned_bytes_est is None else max(0, host.pinned_bytes_est - pinned)
    wc_est = None if host.write_combined_bytes_est is None else max(0, host.write_combined_bytes_est - wc)
    if host.kernel_pinned_bytes is None:
        figures = pinned_figures(KernelPins(nodes=host.numa_nodes), 0, pinned_est, wc_est)
        return evolve(host, pinned_bytes_est=pinned_est, write_combined_bytes_est=wc_est, **figures)
    explained = max(0, host.kernel_pinned_bytes - (host.unattributed_pinned_bytes or 0))
    shares: list[int] = []
    for r in rows:  # each row's explained pages, at most what is left of the rows' explanation
        shares.append(min((r.held.pinned_bytes or 0) + (r.held.vm_pinned_bytes or 0), explained - sum(shares)))
    by_node = host.kernel_pinned_bytes_by_node
    if by_node:
        gone = _node_shares(by_node, rows, shares)
        by_node = {n: max(0, b - gone[n]) for n, b in by_node.items()}
    kernel = KernelPins(pinned_bytes=host.kernel_pinned_bytes - sum(shares), by_node=by_node, nodes=host.numa_nodes)
    figures = pinned_figures(kernel, explained - sum(shares), pinned_est, wc_est)
    return evolve(host, pinned_bytes_est=pinned_est, write_combined_bytes_est=wc_est, **figures)


class BoxFilter:
    """The filter, called on each snapshot in order (it remembers which groups only agents had)."""

    def __init__(self, processes: Iterable[str] = BOX_PROCESSES, cgroup_prefixes: Iterable[str] = BOX_CGROUP_PREFIXES,
                 checkout: str | None = BOX_CHECKOUT):
        self.processes = tuple(processes)
        self.cgroup_prefixes = tuple(cgroup_prefixes)
        self.checkout = checkout
        self._agent_keys: set[str] = set()  # group keys an agent's row was in
        self._other_keys: set[str] = set()  # group keys any other row was in

    def is_agent(self, p: ProcessPinned) -> bool:
        return p.identity.name in self.processes

    def __call__(self, snap: Snapshot) -> Snapshot:
        agents = [p for p in snap.processes if self.is_agent(p)]
        for p in snap.processes:
            if p.identity.cgroup:
                (self._agent_keys if self.is_agent(p) else self._other_keys).add(p.identity.cgroup)
        box_keys = {g.key for g in snap.cgroups if under(group_path(g), self.cgroup_prefixes)
                    or (g.key in self._agent_keys and g.key not in self._other_keys)}
        rows = []
        for p in snap.processes:
            if self.is_agent(p):
                continue
            key = p.identity.cgroup
            if key in box_keys or under(key_path(key), self.cgroup_prefixes):
                key = None
            identity = evolve(p.identity, cgroup=key, cmdline=relative(p.identity.cmdline, self.checkout))
            sites = {cat: relative(site, self.checkout) or site for cat, site in p.call_sites.items()}
            rows.append(evolve(p, identity=identity, call_sites=sites) if identity != p.identity
                        or sites != p.call_sites else p)
        groups = []
        for g in snap.cgroups:
            if g.key in box_keys:
                continue
            lost = [p for p in agents if p.identity.cgroup == g.key]
            if lost:
                members = [p for p in rows if p.identity.cgroup == g.key]
                g = evolve(g, held=held_within(summed(p.held for p in members), g.limit.current_bytes),
                           processes=max(0, g.processes - len(lost)))
            groups.append(g)
        pids = {p.pid for p in agents}
        gpus = tuple(evolve(gpu, processes=tuple(gp for gp in gpu.processes if gp.pid not in pids))
                     if any(gp.pid in pids for gp in gpu.processes) else gpu for gpu in snap.gpus)
        notices = [n for n in (notice_without(text, self.processes) for text in snap.notices) if n is not None]
        kills = tuple(k for k in snap.oom_kills if k.process not in self.processes and k.key not in box_keys
                      and not under(k.path, self.cgroup_prefixes) and not under(key_path(k.key), self.cgroup_prefixes))
        return evolve(snap, host=host_without(snap.host, agents), gpus=gpus, processes=tuple(rows),
                      cgroups=tuple(groups), notices=tuple(notices), oom_kills=kills)


def filter_lines(lines: list[str], box: BoxFilter) -> list[str]:
    """Each snapshot line filtered, as a ``pinmon.snapshot/2`` line."""
    return [json.dumps(box(Snapshot.from_dict(json.loads(line))).to_dict(), separators=(",", ":"))
            for line in lines]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="?", default=DEMO)
    ap.add_argument("dst", nargs="?")
    ap.add_argument("--checkout", default=BOX_CHECKOUT, help=f"where the checkout sat (default {BOX_CHECKOUT})")
    ap.add_argument("--box-process", action="append", metavar="NAME",
                    help=f"an agent's process name (default {', '.join(BOX_PROCESSES)})")
    ap.add_argument("--box-cgroup", action="append", metavar="PATH",
                    help=f"an agent's cgroup path prefix (default {', '.join(BOX_CGROUP_PREFIXES)})")
    a = ap.parse_args(argv)
    box = BoxFilter(processes=tuple(a.box_process or BOX_PROCESSES),
                    cgroup_prefixes=tuple(a.box_cgroup or BOX_CGROUP_PREFIXES), checkout=a.checkout)
    lines = read_lines(a.src)
    new = filter_lines(lines, box)
    dst = a.dst or a.src
    if new == lines:
        print("nothing to filter")
        return 0
    write_lines(dst, new)
    print(f"wrote {dst}: {sum(x != y for x, y in zip(lines, new))} of {len(lines)} snapshots changed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
