"""One process in full (Enter on a row of the process table): the rows of ``process_detail``.

Each row is one line, cut with "…" rather than wrapped, so at 80x24 everything but a very long list
of call sites is on screen without scrolling. The process table's panel hands every new snapshot to
an open pop-up (``update``), so its figures stay live; a process that has left the snapshot keeps
its last figures and says so in the border.
"""
from __future__ import annotations

from typing import Optional, Sequence

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from ...model import Finding, ProcessPinned, Snapshot
from ..process_detail import LABEL_CELLS, DetailRow, detail_rows
from .base import lines, set_content

STYLES = {"head": "bold", "dim": "dim", "warning": "bold $warning", "": ""}


def detail_content(rows: Sequence[DetailRow]) -> Content:
    return lines(*(Content.assemble((f"{r.label:<{LABEL_CELLS}}", "dim"), (r.text, STYLES.get(r.style, "")))
                   for r in rows))


class ProcessScreen(ModalScreen[None]):
    """The close keys sit in the box's bottom border: always on screen."""

    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close")]

    def __init__(self, process: ProcessPinned, snapshot: Optional[Snapshot], findings: Sequence[Finding] = ()):
        super().__init__()
        self.pid = process.pid
        self.process = process
        self.snapshot = snapshot
        self.findings = tuple(findings)
        self.gone = False

    def compose(self):
        with VerticalScroll(id="process-box") as box:
            box.border_subtitle = "Esc / Enter / q: close"
            yield Static(id="process-text")

    def on_mount(self) -> None:
        self._draw()

    def update(self, snapshot: Optional[Snapshot], findings: Sequence[Finding]) -> None:
        """A newer snapshot: this pid's row in it, or the last one seen when it has gone."""
        row = next((p for p in snapshot.processes if p.pid == self.pid), None) if snapshot is not None else None
        self.gone = row is None
        if row is not None:
            self.process, self.snapshot, self.findings = row, snapshot, tuple(findings)
        if self.is_mounted:
            self._draw()

    def _draw(self) -> None:
        box = self.query_one("#process-box")
        box.border_title = f"process {self.pid}" + (" (gone: its last figures)" if self.gone else "")
        set_content(self.query_one("#process-text", Static),
                    detail_content(detail_rows(self.process, self.snapshot, self.findings)))
