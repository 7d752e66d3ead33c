"""The app's keys and its command palette entries: every action, by key and by name.

The help screen (``screens/help.py``) lists the same keys; tests/tui/test_keys_documented.py checks
that every bound key is there.
"""
from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Protocol

from textual.app import SystemCommand
from textual.binding import Binding, BindingType

from ..model.kinds import ProbeKind
from .layout import TABS
from .view.session import Session
from .widgets.processes import ProcessPanel

BINDINGS: list[BindingType] = [
    Binding("q", "quit", "Quit", tooltip="Quit pinmon (closes a recording in progress)"),
    Binding("question_mark,f1", "help", "Help", key_display="?"),
    Binding("p", "probe('quick')", "Probe", tooltip="Quick pinned vs pageable probe on the selected GPU"),
    Binding("s", "probe('sweep')", "Sweep", tooltip="Probe over a range of copy sizes"),
    Binding("g", "next_gpu", "GPU", tooltip="Select the next GPU"),
    Binding("slash", "filter", "Filter", key_display="/", tooltip="Filter processes by pid, name, user or group"),
    Binding("space", "pause", "Pause"),
    Binding("r", "record", "Rec", tooltip="Start or stop recording snapshots"),
    Binding("plus,equals_sign", "speed(1)", "Faster", key_display="+"),
    Binding("minus,underscore", "speed(-1)", "Slower", key_display="-"),
    Binding("escape", "clear_filter", "Clear filter", show=False),
    Binding("n", "notices", "Notices", show=False, tooltip="Every notice in full (the bar shows the first)"),
    # As in a shell: back to it, the app stopped; fg brings it back (Textual's suspend action).
    Binding("ctrl+z", "suspend_process", show=False),
    # Enter where no widget takes it (the overview, whatever has the focus there): the selected
    # GPU's detail. A GPU row, a finding or a process answers its own Enter first.
    Binding("enter", "open_gpu", show=False),
    # Tried when the visible binding for the same key is disabled (check_action), so the key
    # still answers: p in a replay says why there is no probe, + live says why there is no speed.
    Binding("p,s", "no_probe", show=False),
    # a attaches the highlighted process (the Processes tab's binding, and its pop-up's); anywhere
    # else, or where attaching cannot work (a replay, --attach, not root), it says why.
    Binding("a", "no_attach", show=False),
    Binding("plus,equals_sign,minus,underscore", "no_speed", show=False),
    *(Binding(str(n), f"tab('{tab_id}')", label.split(" ", 1)[1], show=False)
      for n, (tab_id, label) in enumerate(TABS, start=1)),
]


class PaletteTarget(Protocol):
    """What the palette's entries call on the app (a ``PinmonApp``, which imports this module)."""

    session: Session

    def main_widget(self, selector: type[ProcessPanel]) -> ProcessPanel: ...
    def action_probe(self, kind: ProbeKind = "quick") -> None: ...
    def attach_process(self, pid: int | None) -> None: ...
    def action_next_gpu(self) -> None: ...
    def action_filter(self) -> None: ...
    def action_pause(self) -> None: ...
    def action_record(self) -> None: ...
    def action_speed(self, step: int) -> None: ...
    def action_help(self) -> None: ...
    def action_tab(self, tab_id: str) -> None: ...


def palette_commands(app: PaletteTarget) -> Iterable[SystemCommand]:
    """The palette's entries for ``app`` besides Textual's own."""
    yield SystemCommand("Probe now", "Quick pinned vs pageable copy probe on the selected GPU (p)",
                        partial(app.action_probe, "quick"))
    yield SystemCommand("Probe sweep", "Probe over a range of copy sizes (s)", partial(app.action_probe, "sweep"))
    if app.session.attach.usable:
        window = f"{app.session.attach.window_s:g} s"
        yield SystemCommand("Attach to the process", f"Count the highlighted process's copies for {window}"
                            " through uprobes on its libcuda (a, Processes tab)",
                            lambda: app.attach_process(app.main_widget(ProcessPanel).highlighted_pid()))
    yield SystemCommand("Next GPU", "Select the next GPU and show its detail (g)", app.action_next_gpu)
    yield SystemCommand("Filter processes", "Filter the process table by pid, name, user or group (/)",
                        app.action_filter)
    yield SystemCommand("Sort processes", "Next sort column of the process table (o)",
                        lambda: app.main_widget(ProcessPanel).action_cycle_sort())
    yield SystemCommand("Pause / resume", "Freeze the view (live) or stop the replay (space)", app.action_pause)
    yield SystemCommand("Start / stop recording", "Record the snapshots to a file (r)", app.action_record)
    if not app.session.live:
        yield SystemCommand("Replay faster", "Next replay speed (+)", partial(app.action_speed, 1))
        yield SystemCommand("Replay slower", "Previous replay speed (-)", partial(app.action_speed, -1))
    yield SystemCommand("Keys and terms", "The help screen (? or F1)", app.action_help)
    for n, (tab_id, label) in enumerate(TABS, start=1):
        yield SystemCommand(f"Show {label.split(' ', 1)[1]}", f"Switch to the {label.split(' ', 1)[1]} tab ({n})",
                            partial(app.action_tab, tab_id))

