"""The advisor's findings, worst first, coloured by severity; Enter opens one in full.

Each entry's message and advice wrap under their own start (not back to column 0, under the badge
or the arrow) and take at most ``MAX_LINES`` lines each, so one long finding leaves room for the
others; the list scrolls on its own and keeps a stable gutter for its scrollbar, so the text width
and the border stay where they are whether it scrolls or not.
"""
from __future__ import annotations

from typing import Optional

from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ...model import Finding
from ...units import printable
from ..format import SEVERITY_LABEL, SEVERITY_STYLE
from ..screens.finding import FindingScreen
from ..state import ViewState
from .base import View, follow_popup
from .wrap import hanging

MAX_LINES = 3


def badge(f: Finding) -> Content:
    style = SEVERITY_STYLE.get(f.severity, "")
    label = SEVERITY_LABEL.get(f.severity, printable(f.severity, 8).upper()[:4])
    return Content.styled(f" {label} ", f"bold reverse {style}")


def finding_prompt(f: Finding, width: Optional[int] = None) -> Content:
    head = Content.assemble(badge(f), " ", (printable(f.rule, 60), "bold"), (f"  {printable(f.subject, 60)}", "dim"))
    rows = [head.truncate(width, ellipsis=True) if width else head]
    rows += hanging("   ", printable(f.message), width, MAX_LINES)
    rows += hanging(Content.styled("   → ", "bold $accent"), Content.styled(printable(f.advice), "italic"),
                    width, MAX_LINES)
    return Content("\n").join(rows)


class FindingsPanel(OptionList, View):
    """The list; Enter opens a finding, and the open pop-up gets every newer state (its figures
    move, or it is marked cleared)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.findings: tuple[Finding, ...] = ()
        self._shown: Optional[tuple[tuple[Finding, ...], int]] = None
        self._snapshot_time: Optional[float] = None
        self._popup: Optional[FindingScreen] = None

    def _text_width(self) -> int:
        """Cells an option's text has: the list's content width less the options' padding."""
        if not self.is_mounted:
            return 0
        padding = self.get_component_styles("option-list--option").padding
        return max(0, self.scrollable_content_region.width - padding.width)

    def on_resize(self) -> None:
        if self._shown is not None:
            self._fill()

    def show(self, state: ViewState) -> None:
        self.findings = state.findings
        self._snapshot_time = state.snapshot.time if state.snapshot is not None else None
        self._fill()
        self._popup = follow_popup(self._popup, state.findings, state.snapshot)

    def _fill(self) -> None:
        width = self._text_width()
        if self._shown == (self.findings, width):
            return
        self._shown = (self.findings, width)
        keep = self.highlighted
        self.clear_options()
        if not self.findings:
            self.add_option(Option(Content.styled("No findings: nothing the advisor would change right now.",
                                                  "$success"), id="none", disabled=True))
            return
        self.add_options(Option(finding_prompt(f, width)) for f in self.findings)
        # Enter works as soon as the list has focus: something is always highlighted.
        self.highlighted = 0 if keep is None else min(keep, len(self.findings) - 1)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if 0 <= event.option_index < len(self.findings):
            self._popup = FindingScreen(self.findings[event.option_index], self._snapshot_time)
            self.app.push_screen(self._popup)
