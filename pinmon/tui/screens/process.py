"""One process in full (Enter on a row of the process table): the rows of ``process_detail``.

At 80x24 everything but a very long list of call sites is on screen without scrolling. The border
says which snapshot the figures are from, and when the process has left the snapshots, since when it
is gone (its last figures stay): ``detail.LiveDetailScreen``. ``a`` attaches the process for a window
(``AttachRequested``, as on its row), and its copy table fills in when the window ends.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message

from ...model import Finding, ProcessPinned, Snapshot
from ..view.detail_row import DetailRow
from ..view.format import fmt_time
from ..view.process_detail import detail_rows
from .detail import KEYS_HINT, LiveDetailScreen

ATTACH_HINT = "a: attach  "


class AttachRequested(Message):
    """The user asked to attach ``pid`` (None: no process was highlighted); the app decides."""

    def __init__(self, pid: int | None):
        super().__init__()
        self.pid = pid


class ProcessScreen(LiveDetailScreen):
    BOX_ID = "process-box"
    TEXT_ID = "process-text"
    BINDINGS: ClassVar[list[BindingType]] = [*LiveDetailScreen.BINDINGS, Binding("a", "attach", "Attach", show=False)]

    def __init__(self, process: ProcessPinned, snapshot: Snapshot | None, findings: Sequence[Finding] = (),
                 attach_key: bool = False):
        """``attach_key``: the key can attach here (its border says so)."""
        super().__init__(process, snapshot, findings)
        self.pid = process.pid
        self.attach_key = attach_key

    def on_mount(self) -> None:
        if self.attach_key:
            self.query_one(f"#{self.BOX_ID}").border_subtitle = ATTACH_HINT + KEYS_HINT
        super().on_mount()

    def action_attach(self) -> None:
        self.app.post_message(AttachRequested(self.pid))

    @property
    def process(self) -> ProcessPinned:
        return self.item

    def find(self, snapshot: Snapshot) -> ProcessPinned | None:
        return next((p for p in snapshot.processes if p.pid == self.pid), None)

    def rows(self) -> Sequence[DetailRow]:
        return detail_rows(self.process, self.snapshot, self.findings)

    def border_text(self, read_at: str) -> str:
        if self.gone:
            return (f"process {self.pid} (gone at {fmt_time(self.gone_at, with_date=False)}:"
                    f" its last figures, as of {read_at})")
        return f"process {self.pid}, figures as of {read_at}"
