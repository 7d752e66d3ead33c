"""The main screen's widgets: seven tabs of panels, a status line and the notice bar under the tab
strip, and the footer.

Where each panel sits and which show on a narrow or a wide terminal (``narrow-only``, ``wide-only``)
is ``pinmon.tcss``'s business; here is what there is and what each panel's border says.

The containers that only arrange others (no border, no text of their own: the screen, the tabs, a
tab's pane, the grids, the overview's right column) are ``BLANK`` (Textual's switch for such
widgets): each screen update otherwise renders every line of every container around a changed
line, and at 1 Hz most of the update is those containers (bench/tui_frame.py). Textual releases
without the switch ignore it (``textual_compat``, part 7).
"""
from __future__ import annotations

from typing import Any, TypeVar

from textual.app import ComposeResult
from textual.containers import Container, Vertical, VerticalScroll
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import ContentSwitcher, Footer, TabbedContent, TabPane

from ..advise.thresholds import Thresholds
from .textual_compat import CONTENT_TABS, draw_as_blank
from .view.first_frame import TABS
from .widgets.containers import ContainerPanel, containers_title
from .widgets.findings import FindingsPanel
from .widgets.gpu_detail import GpuDetail
from .widgets.gpu_list import BareGpuList, GpuList
from .widgets.gpu_summary import GpuSummary
from .widgets.header import StatusHeader
from .widgets.memory import MemoryPanel, memory_title
from .widgets.notices import NoticeBar
from .widgets.probe import ProbePanel, ProbeSummary, probe_title
from .widgets.processes import ProcessPanel
from .widgets.top_findings import TopFindings, advisor_title
from .widgets.top_processes import TopProcesses

W = TypeVar("W", bound=Widget)




class MainScreen(Screen):
    BLANK = True


class MainTabs(TabbedContent):
    """The tabs, with the status line and the notice bar between the tab strip and the panes.

    Below the tab strip rather than above it: the status line's clock changes every second, and
    Textual repaints every widget that meets the rows between the highest and the lowest changed
    line. Above the tabs, each second's update took in the tab strip's ten widgets as well
    (bench/tui_frame.py: the screen update a third cheaper without them). The two lines are
    composed right after the tab strip; should a Textual compose no ``ContentTabs``, they follow
    the panes instead, and are still shown."""

    BLANK = True

    def __init__(self, *between: Widget, **kw: Any) -> None:
        super().__init__(**kw)
        self._between = between

    def compose(self) -> ComposeResult:
        placed = False
        for widget in super().compose():
            yield widget
            if not placed and isinstance(widget, CONTENT_TABS):
                placed = True
                yield from self._between
        if not placed:
            yield from self._between

    def on_mount(self) -> None:
        # The strip's outer box and the panes' switcher (both built by Textual's compose) only hold
        # others: drawn as plain background, as the containers here are (each second's update took
        # in both: their parent, this widget, meets the changed rows).
        for child in self.children:
            if isinstance(child, (CONTENT_TABS, ContentSwitcher)):
                draw_as_blank(child)


class Pane(TabPane):
    BLANK = True

    def on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        """A widget in this pane got the focus: TabbedContent then shows this pane. Where the focus
        has moved on by the time the message comes (a tab key pressed just after a key that focused
        a widget here), showing this pane again would undo that key: the message stops here."""
        focused = self.app.focused
        if focused is None or self not in focused.ancestors_with_self:
            event.stop()


class Grid(Container):
    BLANK = True


class Column(Vertical):
    BLANK = True


class Slot(Container):
    """A panel's own place in its column, the panel's size exactly.

    Textual repaints a partial update as one rectangle around the changed lines, and in it every
    line of every widget whose *parent* meets the rectangle, the widget itself met or not: a panel
    stacked under the GPUs in the same column was drawn again each second for the GPU rows' rates.
    In a slot of its own the panel's parent is the slot, which meets the rectangle only where the
    panel does; the slot itself is ``BLANK`` (plain background, not rendered)."""

    BLANK = True


def compose_main(thresholds: Thresholds) -> ComposeResult:
    with MainTabs(StatusHeader(id="status"), NoticeBar(id="notices"), initial="overview", id="tabs"):
        with Pane(TABS[0][1], id="overview"):
            with Grid(id="overview-grid"):
                yield from _overview_narrow(thresholds)
                yield from _overview_wide(thresholds)
        with Pane(TABS[1][1], id="gpus"):
            with Grid(id="gpus-grid"):
                yield _titled(GpuList(id="gpu-list", classes="panel"), "PCIe per GPU (Enter: detail, g: next)")
                yield _titled(GpuDetail(id="gpu-detail", classes="panel"), "GPU detail")
        with Pane(TABS[2][1], id="memory"):
            with VerticalScroll(id="memory-scroll", classes="tab-scroll"):
                yield _titled(MemoryPanel(id="memory-panel", classes="panel"), memory_title(thresholds))
        with Pane(TABS[3][1], id="processes"):
            yield ProcessPanel(id="process-panel")
        with Pane(TABS[4][1], id="probe"):
            with VerticalScroll(id="probe-scroll", classes="tab-scroll"):
                yield _titled(ProbePanel(id="probe-panel", classes="panel"), probe_title(live=True))
        with Pane(TABS[5][1], id="advisor"):
            yield _titled(FindingsPanel(id="findings"), "Advisor findings, worst first (Enter: full text)")
        with Pane(TABS[6][1], id="containers"):
            yield _titled(ContainerPanel(id="container-panel"), containers_title(thresholds))
    # The palette stays on ctrl+p; its footer entry would push keys off an 80-column footer.
    with Slot(id="footer-slot"):
        yield Footer(compact=True, show_command_palette=False)


def _overview_narrow(thresholds: Thresholds) -> ComposeResult:
    """Under 120 columns, one column: the GPUs in a line each, memory, the worst findings in a line
    each, and the processes in the rows left over (so nothing scrolls at 80x24)."""
    with Column(id="ov-narrow", classes="narrow-only"):
        with Vertical(id="ov-gpus-narrow", classes="panel") as box:
            box.border_title = "GPUs"
            yield GpuSummary(classes="narrow-only")
        yield _titled(MemoryPanel(compact=True, id="ov-memory-narrow", classes="panel narrow-only"),
                      memory_title(thresholds))
        with Vertical(id="ov-findings-narrow", classes="panel") as box:
            box.border_title = advisor_title(None)
            yield TopFindings(limit=3, classes="narrow-only")
        with Vertical(id="ov-processes-narrow", classes="panel") as box:
            box.border_title = "Pinned memory by process (4: table)"
            yield TopProcesses(limit=30, fit=True, classes="narrow-only")


def _overview_wide(thresholds: Thresholds) -> ComposeResult:
    """From 120 columns, two: the GPUs with their RX/TX graphs over the advisor's findings in full;
    host memory with the pinned share's graph over the processes and the latest probe."""
    with Column(id="ov-left", classes="wide-only"):
        with Vertical(id="ov-gpus", classes="panel") as box:
            box.border_title = "GPUs: RX/TX link bytes, last minutes; % of link rate"
            yield BareGpuList(classes="wide-only")
        with Slot(id="ov-findings-slot"), Vertical(id="ov-findings", classes="panel") as box:
            box.border_title = advisor_title(None)
            yield TopFindings(limit=12, detailed=True, classes="wide-only")
    with Column(id="ov-right", classes="wide-only"):
        yield _titled(MemoryPanel(compact=True, graph=True, id="ov-memory", classes="panel wide-only"),
                      memory_title(thresholds))
        with Slot(id="ov-processes-slot"), Vertical(id="ov-processes", classes="panel") as box:
            box.border_title = "Pinned memory by process (4: table)"
            yield TopProcesses(limit=30, fit=True, classes="wide-only")
        with Slot(id="ov-probe-slot"):
            yield _titled(ProbeSummary(id="ov-probe", classes="panel wide-only"),
                          "Probe (5: detail; % of link: payload)")


def pane_of(widget: DOMNode) -> str | None:
    """The id of the tab pane holding ``widget``; None outside the tabs (always on screen)."""
    node: DOMNode | None = widget
    while node is not None:
        if isinstance(node, TabPane):
            return node.id
        node = node.parent
    return None


def _titled(widget: W, title: str) -> W:
    widget.border_title = title
    return widget
