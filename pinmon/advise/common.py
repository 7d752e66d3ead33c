"""Small helpers the advisor's rules share: how a process is named, where its figures come from,
the probe result a rule may quote, the lspci command for a GPU."""
from __future__ import annotations

from ..model import ProbeResult, ProcessPinned, Snapshot


def process_subject(p: ProcessPinned) -> str:
    name = p.identity.name
    return f"pid {p.pid} ({name})" if name else f"pid {p.pid}"


def source_label(p: ProcessPinned) -> str:
    """"(traced)" or "(traced, CUPTI)" for figures an in-process tracer reported, "(attached)" for
    uprobes' figures, "(est.)" for /proc/PID/maps estimates."""
    if p.source == "traced":
        return "(traced, CUPTI)" if p.instrument == "cupti" else "(traced)"
    if p.source == "attached":
        return "(attached)"
    return "(est.)"


def held_label(p: ProcessPinned) -> str:
    """The label of a row's held bytes: the tracer's own count for a traced row, else the maps
    estimate (an attached row's held bytes are the maps', not the attach's)."""
    return source_label(p) if p.source == "traced" else "(est.)"


def probe_ok(snap: Snapshot) -> ProbeResult | None:
    """The snapshot's probe result when it measured (a refused or failed probe has no figures)."""
    p = snap.probe
    return p if p is not None and p.status == "ok" else None


def lspci_target(bus_id: str | None) -> str:
    """NVML's bus id carries an 8-digit domain ("00000000:41:00.0"); lspci prints 4 digits."""
    if not bus_id:
        return "sudo lspci -vv"
    domain, sep, rest = bus_id.partition(":")
    if sep and len(domain) > 4 and domain[:-4].strip("0") == "":
        bus_id = f"{domain[-4:]}:{rest}"
    return f"sudo lspci -vv -s {bus_id.lower()}"
