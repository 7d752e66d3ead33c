"""The selected GPU in full: bus id, CPU affinity, NUMA node, memory, what the measured copies explain
of its link (where some process's copies are measured: attached or traced), its processes.

Each process is one line, its command line's meaningful part (``command_brief``) cut to the panel's
width: a multi-line ``python -c`` script would otherwise fill the panel.
"""
from __future__ import annotations

from textual.content import Content

from ...units import fmt_bytes, fmt_link, fmt_rate, fmt_traffic, printable
from ..view.format import command_brief, error_text, error_total, link_state, method_label
from ..view.state import ViewState
from ..view.traffic import CAVEAT, detail_lines, gpu_copies, hanging
from .base import NoLinks, TextBlock, View, lines, set_content

# "    4242    80.0 GiB  ": the columns before COMMAND.
PROCESS_LEAD_CELLS = 22
# The labels' column ("traffic   ").
LABEL_CELLS = 10
# A command line's cut before the panel is laid out (its width still unknown).
DEFAULT_COMMAND_CELLS = 58


class GpuDetail(NoLinks, TextBlock, View):
    _state: ViewState | None = None

    def on_resize(self) -> None:
        if self._state is not None:
            self.show(self._state)

    def show(self, state: ViewState) -> None:
        self._state = state
        gpu = state.selected
        if gpu is None:
            self.border_title = "GPU detail"
            set_content(self, "no GPU selected")
            return
        self.border_title = f"GPU {gpu.index} detail (g: next GPU)"
        link = gpu.link
        names = {p.pid: p for p in (state.snapshot.processes if state.snapshot else ())}
        width = self.content_size.width
        command_cells = max(12, width - PROCESS_LEAD_CELLS) if width else DEFAULT_COMMAND_CELLS
        rows: list[Content | str] = [
            Content.assemble(("name      ", "dim"), printable(gpu.name or None, 60), "  ", ("uuid ", "dim"),
                             printable(gpu.uuid or None, 60)),
            Content.assemble(("bus id    ", "dim"), printable(gpu.pci_bus_id or None, 40),
                             ("   NUMA node ", "dim"), "n/a" if gpu.numa_node is None else str(gpu.numa_node),
                             ("   CPU affinity ", "dim"), printable(gpu.cpu_affinity or None, 80)),
            Content.assemble(("memory    ", "dim"), f"{fmt_bytes(gpu.memory_used_bytes)} used of "
                                                    f"{fmt_bytes(gpu.memory_total_bytes)}"),
            Content.assemble(("link      ", "dim"), f"{fmt_link(link.gen, link.width)} now = "
                             f"{fmt_rate(link.theoretical_bytes_per_s)}; max {fmt_link(link.gen_max, link.width_max)}"
                             f" = {fmt_rate(link.max_theoretical_bytes_per_s)}", _state_note(link_state(gpu, state.thresholds))),
            Content.assemble(("traffic   ", "dim"), f"{fmt_traffic(gpu.pcie.rx_bytes_per_s, gpu.pcie.tx_bytes_per_s)}"
                             f"  ({_method_note(gpu.pcie.method)})"),
            Content.styled("          TX also counts the read requests of host-to-device copies", "dim"),
            Content.assemble(("PCIe      ", "dim"), (error_text(gpu), "bold $error" if error_total(gpu) else ""),
                             (" since pinmon started", "dim")),
        ]
        copies = gpu_copies(state.traffic, gpu.index)
        if copies is not None:
            # Wrapped here, under the text rather than the label: the lines name several processes.
            label = "copies    "
            for line in detail_lines(copies):
                for part in hanging(line, width, LABEL_CELLS):
                    rows.append(Content.assemble((label, "dim"), part))
                    label = " " * LABEL_CELLS
            rows += [Content.styled(" " * LABEL_CELLS + part, "dim")
                     for part in hanging(CAVEAT, width, LABEL_CELLS)]
        rows += [Content.assemble(("notice    ", "dim"), (printable(n), "$warning")) for n in gpu.notices]
        if gpu.processes:
            rows.append(Content.styled(f"{'PID':>8}  {'GPU MEM':>10}  COMMAND", "bold"))
            for gp in sorted(gpu.processes, key=lambda p: -(p.gpu_memory_bytes or 0)):
                proc = names.get(gp.pid)
                rows.append(f"{gp.pid:>8}  {fmt_bytes(gp.gpu_memory_bytes):>10}  "
                            f"{command_brief(proc, command_cells) if proc else 'n/a'}")
        else:
            rows.append(Content.styled("no compute processes on this GPU", "dim"))
        set_content(self, lines(*rows))


def _state_note(state: str) -> Content:
    if state == "degraded":
        return Content.styled("  DEGRADED under load: check slot, riser, BIOS link settings", "bold $warning")
    if state == "downshift":
        return Content.styled("  (idle downshift: power saving, normal)", "dim")
    return Content("")


def _method_note(method: str | None) -> str:
    if method == "gpm":
        return "exact: GPM link bytes"
    if method == "counters":
        return "exact: link counters"
    if method == "sampled":
        return "est.: NVML 20 ms sample"
    return method_label(method)
