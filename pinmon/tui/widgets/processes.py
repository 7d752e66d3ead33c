"""The per-process table: pinned, write-combined, mappings and churn, GPU memory; sortable, filterable.

Sort column and filter text are this view's own state (how the user looks), not data.
"""
from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import DataTable, Input, Static

from ...model import ProcessPinned
from ...units import fmt_bytes, fmt_int
from ..format import SORT_COLUMNS, command_text, filter_processes, sort_processes
from ..state import ViewState
from .base import CompositeView, set_content

# (sort key or None, header, right-aligned, width). Fixed widths fit the widest value a column can
# print ("1023.9 GiB", pid 4194304) plus one space of gutter, so at 80 columns every number is whole
# and only the command line runs off to the right; nothing is re-measured on refresh either.
COLUMNS = (("pid", "PID", True, 8), ("user", "USER", False, 9), ("pinned", "PINNED", True, 11),
           ("wc", "WC", True, 10), (None, "MAPS", True, 7), ("churn", "CHURN", True, 7),
           ("gpu_mem", "GPU MEM", True, 10), (None, "SRC", False, 7), ("command", "COMMAND", False, None))
# Past this many changed cells one rebuild is cheaper than cell-by-cell updates.
MAX_CELL_UPDATES = 40


class FilterInput(Input):
    BINDINGS = [Binding("escape", "clear_filter", "Clear filter", show=False)]

    def action_clear_filter(self) -> None:
        self.value = ""
        self.display = False
        self.screen.query_one("#process-table", DataTable).focus()


def _cell(text: str, right: bool) -> Text:
    # No cell padding in the table: a left-aligned cell brings its own space, a right-aligned one
    # has the spare width of its column.
    return Text(text if right else " " + text, justify="right" if right else "left", no_wrap=True)


def process_cells(p: ProcessPinned) -> tuple[Text, ...]:
    churn = fmt_int(p.mappings_churn)
    values = (str(p.pid), p.user or "n/a", fmt_bytes(p.pinned_bytes), fmt_bytes(p.write_combined_bytes),
              fmt_int(p.pinned_mappings), churn if not p.mappings_churn else f"±{churn}",
              fmt_bytes(p.gpu_memory_bytes), p.source, command_text(p))
    return tuple(_cell(v, right) for v, (_, _, right, _) in zip(values, COLUMNS))


class ProcessPanel(Vertical, CompositeView):
    BINDINGS = [Binding("o", "cycle_sort", "Sort")]

    def __init__(self, **kw):
        super().__init__(**kw)
        self.sort_index = 0
        self.processes: tuple[ProcessPinned, ...] = ()
        self._shown_rows: Optional[tuple] = None
        self._columns_for: Optional[int] = None

    def compose(self):
        inp = FilterInput(placeholder="filter: pid, name or user (Enter: table, Esc: clear)", id="process-filter")
        inp.display = False
        yield inp
        table = DataTable(id="process-table", cursor_type="row", zebra_stripes=True, cell_padding=0)
        yield table
        yield Static(id="process-status")

    @property
    def filter_text(self) -> str:
        return self.query_one(FilterInput).value

    @property
    def sort_column(self):
        return SORT_COLUMNS[self.sort_index]

    def draw(self, state: ViewState) -> None:
        self.processes = state.snapshot.processes if state.snapshot is not None else ()
        self._refresh_table()

    def open_filter(self) -> None:
        inp = self.query_one(FilterInput)
        inp.display = True
        inp.focus()

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
        key = COLUMNS[event.column_index][0]
        for i, col in enumerate(SORT_COLUMNS):
            if col.key == key:
                self.sort_index = i
                self._refresh_table()

    def visible_processes(self) -> list[ProcessPinned]:
        return sort_processes(filter_processes(self.processes, self.filter_text), self.sort_column)

    def _refresh_table(self) -> None:
        table = self.query_one(DataTable)
        if self._columns_for != self.sort_index:
            self._columns_for = self.sort_index
            table.clear(columns=True)
            self._shown_rows = None
            for key, header, right, width in COLUMNS:
                label = header + ((" ▼" if self.sort_column.descending else " ▲") if key == self.sort_column.key else "")
                table.add_column(_cell(label, right), key=header, width=width)
        procs = self.visible_processes()
        rows = tuple((p.pid, process_cells(p)) for p in procs)
        if rows != self._shown_rows:
            old, self._shown_rows = self._shown_rows, rows
            changes = None
            if old is not None and [pid for pid, _ in old] == [pid for pid, _ in rows]:
                changes = [(pid, col[1], new) for (pid, cells), (_, old_cells) in zip(rows, old)
                           for col, new, prev in zip(COLUMNS, cells, old_cells) if new != prev]
            if changes is not None and len(changes) <= MAX_CELL_UPDATES:
                # Same processes in the same order: change only the cells that moved.
                for pid, header, new in changes:
                    table.update_cell(str(pid), header, new, update_width=header == "COMMAND")
            else:
                self._rebuild_rows(table, rows)
        self._update_status(len(procs))

    def _rebuild_rows(self, table: DataTable, rows: tuple) -> None:
        keep = None
        if table.row_count:
            try:
                keep = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            except Exception:  # cursor outside the old rows
                keep = None
        table.clear()
        for pid, cells in rows:
            table.add_row(*cells, key=str(pid))
        if keep is not None:
            try:
                table.move_cursor(row=table.get_row_index(keep), animate=False)
            except Exception:  # that process is gone
                pass

    def _update_status(self, shown: int) -> None:
        total = len(self.processes)
        text = self.filter_text
        parts: list = [f"{shown} of {total} processes" if text else f"{total} processes",
                       ("  sort ", "dim"), f"{self.sort_column.label} ", ("(o)", "dim")]
        if text:
            parts += [("  filter ", "dim"), (repr(text), "bold $accent"), (" (/ edit, Esc clear)", "dim")]
        else:
            parts += [("  / filter", "dim")]
        set_content(self.query_one("#process-status", Static), Content.assemble(*parts))

    def focus_table(self) -> None:
        self.query_one(DataTable).focus()
