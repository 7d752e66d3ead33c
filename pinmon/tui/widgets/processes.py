"""The per-process table: what each holds, write-combined, mappings and churn, GPU memory; sortable, filterable.

PINNED is all a process holds (``HeldMemory.bytes``: pinned, write-combined and VmPin), so an io_uring
user holding only VmPin shows its bytes and sorts among the others by them; WC and VMPIN are its parts.

On a host with more than one NUMA node a NODE column shows the node holding most of each process's
pinned pages and its share of them (as ``pinmon check`` prints it), where the table has the room.
Enter opens the highlighted process in full (``ProcessScreen``): for a traced or attached process its
copies by host memory kind, their achieved rates against the probe's, its pinned allocations and call
sites. ``a`` attaches the highlighted process for a window (the app runs it; offered only where
attaching can work: live, and not with ``--attach``, which attaches every CUDA process already).

Sort column and filter text are this view's own state (how the user looks), not data. The table
never scrolls sideways: COMMAND takes the width the other columns leave (a command line longer than
that ends in "…"), and the line under the table shows the highlighted process's whole command line.
Every name, user and command line is one printable line (``units.printable``).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import DataTable, Input

from ...model import Finding, ProcessPinned, Snapshot
from ...units import fmt_bytes, fmt_int, printable
from ..screens.process import AttachRequested, ProcessScreen
from ..view.format import (
    SORT_COLUMNS,
    SortColumn,
    command_brief,
    command_text,
    filter_processes,
    multi_node,
    node_cell,
    sort_processes,
    user_text,
)
from ..view.state import ViewState
from .base import CompositeView, TextBlock, cursor_row_key, follow_popup, refill_rows, set_content

# (sort key or None, header, right-aligned, width). Fixed widths fit the widest value a column can
# print ("1023.9 GiB", pid 4194304) and the header with its sort mark ("CHURN ▼"), plus one space of
# gutter, so at 80 columns every number is whole and no two headers touch; COMMAND (None) gets the
# rest of the table's width. Nothing is re-measured on refresh.
# SRC takes "est." and "traced" in 7 cells; where a row is "attached" it widens to 9 (as `pinmon
# check`'s 8 characters and a space), taken from COMMAND, so no source is ever cut.
SRC_COLUMN = (None, "SRC", False, 7)
SRC_ATTACHED_COLUMN = (None, "SRC", False, 9)
COLUMNS = (("pid", "PID", True, 8), ("user", "USER", False, 9), ("pinned", "PINNED", True, 11),
           ("wc", "WC", True, 10), (None, "MAPS", True, 7), ("churn", "CHURN", True, 8),
           ("gpu_mem", "GPU MEM", True, 10), SRC_COLUMN, ("command", "COMMAND", False, None))
# A table narrower than this leaves MAPS out (the count of pinned mappings: the least read column),
# so that COMMAND keeps a readable width at 80 columns.
WIDE_TABLE_CELLS = 100
NARROW_COLUMNS = tuple(c for c in COLUMNS if c[1] != "MAPS")
# NODE ("12 (100%)" and a space) goes before SRC on multi-node hosts, in a table at least this wide:
# at 80 columns COMMAND would shrink below its least width (the pop-up on Enter has the node split).
NODE_COLUMN = (None, "NODE", False, 10)
NODE_TABLE_CELLS = 91
# Where processes run in groups (containers, pods, jobs), GROUP names each one's group, in a table at
# least this wide; VMPIN (io_uring and RDMA pins the kernel counts) where a process has any.
GROUP_COLUMN = (None, "GROUP", False, 20)
GROUP_TABLE_CELLS = 120
VMPIN_COLUMN = (None, "VMPIN", True, 11)
VMPIN_TABLE_CELLS = 110
# COMMAND's width before the table is laid out, and its least width on a very narrow terminal.
DEFAULT_COMMAND_CELLS = 40
MIN_COMMAND_CELLS = 10
# Past this many changed cells one rebuild is cheaper than cell-by-cell updates.
MAX_CELL_UPDATES = 40


class FilterInput(Input):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "clear_filter", "Clear filter", show=False)]

    def action_clear_filter(self) -> None:
        self.value = ""
        self.display = False
        self.screen.query_one("#process-table", DataTable).focus()


def _cell(text: str, right: bool) -> Text:
    # No cell padding in the table: a left-aligned cell brings its own space, a right-aligned one
    # has the spare width of its column.
    return Text(text if right else " " + text, justify="right" if right else "left", no_wrap=True)


def _with_node(columns: tuple) -> tuple:
    at = next(i for i, c in enumerate(columns) if c[1] == "SRC")
    return columns[:at] + (NODE_COLUMN,) + columns[at:]


def _before_command(columns: tuple, column: tuple) -> tuple:
    return columns[:-1] + (column,) + columns[-1:]


def _with_attached(columns: tuple) -> tuple:
    return tuple(SRC_ATTACHED_COLUMN if c[1] == "SRC" else c for c in columns)


def table_layout(room: int, nodes: bool = False, groups: bool = False, vm_pinned: bool = False,
                 width: int | None = None, attached: bool = False) -> tuple[tuple, int]:
    """The columns a table ``width`` cells wide shows (its scrollbar's gutter included: the widths the
    README and the help give), and COMMAND's width: what the others leave of ``room``, the cells
    its rows have (``width`` defaults to ``room``). ``nodes``: the host has several NUMA nodes (NODE
    where it fits); ``groups``: processes run in groups (GROUP where it fits); ``vm_pinned``: a
    process has VmPin (VMPIN where it fits); ``attached``: a row's source is "attached" (SRC widens)."""
    if not room:
        return (_with_attached(COLUMNS) if attached else COLUMNS), DEFAULT_COMMAND_CELLS
    width = room if width is None else width
    columns = COLUMNS if width >= WIDE_TABLE_CELLS else NARROW_COLUMNS
    if attached:
        columns = _with_attached(columns)
    if nodes and width >= NODE_TABLE_CELLS:
        columns = _with_node(columns)
    if vm_pinned and width >= VMPIN_TABLE_CELLS:
        columns = _before_command(columns, VMPIN_COLUMN)
    if groups and width >= GROUP_TABLE_CELLS:
        columns = _before_command(columns, GROUP_COLUMN)
    fixed = sum(width for *_, width in columns if width is not None)
    return columns, max(MIN_COMMAND_CELLS, room - fixed)


def process_cells(p: ProcessPinned, command_cells: int = DEFAULT_COMMAND_CELLS,
                  columns: tuple = COLUMNS, group_names: Mapping[str, str] | None = None) -> tuple[Text, ...]:
    """The row's cells for ``columns``; the command line's meaningful part (``command_brief``) cut to
    ``command_cells`` (its cell brings one space); the line under the table has it whole.
    ``group_names``: a group's key -> its name (``Cgroup.name``), for GROUP."""
    group = (group_names or {}).get(p.identity.cgroup or "")
    src_cells = next((w for _, h, _, w in columns if h == "SRC"), SRC_COLUMN[3])
    held = p.held
    churn = fmt_int(held.mappings_churn)
    values = {"PID": str(p.pid), "USER": user_text(p)[:8], "PINNED": fmt_bytes(held.bytes),
              "WC": fmt_bytes(held.write_combined_bytes), "MAPS": fmt_int(held.mappings),
              "CHURN": churn if not held.mappings_churn else f"±{churn}",
              "GPU MEM": fmt_bytes(p.placement.gpu_memory_bytes),
              "SRC": printable(p.source, src_cells - 1), "NODE": node_cell(p),
              "GROUP": printable(group, GROUP_COLUMN[3] - 1) if group else "-",
              "VMPIN": fmt_bytes(held.vm_pinned_bytes) if held.vm_pinned_bytes else "-",
              "COMMAND": command_brief(p, max(1, command_cells - 1))}
    return tuple(_cell(values[header], right) for _, header, right, _ in columns)


def command_line(p: ProcessPinned | None) -> Content:
    """The line under the table: the highlighted process's whole command line (its CSS cuts it)."""
    if p is None:
        return Content("")
    return Content.assemble(("▸ ", "bold $accent"), (f"{p.pid} ", "bold"), (f"{user_text(p)}  ", "dim"),
                            command_text(p, 2000))


class ProcessPanel(Vertical, CompositeView):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("o", "cycle_sort", "Sort"),
                Binding("a", "attach", "Attach", tooltip="Count the highlighted process's copies for a while"
                                                         " (uprobes on its libcuda; root)")]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.sort_index = 0
        self.processes: tuple[ProcessPinned, ...] = ()
        self._shown_rows: tuple | None = None
        self._columns_for: tuple | None = None  # (sort index, columns, COMMAND width) shown
        self._columns: tuple = COLUMNS
        self.multi_node = False
        self.group_names: dict[str, str] = {}
        self.vm_pinned = False
        self.snapshot: Snapshot | None = None
        self.findings: tuple[Finding, ...] = ()
        self._popup: ProcessScreen | None = None
        self.attach_usable = False  # the attach key can start a window here (else the app's a says why)
        self.attached_rows = False  # a row's source is "attached": SRC is wider

    def compose(self) -> ComposeResult:
        inp = FilterInput(placeholder="filter: pid, name, user or group (Enter: table, Esc: clear)",
                          id="process-filter")
        inp.display = False
        yield inp
        table: DataTable[Text] = DataTable(id="process-table", cursor_type="row", zebra_stripes=True, cell_padding=0)
        yield table
        yield TextBlock(id="process-command")
        yield TextBlock(id="process-status")

    @property
    def filter_text(self) -> str:
        return self.query_one(FilterInput).value

    @property
    def sort_column(self) -> SortColumn:
        return SORT_COLUMNS[self.sort_index]

    def draw(self, state: ViewState) -> None:
        self.snapshot, self.findings = state.snapshot, state.findings
        self.processes = state.snapshot.processes if state.snapshot is not None else ()
        self.multi_node = state.snapshot is not None and multi_node(state.snapshot.host)
        self.group_names = {g.key: g.name for g in state.snapshot.cgroups} if state.snapshot is not None else {}
        self.vm_pinned = any(p.held.vm_pinned_bytes for p in self.processes)
        self.attached_rows = any(p.source == "attached" for p in self.processes)
        if state.attach_usable != self.attach_usable:
            self.attach_usable = state.attach_usable
            self.refresh_bindings()
        self._refresh_table()
        self._popup = follow_popup(self._popup, state.snapshot, state.findings)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        p = next((p for p in self.processes if str(p.pid) == event.row_key.value), None)
        if p is not None and not isinstance(self.app.screen, ProcessScreen):
            self._popup = ProcessScreen(p, self.snapshot, self.findings, attach_key=self.attach_usable)
            self.app.push_screen(self._popup)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "attach":
            return self.attach_usable  # else the app's own a answers: why not
        return True

    def action_attach(self) -> None:
        self.post_message(AttachRequested(self.highlighted_pid()))

    def shown_filter(self) -> FilterInput:
        """The filter box, shown (the caller focuses it)."""
        inp = self.query_one(FilterInput)
        inp.display = True
        return inp

    def open_filter(self) -> None:
        self.app.set_focus(self.shown_filter())

    def clear_filter(self) -> None:
        self.query_one(FilterInput).action_clear_filter()

    def action_cycle_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORT_COLUMNS)
        self._refresh_table()

    def on_input_changed(self, event: Input.Changed) -> None:
        self._refresh_table()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(DataTable).focus()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = self._columns[event.column_index][0]
        for i, col in enumerate(SORT_COLUMNS):
            if col.key == key:
                self.sort_index = i
                self._refresh_table()

    def visible_processes(self) -> list[ProcessPinned]:
        return sort_processes(filter_processes(self.processes, self.filter_text, self.group_names), self.sort_column)

    def columns_now(self) -> tuple[tuple, int]:
        """``table_layout`` of the table's width (its scrollbar gutter is kept whether it scrolls
        or not, so the width does not change when the rows outgrow the height)."""
        table = self.query_one(DataTable)
        if not table.is_mounted:
            return table_layout(0)
        return table_layout(table.scrollable_content_region.width, self.multi_node, bool(self.group_names),
                            self.vm_pinned, width=table.size.width, attached=self.attached_rows)

    def on_resize(self) -> None:
        if self._columns_for is not None and self._columns_for[1:] != self.columns_now():
            self._refresh_table()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._update_command()

    def _refresh_table(self) -> None:
        table = self.query_one(DataTable)
        columns, command_cells = self.columns_now()
        if self._columns_for != (self.sort_index, columns, command_cells):
            self._columns_for = (self.sort_index, columns, command_cells)
            self._columns = columns
            table.clear(columns=True)
            self._shown_rows = None
            for key, header, right, width in columns:
                label = header + ((" ▼" if self.sort_column.descending else " ▲") if key == self.sort_column.key else "")
                table.add_column(_cell(label, right), key=header, width=command_cells if width is None else width)
        procs = self.visible_processes()
        rows = tuple((p.pid, process_cells(p, command_cells, columns, self.group_names)) for p in procs)
        if rows != self._shown_rows:
            old, self._shown_rows = self._shown_rows, rows
            changes = None
            if old is not None and [pid for pid, _ in old] == [pid for pid, _ in rows]:
                changes = [(pid, col[1], new) for (pid, cells), (_, old_cells) in zip(rows, old)
                           for col, new, prev in zip(columns, cells, old_cells) if new != prev]
            if changes is not None and len(changes) <= MAX_CELL_UPDATES:
                # Same processes in the same order: change only the cells that moved.
                for pid, header, new in changes:
                    table.update_cell(str(pid), header, new)
            else:
                refill_rows(table, tuple((str(pid), cells) for pid, cells in rows))
        self._update_status(len(procs))
        self._update_command()

    def highlighted_process(self) -> ProcessPinned | None:
        pid = cursor_row_key(self.query_one(DataTable))
        if pid is None:
            return None
        return next((p for p in self.processes if str(p.pid) == pid), None)

    def highlighted_pid(self) -> int | None:
        p = self.highlighted_process()
        return None if p is None else p.pid

    def _update_command(self) -> None:
        set_content(self.query_one("#process-command", TextBlock), command_line(self.highlighted_process()))

    def _update_status(self, shown: int) -> None:
        total = len(self.processes)
        text = self.filter_text
        parts: list = [f"{shown} of {total} processes" if text else f"{total} processes",
                       ("  sort ", "dim"), f"{self.sort_column.label} ", ("(o)", "dim")]
        if text:
            parts += [("  filter ", "dim"), (printable(repr(text), 60), "bold $accent"),
                      (" (/ edit, Esc clear)", "dim")]
        else:
            parts += [("  / filter", "dim")] + ([("  Enter detail", "dim")] if total else [])
        set_content(self.query_one("#process-status", TextBlock), Content.assemble(*parts))

    def table(self) -> DataTable:
        return self.query_one(DataTable)
