"""One group in full (Enter on a row of the Containers tab): the rows of ``group_detail.group_rows``.

As the process pop-up: one line per figure, cut rather than wrapped; the tab hands every new
snapshot to an open pop-up, so its figures stay live, and when the group has left the snapshots its
last figures stay, with the time it went.
"""
from __future__ import annotations

from typing import Optional, Sequence

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ...model import Cgroup, Finding, Snapshot
from ..format import fmt_time
from ..group_detail import group_rows
from ..widgets.base import set_content
from .process import detail_content


class GroupScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close")]

    def __init__(self, group: Cgroup, snapshot: Optional[Snapshot], findings: Sequence[Finding] = ()):
        super().__init__()
        self.key = group.key
        self.group = group
        self.snapshot = snapshot
        self.findings = tuple(findings)
        self.gone_at: Optional[float] = None  # the first snapshot without it

    def compose(self):
        with VerticalScroll(id="group-box") as box:
            box.border_subtitle = "Esc / Enter / q: close"
            yield Static(id="group-text")

    def on_mount(self) -> None:
        self._draw()

    def update(self, snapshot: Optional[Snapshot], findings: Sequence[Finding]) -> None:
        """A newer snapshot: this group in it, or the last one seen when it has left the snapshots."""
        group = next((g for g in snapshot.cgroups if g.key == self.key), None) if snapshot is not None else None
        if group is None:
            if self.gone_at is None and snapshot is not None:
                self.gone_at = snapshot.time
        else:
            self.group, self.snapshot, self.findings, self.gone_at = group, snapshot, tuple(findings), None
        if self.is_mounted:
            self._draw()

    def _draw(self) -> None:
        box = self.query_one("#group-box")
        read_at = fmt_time(self.snapshot.time if self.snapshot is not None else None, with_date=False)
        box.border_title = (f"group gone at {fmt_time(self.gone_at, with_date=False)}: its last figures,"
                            f" as of {read_at}" if self.gone_at is not None else f"group, figures as of {read_at}")
        set_content(self.query_one("#group-text", Static),
                    detail_content(group_rows(self.group, self.snapshot, self.findings)))
