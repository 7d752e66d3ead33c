"""The advisor's findings, worst first, coloured by severity; Enter opens one in full.

Each entry starts with what the finding is about (``finding_subject``; its short form where the
line is narrow), then the rule id. A rule's findings come together and the advice they share once,
after them, as a line the cursor skips (``finding_groups``); each keeps the advice that is its own.
Messages and advice wrap under their own start (not back to column 0, under the badge or the arrow)
and take at most ``MAX_LINES`` lines each, so one long finding leaves room for the others; the list scrolls on its own and keeps a stable gutter for its scrollbar, so the text width
and the border stay where they are whether it scrolls or not.
"""
from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ...model import Finding, Snapshot
from ...units import printable
from ..screens.finding import FindingScreen
from ..view.finding_groups import RuleGroup, group_by_rule
from ..view.finding_subject import finding_subject
from ..view.format import SEVERITY_LABEL, SEVERITY_STYLE
from ..view.state import ViewState
from .base import View, follow_popup
from .wrap import hanging

MAX_LINES = 3


def badge(f: Finding) -> Content:
    style = SEVERITY_STYLE.get(f.severity, "")
    label = SEVERITY_LABEL.get(f.severity, printable(f.severity, 8).upper()[:4])
    return Content.styled(f" {label} ", f"bold reverse {style}")


def finding_head(f: Finding, snapshot: Snapshot | None, width: int | None) -> Content:
    """Severity, what the finding is about, the rule id; the subject's short form where the full one
    would not fit ``width``."""
    def line(short: bool) -> Content:
        return Content.assemble(badge(f), " ", (finding_subject(f, snapshot, short), "bold"),
                                ("  " + printable(f.rule, 60), "dim"))

    full = line(False)
    if not width or full.cell_length <= width:
        return full
    return line(True).truncate(width, ellipsis=True)


def advice_rows(advice: str, width: int | None) -> list[Content]:
    if not advice:
        return []
    return hanging(Content.styled("   → ", "bold $accent"), Content.styled(printable(advice), "italic"),
                   width, MAX_LINES)


def finding_prompt(f: Finding, width: int | None = None, snapshot: Snapshot | None = None,
                   advice: str | None = None) -> Content:
    """A finding's entry: its head, message and ``advice`` (its whole advice where None)."""
    rows = [finding_head(f, snapshot, width)]
    rows += hanging("   ", printable(f.message), width, MAX_LINES)
    rows += advice_rows(f.advice if advice is None else advice, width)
    return Content("\n").join(rows)


class FindingsPanel(OptionList, View):
    """The list; Enter opens a finding, and the open pop-up gets every newer state (its figures
    move, or it is marked cleared)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.findings: tuple[Finding, ...] = ()  # in the order shown: a rule's findings together
        self._shown: tuple[tuple[Finding, ...], int] | None = None
        self._snapshot: Snapshot | None = None
        self._groups: list[RuleGroup] = []
        self._popup: FindingScreen | None = None

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
        self._groups = group_by_rule(state.findings)
        self.findings = tuple(f for g in self._groups for f in g.findings)
        self._snapshot = state.snapshot
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
        options = []
        index = 0
        for group in self._groups:
            for f, own in zip(group.findings, group.own_advice):
                shared_here = len(group.findings) == 1
                options.append(Option(finding_prompt(f, width, self._snapshot, f.advice if shared_here else own),
                                      id=f"finding-{index}"))
                index += 1
            if len(group.findings) > 1 and group.shared_advice:
                options.append(Option(Content("\n").join(advice_rows(group.shared_advice, width)), disabled=True))
        self.add_options(options)
        # Enter works as soon as the list has focus: something is always highlighted (a finding).
        first = 0 if keep is None else min(keep, len(options) - 1)
        while first > 0 and options[first].disabled:
            first -= 1
        self.highlighted = first

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        option_id = event.option.id or ""
        if not option_id.startswith("finding-"):
            return
        index = int(option_id.removeprefix("finding-"))
        if 0 <= index < len(self.findings):
            read_at = self._snapshot.time if self._snapshot is not None else None
            self._popup = FindingScreen(self.findings[index], read_at)
            self.app.push_screen(self._popup)
