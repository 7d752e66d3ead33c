"""The Containers tab: each container, pod, job or unit with its pinned memory against its own memory
limit, where the OOM killer acts, worst first.

One row per group (``Snapshot.cgroups``): its severity (the advisor's active finding about it), a bar
of its pinned share of its limit with ``┃`` at the critical threshold, the share, the bytes held, the
limit, its processes and its OOM kills since pinmon started, then its name in the width left over.
The status line below counts the memory cgroup OOM kills in the kernel's log (their groups may be
gone; the advisor's ``oom-killed`` findings tell each). On
a wide terminal the group's memory in use, its ``VmPin`` and its kind join them. A group whose
processes have gone stays a few minutes, dimmed, marked "gone". Enter opens the group in full
(``GroupScreen``), live. Every name is one printable line, cut to its column.
"""
from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import DataTable

from ...advise.thresholds import Thresholds
from ...model import Cgroup, Finding, Snapshot, summed
from ...units import fmt_bytes, fmt_int, fmt_pct, fmt_share, printable
from ..screens.group import GroupScreen
from ..view.format import COLLECTING
from ..view.group_detail import gone, group_severity, limit_share, sort_groups, ungrouped
from ..view.state import ViewState
from .base import CompositeView, TextBlock, follow_popup, refill_rows, set_content

BAR_CELLS = 10
# (header, right-aligned, width); NAME (None) takes what the others leave. Widths fit the widest value
# ("1023.9 GiB", "CRIT", "100%", "gone") and a space.
NARROW_COLUMNS = (("SEV", False, 5), ("PINNED/LIMIT", False, BAR_CELLS + 3), ("SHARE", True, 6),
                  ("PINNED", True, 11), ("LIMIT", True, 11), ("PROCS", True, 6), ("OOM", True, 5),
                  ("NAME", False, None))
# From this table width: memory in use (memory.current), VmPin and the kind as well.
WIDE_TABLE_CELLS = 110
WIDE_COLUMNS = NARROW_COLUMNS[:5] + (("IN USE", True, 11), ("VMPIN", True, 11)) + NARROW_COLUMNS[5:7] + \
    (("KIND", False, 8), ("NAME", False, None))
MIN_NAME_CELLS = 12
DEFAULT_NAME_CELLS = 30
SEVERITY_CELL = {"critical": ("CRIT", "bold red"), "warning": ("WARN", "bold yellow")}


def table_layout(room: int) -> tuple[tuple, int]:
    """The columns a table ``room`` cells wide shows, and NAME's width: what the others leave."""
    if not room:
        return NARROW_COLUMNS, DEFAULT_NAME_CELLS
    columns = WIDE_COLUMNS if room >= WIDE_TABLE_CELLS else NARROW_COLUMNS
    fixed = sum(width for *_, width in columns if width is not None)
    return columns, max(MIN_NAME_CELLS, room - fixed)


def share_bar(fraction: float | None, mark: float | None, style: str) -> Text:
    """``BAR_CELLS`` cells filled to ``fraction`` of the limit, ``┃`` at ``mark``; dots without a limit."""
    text = Text(" ", no_wrap=True)
    if fraction is None:
        text.append("·" * BAR_CELLS, "dim")
        return text
    filled = round(max(0.0, min(1.0, fraction)) * BAR_CELLS)
    mark_at = None if mark is None else min(BAR_CELLS - 1, int(mark * BAR_CELLS))
    for i in range(BAR_CELLS):
        if i == mark_at:
            text.append("┃", "bold red")
        elif i < filled:
            text.append("█", style)
        else:
            text.append("░", "dim")
    return text


def _cell(text: str, right: bool, style: str = "") -> Text:
    return Text(text if right else " " + text, style=style, justify="right" if right else "left", no_wrap=True)


def group_cells(g: Cgroup, severity: str | None, name_cells: int, columns: tuple,
                critical_mark: float | None) -> tuple[Text, ...]:
    """The row's cells; ``severity``: the group's (``group_severity``)."""
    is_gone = gone(g)
    row_style = "dim" if is_gone else ""
    fraction = limit_share(g)
    held, limit = g.held.bytes, g.limit.limit_bytes
    sev_text, sev_style = SEVERITY_CELL.get(severity or "", ("", ""))
    kills = g.limit.oom_kills_since_start
    bar_style = "bold red" if severity == "critical" else "bold yellow" if severity == "warning" else "green"
    values = {
        "SEV": (sev_text, sev_style),
        "SHARE": (fmt_share(held, limit) if limit else "none", sev_style),
        "PINNED": (fmt_bytes(held), ""),
        "LIMIT": (fmt_bytes(limit) if limit else "no limit", ""),
        "IN USE": (fmt_bytes(g.limit.current_bytes), ""),
        "VMPIN": (fmt_bytes(g.held.vm_pinned_bytes) if g.held.vm_pinned_bytes else "-", ""),
        "PROCS": ("gone" if is_gone else fmt_int(g.processes), ""),
        "OOM": (fmt_int(kills), "bold red" if kills else ""),
        "KIND": (printable(g.kind, 7), ""),
        "NAME": (printable(g.name, max(1, name_cells - 1)), "bold" if severity and not is_gone else ""),
    }
    cells = []
    for header, right, _width in columns:
        if header == "PINNED/LIMIT":
            cells.append(share_bar(fraction, critical_mark, "dim" if is_gone else bar_style))
            continue
        text, style = values[header]
        cells.append(_cell(text, right, style or row_style))
    return tuple(cells)


def containers_title(thresholds: Thresholds) -> str:
    return (f"Pinned memory vs each group's own limit"
            f" (┃ {fmt_pct(thresholds.cgroup_pinned_critical_fraction)}: critical; Enter: detail)")


class ContainerPanel(Vertical, CompositeView):
    """The table of groups, a line on processes in no group, and the status line."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.snapshot: Snapshot | None = None
        self.findings: tuple[Finding, ...] = ()
        self.groups: list[Cgroup] = []
        self.severity: dict[str, str | None] = {}  # a group's key -> its severity (group_severity)
        self._shown_rows: tuple | None = None
        self._columns_for: tuple | None = None
        self._columns: tuple = NARROW_COLUMNS
        self._critical: float | None = None
        self._popup: GroupScreen | None = None

    def compose(self) -> ComposeResult:
        yield DataTable(id="group-table", cursor_type="row", zebra_stripes=True, cell_padding=0)
        yield TextBlock(id="group-status")

    def draw(self, state: ViewState) -> None:
        self.snapshot, self.findings = state.snapshot, state.findings
        self._critical = state.thresholds.cgroup_pinned_critical_fraction
        self.groups = sort_groups(state.snapshot.cgroups if state.snapshot is not None else (), state.findings)
        self.severity = {g.key: group_severity(g, state.findings) for g in self.groups}
        self._refresh_table()
        self._popup = follow_popup(self._popup, state.snapshot, state.findings)

    def table(self) -> DataTable:
        return self.query_one(DataTable)

    def columns_now(self) -> tuple[tuple, int]:
        table = self.table()
        return table_layout(table.scrollable_content_region.width if table.is_mounted else 0)

    def on_resize(self) -> None:
        if self._columns_for is not None and self._columns_for != self.columns_now():
            self._refresh_table()

    def _refresh_table(self) -> None:
        table = self.table()
        columns, name_cells = self.columns_now()
        if self._columns_for != (columns, name_cells):
            self._columns_for = (columns, name_cells)
            self._columns = columns
            table.clear(columns=True)
            self._shown_rows = None
            for header, right, width in columns:
                table.add_column(_cell(header, right), key=header, width=name_cells if width is None else width)
        rows = tuple((g.key, group_cells(g, self.severity[g.key], name_cells, columns, self._critical)) for g in self.groups)
        if rows != self._shown_rows:
            self._shown_rows = rows
            refill_rows(table, rows)
        self._update_status()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        g = next((g for g in self.groups if g.key == event.row_key.value), None)
        if g is not None and not isinstance(self.app.screen, GroupScreen):
            self._popup = GroupScreen(g, self.snapshot, self.findings)
            self.app.push_screen(self._popup)

    def _update_status(self) -> None:
        status = self.query_one("#group-status", TextBlock)
        snap = self.snapshot
        if snap is None:
            set_content(status, Content.styled(COLLECTING, "dim"))
            return
        loose = ungrouped(snap)
        kills = oom_kills_text(snap)
        if not self.groups:
            text = ("no groups: no process holding pinned memory runs in a container, pod, job or unit"
                    if snap.processes else "no groups: no process holds pinned memory")
            if loose and any(p.identity.cgroup is None for p in loose) and snap.source != "live":
                text += " (a recording made before pinmon read groups has none)"
            set_content(status, Content.assemble((text, "dim"), *([(kills, "bold $error")] if kills else [])))
            return
        severities = list(self.severity.values())
        crit, warn = severities.count("critical"), severities.count("warning")
        parts: list = [f"{len(self.groups)} group{'s' if len(self.groups) != 1 else ''}"]
        if crit:
            parts.append((f", {crit} critical", "bold $error"))
        if warn:
            parts.append((f", {warn} warning", "bold $warning"))
        if loose:
            held = summed(p.held for p in loose).bytes or 0
            parts.append(f"; {len(loose)} process{'es' if len(loose) != 1 else ''} in no group, {fmt_bytes(held)}")
        if kills:
            parts.append((kills, "bold $error"))
        set_content(status, Content.assemble(*parts))


def oom_kills_text(snap: Snapshot) -> str:
    """The status line's word on the kernel log's OOM kills: how many, and the latest's group and time."""
    if not snap.oom_kills:
        return ""
    latest = max(snap.oom_kills, key=lambda k: (k.time, k.seq or 0))
    n = len(snap.oom_kills)
    when = time.strftime("%H:%M", time.localtime(latest.time))
    return (f"; {n} OOM kill{'s' if n != 1 else ''} in the kernel's log, latest {printable(latest.name, 40)}"
            f" at {when} (see findings)")
