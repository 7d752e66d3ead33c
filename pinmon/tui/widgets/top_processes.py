"""The processes holding the most pinned memory (``HeldMemory.bytes``: pinned, write-combined and
VmPin, which PINNED shows), for the overview.

With ``fit`` the list takes the rows its panel has left (the narrow overview gives it what the
panels above leave over) and says how many more there are, so it never pushes the screen into a
scroll. The columns follow the width: COMMAND (the command line's meaningful part,
``format.command_brief``) keeps at least ``MIN_COMMAND_CELLS``, and USER, then GPU MEM, leave
where it would have less; a wide panel gives COMMAND everything the others leave.
"""
from __future__ import annotations

from typing import Any

from textual.content import Content

from ...model import ProcessPinned
from ...units import fmt_bytes, printable
from ..view.format import COLLECTING, SORT_COLUMNS, command_brief, sort_processes, user_text
from ..view.memo import Memo
from ..view.state import ViewState
from .base import NoLinks, TextBlock, View, lines, set_content

# (header, cells, right-aligned) of the columns before COMMAND, each with its leading space.
COLUMNS = (("PID", 8, True), ("USER", 10, False), ("PINNED", 11, True), ("GPU MEM", 11, True))
# Dropped in this order while COMMAND would get fewer cells than MIN_COMMAND_CELLS.
DROP_ORDER = ("USER", "GPU MEM")
MIN_COMMAND_CELLS = 24
# COMMAND's width before the panel is laid out.
DEFAULT_WIDTH = 78


def columns_for(width: int) -> tuple[tuple, int]:
    """The columns a list ``width`` cells wide shows, and COMMAND's cells (after its two spaces)."""
    columns = list(COLUMNS)
    for name in DROP_ORDER:
        if width - sum(c[1] for c in columns) - 2 >= MIN_COMMAND_CELLS:
            break
        columns = [c for c in columns if c[0] != name]
    return tuple(columns), max(1, width - sum(c[1] for c in columns) - 2)


def _cells(p: ProcessPinned) -> dict[str, str]:
    return {"PID": str(p.pid), "USER": user_text(p)[:9], "PINNED": fmt_bytes(p.held.bytes),
            "GPU MEM": fmt_bytes(p.placement.gpu_memory_bytes)}


def process_line(p: ProcessPinned, columns: tuple, command_cells: int) -> Content:
    values = _cells(p)
    lead = "".join(f"{values[h]:>{w}}" if right else f" {values[h]:<{w - 1}}" for h, w, right in columns)
    tag = "" if p.source == "est." else f" [{printable(p.source, 10)}]"
    command = command_brief(p, max(1, command_cells - len(tag)))
    return Content.assemble(lead, "  ", command, (tag, "dim"))


def header_line(columns: tuple) -> Content:
    return Content.styled("".join(f"{h:>{w}}" if right else f" {h:<{w - 1}}" for h, w, right in columns)
                          + "  COMMAND", "bold")


class TopProcesses(NoLinks, TextBlock, View):
    def __init__(self, limit: int = 5, fit: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.limit = limit
        self.fit = fit
        self._state: ViewState | None = None
        # The list as text, built again only when the rows or the room change (at 1 Hz the same
        # processes mostly hold the same memory: equal rows, the same text).
        self._memo = Memo()

    def on_resize(self) -> None:
        if self._state is not None:
            self.show(self._state)  # rows (fit) and columns follow the new size

    def _room(self) -> int:
        """How many processes to list: ``limit``, or fewer where the height (with the header row
        and a "more" row) holds fewer."""
        if not self.fit or not self.is_mounted or not self.size.height:
            return self.limit
        return max(0, min(self.limit, self.content_size.height - 1))

    def show(self, state: ViewState) -> None:
        self._state = state
        if state.snapshot is None:
            set_content(self, Content.styled(COLLECTING, "dim"))
            return
        procs = state.snapshot.processes
        if not procs:
            set_content(self, Content.styled("no CUDA processes with pinned memory", "dim"))
            return
        room = self._room()
        width = self.content_size.width if self.is_mounted and self.content_size.width else DEFAULT_WIDTH
        set_content(self, self._memo.get("list", (procs, room, width), process_list, procs, room, width))


def process_list(procs: tuple[ProcessPinned, ...], room: int, width: int) -> Content:
    """The header and the rows of the processes holding the most, in ``room`` rows at most (the last
    then saying how many more) and ``width`` cells."""
    shown = room if len(procs) <= room else max(0, room - 1)  # the last row says how many more
    columns, command_cells = columns_for(width)
    rows = [header_line(columns)]
    rows += [process_line(p, columns, command_cells) for p in sort_processes(procs, SORT_COLUMNS[0])[:shown]]
    if len(procs) > shown:
        rows.append(Content.styled(f"… {len(procs) - shown} more (4: Processes)", "dim"))
    return lines(*rows)
