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
    ("1 … 6", "Overview, GPUs, Memory, Processes, Probe, Advisor"),
    ("g", "next GPU (its detail; probes use the selected GPU)"),
    ("Enter", "GPU row: its detail; finding: the full text"),
    ("p", "quick probe now: pinned vs pageable copies"),
    ("s", "probe sweep over copy sizes"),
    ("/", "filter processes (pid, name, user); Esc clears"),
    ("o", "next sort column of the process table"),
    ("space", "pause: live freezes the view, replay stops"),
    ("r", "start / stop recording snapshots to a file"),
    ("+ / -", "replay speed"),
    ("ctrl+p", "command palette: every action by name"),
    ("Tab", "move between panels; arrows scroll"),
)

TERMS = (
    ("est.", "estimate: /proc/PID/maps for pinned, 20 ms sample for PCIe"),
    ("exact", "PCIe bytes from the link counters over the interval"),
    ("traced", "pinned bytes from the in-process tracer (exact)"),
    ("DEGRADED", "below max gen/width while moving >= 1 GB/s"),
    ("idle", "below max while idle: power saving, retrains on load"),
    ("┃ 50%", "pinned past half of effective RAM starves the rest"),
    ("duty", "share of wall time spent probing: pinmon's own load"),
    ("paused", "live pause still collects and records"),
)


def help_text() -> Content:
    rows = [Content.styled("keys", "bold")]
    rows += [Content.assemble((f"  {k:<8}", "bold $accent"), v) for k, v in KEYS]
    rows += [Content(""), Content.styled("terms", "bold")]
    rows += [Content.assemble((f"  {k:<8}", "bold"), v) for k, v in TERMS]
    rows += [Content(""), Content.styled("no GPU here? `pinmon demo` plays a recorded H200 session", "dim"),
             Content.styled("Esc / q / ?: close", "dim")]
    return Content("\n").join(rows)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def compose(self):
        with VerticalScroll(id="help-box") as box:
            box.border_title = "pinmon help"
            yield Static(help_text(), id="help-text")
