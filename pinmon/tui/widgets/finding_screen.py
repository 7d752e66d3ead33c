"""One finding in full: rule id (stable, what users alert on), message, advice and its numbers."""
from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from ...model import Finding
from ...units import fmt_bytes, fmt_pct, fmt_rate
from ..format import SEVERITY_STYLE


def _value(key: str, v: Any) -> str:
    """Units by the key's name (the model's convention: ``*_bytes``, ``*_bytes_per_s``), raw as well."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if key.endswith("_bytes_per_s"):
        return f"{fmt_rate(v)}  ({v:.4g} B/s)"
    if key.endswith("_bytes"):
        return f"{fmt_bytes(v)}  ({v:,} B)" if isinstance(v, int) else fmt_bytes(v)
    if key in ("share", "fraction") or key.endswith("_share") or key.endswith("_fraction"):
        return f"{fmt_pct(v, 1)}  ({v:.4g})"
    return f"{v:.4g}" if isinstance(v, float) else f"{v:,}"


def finding_text(f: Finding) -> Content:
    style = SEVERITY_STYLE.get(f.severity, "")
    rows = [Content.assemble((f" {f.severity.upper()} ", f"bold reverse {style}"), " ", (f.rule, "bold")),
            Content.assemble(("subject  ", "dim"), f.subject), Content(""),
            Content(f.message), Content(""),
            Content.assemble(("advice  ", "bold $accent"), f.advice)]
    if f.values:
        rows += [Content(""), Content.styled("numbers", "bold")]
        width = max(len(k) for k in f.values)
        rows += [Content.assemble((f"  {k:<{width}}  ", "dim"), _value(k, v)) for k, v in f.values.items()]
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
