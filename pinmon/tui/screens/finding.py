"""One finding in full: rule id (stable, what users alert on), message, advice and its numbers."""
from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from ...model import Finding
from ...units import fmt_bytes, fmt_pct, fmt_rate, printable
from ..format import SEVERITY_STYLE


# The full text is shown here, but one screen's worth: a runaway message stays bounded.
TEXT_CHARS = 4000


def _value(key: str, v: Any) -> str:
    """Units by the key's name (the model's convention: ``*_bytes``, ``*_bytes_per_s``), raw as well."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return printable(str(v), 300)  # text from reports (a call site) is data, shown as such
    if key.endswith("_bytes_per_s"):
        return f"{fmt_rate(v)}  ({v:.4g} B/s)"
    if key.endswith("_bytes"):
        return f"{fmt_bytes(v)}  ({v:,} B)" if isinstance(v, int) else fmt_bytes(v)
    if key in ("share", "fraction") or key.endswith("_share") or key.endswith("_fraction"):
        return f"{fmt_pct(v, 1)}  ({v:.4g})"
    return f"{v:.4g}" if isinstance(v, float) else f"{v:,}"


def finding_text(f: Finding) -> Content:
    """The finding in full; the labels stand on lines of their own, so the text under them wraps
    from the same column as it starts."""
    style = SEVERITY_STYLE.get(f.severity, "")
    rows = [Content.assemble((f" {printable(f.severity, 10).upper()} ", f"bold reverse {style}"), " ",
                             (printable(f.rule, 80), "bold")),
            Content.assemble(("subject  ", "dim"), printable(f.subject, 200)), Content(""),
            Content(printable(f.message, TEXT_CHARS)), Content(""),
            Content.styled("advice", "bold $accent"), Content(printable(f.advice, TEXT_CHARS))]
    if f.values:
        rows += [Content(""), Content.styled("numbers", "bold")]
        keys = {k: printable(str(k), 40) for k in f.values}
        width = max(len(k) for k in keys.values())
        rows += [Content.assemble((f"  {keys[k]:<{width}}  ", "dim"), _value(k, v)) for k, v in f.values.items()]
    return Content("\n").join(rows)


class FindingScreen(ModalScreen[None]):
    """The close keys sit in the box's bottom border: always on screen, however long the text."""

    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close")]

    def __init__(self, finding: Finding):
        super().__init__()
        self.finding = finding

    def compose(self):
        with VerticalScroll(id="finding-box") as box:
            box.border_title = "finding"
            box.border_subtitle = "Esc / Enter / q: close"
            yield Static(finding_text(self.finding), id="finding-text")
