"""Keys and the few terms the screens use (est., exact, degraded, the 50% mark)."""
from __future__ import annotations

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = (
    ("q", "quit (a recording in progress is closed first)"),
    ("? / F1", "this help"),
    ("1 … 6", "tabs: Overview, GPUs, Memory, Processes, Probe, Advisor"),
    ("g", "next GPU (detail on the GPUs tab; probes use the selected GPU)"),
    ("Enter", "on a GPU row: its detail; on a finding: the full text"),
    ("p", "quick probe now: pinned vs pageable copy bandwidth"),
    ("s", "probe sweep over copy sizes"),
    ("/", "filter processes by pid, name or user; Esc clears"),
    ("o", "next sort column of the process table"),
    ("space", "pause: live keeps collecting (and recording) but freezes the view; replay stops"),
    ("r", "start / stop recording the snapshots to a file"),
    ("+ / -", "replay speed"),
    ("ctrl+p", "command palette: every action by name"),
    ("Tab", "move between panels"),
)

TERMS = (
    ("est.", "an estimate: pinned memory read from /proc/PID/maps, or PCIe rates from NVML's 20 ms sample"),
    ("exact", "PCIe rates from the link's byte counters over the whole interval"),
    ("traced", "pinned bytes reported by the in-process tracer (exact)"),
    ("DEGRADED", "the link runs below its max generation or width while moving >= 1 GB/s"),
    ("idle", "below max while idle: the driver saves power and retrains on load; normal"),
    ("┃ 50%", "pinned memory past half of effective RAM starves the page cache and other processes"),
    ("duty cycle", "share of wall time spent probing: the load pinmon itself adds"),
)


def help_text() -> Content:
    rows = [Content.styled("keys", "bold")]
    rows += [Content.assemble((f"  {k:<8}", "bold $accent"), v) for k, v in KEYS]
    rows += [Content(""), Content.styled("terms", "bold")]
    rows += [Content.assemble((f"  {k:<11}", "bold"), v) for k, v in TERMS]
    rows += [Content(""), Content.styled("no GPU here? `pinmon demo` replays a recorded H200 session.", "dim"),
             Content.styled("Esc / q / ?: close", "dim")]
    return Content("\n").join(rows)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def compose(self):
        with VerticalScroll(id="help-box") as box:
            box.border_title = "pinmon help"
            yield Static(help_text(), id="help-text")
