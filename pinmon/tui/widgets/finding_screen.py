"""One finding in full: rule id (stable, what users alert on), message, advice and its numbers."""
from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from ...model import Finding
from ..format import SEVERITY_STYLE


def _value(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def finding_text(f: Finding) -> Content:
    style = SEVERITY_STYLE.get(f.severity, "")
    rows = [Content.assemble((f" {f.severity.upper()} ", f"bold reverse {style}"), " ", (f.rule, "bold")),
            Content.assemble(("subject  ", "dim"), f.subject), Content(""),
            Content(f.message), Content(""),
            Content.assemble(("advice  ", "bold $accent"), f.advice)]
    if f.values:
        rows += [Content(""), Content.styled("numbers", "bold")]
        width = max(len(k) for k in f.values)
        rows += [Content.assemble((f"  {k:<{width}}  ", "dim"), _value(v)) for k, v in f.values.items()]
    rows += [Content(""), Content.styled("Esc / Enter / q: close", "dim")]
    return Content("\n").join(rows)


class FindingScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close")]

    def __init__(self, finding: Finding):
        super().__init__()
        self.finding = finding

    def compose(self):
        with VerticalScroll(id="finding-box") as box:
            box.border_title = "finding"
            yield Static(finding_text(self.finding), id="finding-text")
