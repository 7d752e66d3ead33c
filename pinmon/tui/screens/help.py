"""Keys and the few terms the screens use (est., exact, degraded, the pinned mark).

Where a term stands for a rule's threshold, the help says the threshold the advisor uses."""
from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen

from ...advise.thresholds import Thresholds
from ...units import fmt_pct, fmt_rate
from ..widgets.wrap import HangingText

KEYS = (
    ("q", "quit (a recording in progress is closed first)"),
    ("? / F1", "this help"),
    ("1 … 7", "Overview, GPUs, Memory, Processes, Probe, Advisor, Containers"),
    ("g", "next GPU (its detail; probes use the selected GPU)"),
    ("Enter", "GPU row: its detail; finding, process or group: in full (a pop-up: ↑↓ PgUp PgDn"
              " scroll; Esc, Enter or q close)"),
    ("a", "attach the highlighted process (4, or its pop-up) for attach_window s (config, 10): its"
          " copies through uprobes on its libcuda; root, live only"),
    ("p", "quick probe now: pinned vs pageable copies"),
    ("s", "probe sweep over copy sizes"),
    ("/", "filter processes (pid, name, user, group); Esc clears"),
    ("o", "next sort column of the process table"),
    ("n", "all notices (the notice bar shows the first)"),
    ("space", "pause: live freezes the view, replay stops"),
    ("r", "start / stop recording snapshots to a file"),
    ("+ / -", "replay speed"),
    ("ctrl+p", "command palette: every action by name"),
    ("ctrl+z", "suspend to the shell; fg resumes"),
    ("Tab", "move between panels; arrows scroll"),
)



def terms(t: Thresholds) -> tuple[tuple[str, str], ...]:
    return (
        ("est.", "estimate: /proc/PID/maps for pinned, 20 ms sample for PCIe"),
        ("exact", "PCIe bytes from the link counters over the interval"),
        ("traced", "pinned bytes from the in-process tracer (exact)"),
        ("attached", "copies and allocations counted through uprobes on the process's libcuda (a, or"
                     " --attach); its pinned bytes stay the /proc/PID/maps estimate"),
        ("ATTACH", "pinmon --attach: every CUDA process kept attached, a window each interval"),
        ("copies", "GPU rows: how much of the link's RX and TX the measured copies explain, per process"
                   " and host memory kind; \"GPU not known\": a process on several GPUs, or one NVML does"
                   " not list, on a host with several"),
        ("RX in", "bytes the GPU's link received (link bytes: packet headers included): host-to-device"
                  " copies' data, and what the GPU reads from host memory"),
        ("TX out", "bytes the GPU's link sent: device-to-host copies' data, and also the read requests a"
                   " host-to-device copy makes the GPU send (on the H200, copies to the GPU alone read as"
                   " TX of 0.06x-0.09x their bytes), so TX is not device-to-host copies alone"),
        ("% of link", "a rate against the link's line rate (GT/s x lanes x encoding: 63.0 GB/s at Gen5 x16)."
                      " GPU rows count link bytes, headers included; the probe counts its copies' payload."
                      " A pinned copy at 55 GB/s of payload reads 88% in the probe and ~94% as RX"),
        ("DEGRADED", f"below max gen/width while moving >= {fmt_rate(t.link_degraded_traffic_bytes_per_s)}"),
        ("idle", "below max while idle: power saving, retrains on load"),
        (f"┃ {fmt_pct(t.pinned_ram_critical_fraction)}",
         f"pinned past {fmt_pct(t.pinned_ram_critical_fraction)} of effective RAM starves the rest"),
        ("duty", "share of wall time spent probing: pinmon's own load"),
        ("paused", "live pause still collects and records"),
    )


# The process table's columns (4: Processes).
COLUMN_TERMS = (
    ("PINNED", "all the pinned memory the process holds: pinned, write-combined (WC) and VmPin; what it sorts by"),
    ("WC", "write-combined pinned memory: fast for the GPU to read, on bare metal very slow for the CPU to read"),
    ("MAPS", "its pinned mappings in /proc/PID/maps (at 100 columns and wider)"),
    ("CHURN", "pinned mappings that appeared or went since the last scan: allocating and freeing in a"
              " loop shows here"),
    ("GPU MEM", "device memory it uses (NVML)"),
    ("NODE", "NUMA node with most of its pinned pages, and that share (hosts with several nodes)"),
    ("VMPIN", "io_uring and RDMA pins the kernel counts for it (a table 110 columns wide or more)"),
    ("GROUP", "its container, pod's container, Slurm job step or unit (a table 120 columns wide or more; 7: Containers)"),
    ("SRC", "where its figures come from: est. (/proc/PID/maps), traced (pinmon trace) or attached"
            " (a, or pinmon --attach)"),
    ("COMMAND", "the program and its script; the line under the table has the whole command line"),
)


# The Containers tab's columns (7: Containers).
GROUP_TERMS = (
    ("group", "a container, pod's container, Slurm job step or systemd unit: a cgroup with its own memory"
              " limit, where the OOM killer acts"),
    ("SEV", "the advisor's finding about the group: CRIT or WARN (pinned-cgroup-share, cgroup-oom-kills)"),
    ("PINNED/LIMIT", "all its processes hold (pinned, write-combined, VmPin) against its memory limit; ┃ marks the"
                     " critical share"),
    ("IN USE", "memory.current: every page charged to the group, pinned or not (a table 110 columns wide or more)"),
    ("VMPIN", "VmPin of its processes: io_uring and RDMA pins the kernel counts (CUDA's are not among them)"),
    ("OOM", "processes the kernel OOM-killed in the group since pinmon started"),
    ("gone", "its processes have ended; the group stays a few minutes, dimmed"),
)


def help_items(thresholds: Thresholds | None = None) -> list:
    """The help's lines: headings as they are, each key and term with its text wrapped under it.
    Each section's names take the width of its longest one and a gap, so none runs into its text."""
    items: list = []
    sections = (("keys", KEYS, "bold $accent"),
                ("terms", terms(thresholds if thresholds is not None else Thresholds()), "bold"),
                ("process table", COLUMN_TERMS, "bold"),
                ("containers", GROUP_TERMS, "bold"))
    for n, (heading, rows, style) in enumerate(sections):
        if n:
            items.append(Content(""))
        items.append(Content.styled(heading, "bold"))
        width = max(len(k) for k, _ in rows) + 2
        items += [(Content.styled(f"  {k:<{width}}", style), v) for k, v in rows]
    items += [Content(""), Content.styled("no GPU here? `pinmon demo` plays a recorded H200 session", "dim")]
    return items


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def __init__(self, thresholds: Thresholds | None = None):
        super().__init__()
        self.thresholds = thresholds

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box") as box:
            box.border_title = "pinmon help"
            box.border_subtitle = "Esc / q / ?: close"  # in the border: on screen however tall the help
            yield HangingText(help_items(self.thresholds), id="help-text")
