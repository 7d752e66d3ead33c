"""Keys and the few terms the screens use (est., exact, degraded, the 50% mark)."""
from __future__ import annotations

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen

from .wrap import HangingText

KEYS = (
    ("q", "quit (a recording in progress is closed first)"),
    ("? / F1", "this help"),
    ("1 … 6", "Overview, GPUs, Memory, Processes, Probe, Advisor"),
    ("g", "next GPU (its detail; probes use the selected GPU)"),
    ("Enter", "GPU row: its detail; finding or process: in full"),
    ("p", "quick probe now: pinned vs pageable copies"),
    ("s", "probe sweep over copy sizes"),
    ("/", "filter processes (pid, name, user); Esc clears"),
    ("o", "next sort column of the process table"),
    ("n", "all notices (the notice bar shows the first)"),
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


def help_items() -> list:
    """The help's lines: headings as they are, each key and term with its text wrapped under it."""
    items: list = [Content.styled("keys", "bold")]
    items += [(Content.styled(f"  {k:<8}", "bold $accent"), v) for k, v in KEYS]
    items += [Content(""), Content.styled("terms", "bold")]
    items += [(Content.styled(f"  {k:<8}", "bold"), v) for k, v in TERMS]
    items += [Content(""), Content.styled("no GPU here? `pinmon demo` plays a recorded H200 session", "dim")]
    return items


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def compose(self):
        with VerticalScroll(id="help-box") as box:
            box.border_title = "pinmon help"
            box.border_subtitle = "Esc / q / ?: close"  # in the border: on screen however tall the help
            yield HangingText(help_items(), id="help-text")
