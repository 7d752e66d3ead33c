"""The advisor's findings, worst first, coloured by severity; Enter opens one in full."""
from __future__ import annotations

from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ...model import Finding
from ..format import SEVERITY_LABEL, SEVERITY_STYLE
from ..state import ViewState
from .base import View
from .finding_screen import FindingScreen


def badge(f: Finding) -> Content:
    style = SEVERITY_STYLE.get(f.severity, "")
    return Content.styled(f" {SEVERITY_LABEL.get(f.severity, f.severity.upper()[:4])} ", f"bold reverse {style}")


def finding_prompt(f: Finding) -> Content:
    return Content.assemble(badge(f), " ", (f.rule, "bold"), (f"  {f.subject}", "dim"), "\n",
                            "  ", f.message, "\n", ("  → ", "bold $accent"), (f.advice, "italic"))


class FindingsPanel(OptionList, View):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.findings: tuple[Finding, ...] = ()
        self._shown: tuple[Finding, ...] | None = None

    def show(self, state: ViewState) -> None:
        self.findings = state.findings
        if self._shown == self.findings:
            return
        self._shown = self.findings
        keep = self.highlighted
        self.clear_options()
        if not self.findings:
            self.add_option(Option(Content.styled("No findings: nothing the advisor would change right now.",
                                                  "$success"), id="none", disabled=True))
            return
        self.add_options(Option(finding_prompt(f)) for f in self.findings)
        # Enter works as soon as the list has focus: something is always highlighted.
        self.highlighted = 0 if keep is None else min(keep, len(self.findings) - 1)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if 0 <= event.option_index < len(self.findings):
            self.app.push_screen(FindingScreen(self.findings[event.option_index]))
