"""One group in full (Enter on a row of the Containers tab): the rows of ``group_detail.group_rows``,
live, its last figures kept when it has left the snapshots (``detail.LiveDetailScreen``)."""
from __future__ import annotations

from collections.abc import Sequence

from ...model import Cgroup, Finding, Snapshot
from ..view.detail_row import DetailRow
from ..view.format import fmt_time
from ..view.group_detail import group_rows
from .detail import LiveDetailScreen


class GroupScreen(LiveDetailScreen):
    BOX_ID = "group-box"
    TEXT_ID = "group-text"

    def __init__(self, group: Cgroup, snapshot: Snapshot | None, findings: Sequence[Finding] = ()):
        super().__init__(group, snapshot, findings)
        self.key = group.key

    @property
    def group(self) -> Cgroup:
        return self.item

    def find(self, snapshot: Snapshot) -> Cgroup | None:
        return next((g for g in snapshot.cgroups if g.key == self.key), None)

    def rows(self) -> Sequence[DetailRow]:
        return group_rows(self.group, self.snapshot, self.findings)

    def border_text(self, read_at: str) -> str:
        if self.gone:
            return f"group gone at {fmt_time(self.gone_at, with_date=False)}: its last figures, as of {read_at}"
        return f"group, figures as of {read_at}"
