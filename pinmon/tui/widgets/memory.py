"""Host memory: RAM used/available, pinned (est.) against effective RAM with the 50% mark, the rest."""
from __future__ import annotations

from textual.content import Content

from ...model import HostMemory
from ...units import fmt_bytes, fmt_pct
from ..format import share
from ..state import ViewState
from .bar import bar
from .base import View
from .rows import RowsWidget

# Pinned memory cannot be swapped or reclaimed; past half of RAM the kernel and every other
# process fight over what is left (the advisor's rule uses the same mark).
PINNED_MARK = 0.5
BAR_CELLS = 20
BAR_CELLS_COMPACT = 14


def _level(fraction, warn: float, crit: float) -> str:
    if fraction is None or fraction < warn:
        return "$success"
    return "$warning" if fraction < crit else "$error"


def memory_rows(h: HostMemory, compact: bool = False) -> list[Content]:
    effective = h.effective_mem_limit_bytes or h.mem_total_bytes
    used = h.used_bytes
    used_share = share(used, h.mem_total_bytes)
    pinned_share = share(h.pinned_bytes_est, effective)
    cells = BAR_CELLS_COMPACT if compact else BAR_CELLS
    ram_tail = ([f"used {fmt_bytes(used)}  ", ("avail ", "dim"), (fmt_bytes(h.mem_available_bytes), "bold")]
                if compact else
                [f"{fmt_bytes(used)} used, ", (fmt_bytes(h.mem_available_bytes), "bold"),
                 f" available of {fmt_bytes(h.mem_total_bytes)}"])
    rows = [
        Content.assemble(("RAM    ", "bold"), bar(used_share, cells, _level(used_share, 0.8, 0.95)),
                         f" {fmt_pct(used_share):>4}  ", *ram_tail),
        Content.assemble(("pinned ", "bold"),
                         bar(pinned_share, cells, _level(pinned_share, 0.25, PINNED_MARK), mark=PINNED_MARK),
                         f" {fmt_pct(pinned_share):>4}  ", (fmt_bytes(h.pinned_bytes_est), "bold"),
                         " est. of ", fmt_bytes(effective), "" if compact else " effective RAM"),
    ]
    memlock = "unlimited" if h.memlock_unlimited else fmt_bytes(h.memlock_limit_bytes)
    extra = [("WC", f"{fmt_bytes(h.write_combined_bytes_est)} est."), ("Shmem", fmt_bytes(h.shmem_bytes)),
             ("Mlocked", fmt_bytes(h.mlocked_bytes)), ("memlock", memlock)]
    if h.cgroup_limit_bytes is not None:
        extra.append(("cgroup limit", fmt_bytes(h.cgroup_limit_bytes)))
    if h.swap_used_bytes:
        extra.append(("swap used", fmt_bytes(h.swap_used_bytes)))
    if compact:
        for pair in (extra[i:i + 2] for i in range(0, len(extra), 2)):
            # A label at least one space from its value, even one longer than the column ("cgroup limit").
            rows.append(Content.assemble(*[p for k, v in pair for p in ((f"{k} ".ljust(8), "dim"), f"{v:<18}")]))
    else:
        rows += [Content.assemble((f"{k:<13}", "dim"), v) for k, v in extra]
        rows.append(Content.styled("pinned: CUDA host allocations seen in /proc/PID/maps (est.); ┃ marks 50% of"
                                   " effective RAM (MemTotal or the cgroup limit, whichever is lower)", "dim"))
    return rows


class MemoryPanel(RowsWidget, View):
    """Row by row: each second mostly the RAM line changes, and only it is redrawn."""

    def __init__(self, compact: bool = False, **kw):
        super().__init__(**kw)
        self.compact = compact

    def show(self, state: ViewState) -> None:
        if state.snapshot is None:
            self.set_rows([Content.styled("waiting for the first snapshot…", "dim")])
            return
        self.set_rows(memory_rows(state.snapshot.host, self.compact))
