"""One process in full (Enter on a row of the process table): the rows of ``process_detail``.

Each row is one line, cut with "…" rather than wrapped, so at 80x24 everything but a very long list
of call sites is on screen without scrolling. The process table's panel hands every new snapshot to
an open pop-up (``update``), so its figures stay live; the border says which snapshot they are
from, and when the process has left the snapshots, since when it is gone (its last figures stay).
"""
from __future__ import annotations

from typing import Optional, Sequence

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from ...model import Finding, ProcessPinned, Snapshot
from ..format import fmt_time
from ..process_detail import LABEL_CELLS, DetailRow, detail_rows
from ..widgets.base import lines, set_content

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
        self.gone_at: Optional[float] = None  # the first snapshot without it

    def compose(self):
        with VerticalScroll(id="process-box") as box:
            box.border_subtitle = "Esc / Enter / q: close"
            yield Static(id="process-text")

    def on_mount(self) -> None:
        self._draw()

    def update(self, snapshot: Optional[Snapshot], findings: Sequence[Finding]) -> None:
        """A newer snapshot: this pid's row in it, or the last one seen when it has gone."""
        row = next((p for p in snapshot.processes if p.pid == self.pid), None) if snapshot is not None else None
        if row is None and not self.gone and snapshot is not None:
            self.gone_at = snapshot.time
        self.gone = row is None
        if row is not None:
            self.process, self.snapshot, self.findings = row, snapshot, tuple(findings)
            self.gone_at = None
        if self.is_mounted:
            self._draw()

    def _draw(self) -> None:
        box = self.query_one("#process-box")
        # Times without the date: the title must fit an 80-column pop-up's border.
        read_at = fmt_time(self.snapshot.time if self.snapshot is not None else None, with_date=False)
        box.border_title = (f"process {self.pid} (gone at {fmt_time(self.gone_at, with_date=False)}:"
                            f" its last figures, as of {read_at})"
                            if self.gone else f"process {self.pid}, figures as of {read_at}")
        set_content(self.query_one("#process-text", Static),
                    detail_content(detail_rows(self.process, self.snapshot, self.findings)))
