"""One finding in full: what it is about, its rule id (stable, what users alert on), message, advice
and its numbers.

The pop-up follows the advisor while it is open (``update``, from the Advisor tab's panel): the
finding's figures move with each snapshot, and a line says which snapshot they are from. When the
advisor stops reporting it, the last figures stay, marked CLEARED with the time, and where the
finding was about a process that has exited, that is said too: a figure such as "held now" is
then the last one read, not one that still holds.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen

from ...model import Finding, Snapshot
from ...units import fmt_bytes, fmt_pct, fmt_rate, printable
from ..view.format import SEVERITY_STYLE, fmt_time
from ..widgets.base import TextBlock, set_content
from .detail import KEYS_HINT

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


def same_finding(a: Finding, b: Finding) -> bool:
    """The same finding at another snapshot: its rule, its subject and (for a process) its pid."""
    return a.rule == b.rule and a.subject == b.subject and a.values.get("pid") == b.values.get("pid")


def status_rows(read_at: float | None, cleared_at: float | None, gone_pid: int | None) -> list[Content]:
    """When the figures were read, and whether the finding has cleared (and its process exited)."""
    if cleared_at is None:
        return [Content.styled(f"figures as of {fmt_time(read_at)} (the snapshot shown)", "dim")]
    why = f": process {gone_pid} has exited" if gone_pid is not None else ": the advisor no longer reports it"
    return [Content.assemble((" CLEARED ", "bold reverse $success"), f" at {fmt_time(cleared_at)}{why}"),
            Content.styled(f"below: its last figures, as of {fmt_time(read_at)}", "dim")]


def finding_text(f: Finding, read_at: float | None = None, cleared_at: float | None = None,
                 gone_pid: int | None = None) -> Content:
    """The finding in full; the labels stand on lines of their own, so the text under them wraps
    from the same column as it starts."""
    style = SEVERITY_STYLE.get(f.severity, "")
    rows = [Content.assemble((f" {printable(f.severity, 10).upper()} ", f"bold reverse {style}"), " ",
                             (printable(f.subject, 200), "bold")),
            Content.assemble(("rule     ", "dim"), printable(f.rule, 80))]
    if read_at is not None or cleared_at is not None:
        rows += status_rows(read_at, cleared_at, gone_pid)
    rows += [Content(""), Content(printable(f.message, TEXT_CHARS)), Content(""),
             Content.styled("advice", "bold $accent"), Content(printable(f.advice, TEXT_CHARS))]
    if f.values:
        rows += [Content(""), Content.styled("numbers", "bold")]
        keys = {k: printable(str(k), 40) for k in f.values}
        width = max(len(k) for k in keys.values())
        rows += [Content.assemble((f"  {keys[k]:<{width}}  ", "dim"), _value(k, v)) for k, v in f.values.items()]
    return Content("\n").join(rows)


class FindingScreen(ModalScreen[None]):
    """The close keys sit in the box's bottom border: always on screen, however long the text."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,q", "dismiss", "Close")]

    def __init__(self, finding: Finding, read_at: float | None = None):
        super().__init__()
        self.finding = finding
        self.read_at = read_at  # the time of the snapshot the figures are from
        self.cleared_at: float | None = None
        self.gone_pid: int | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="finding-box") as box:
            box.border_title = "finding"
            box.border_subtitle = KEYS_HINT
            yield TextBlock(self._text(), id="finding-text")

    def _text(self) -> Content:
        return finding_text(self.finding, self.read_at, self.cleared_at, self.gone_pid)

    def update(self, findings: Sequence[Finding], snapshot: Snapshot | None) -> None:
        """The advisor's findings at a newer snapshot: this finding's new figures, or CLEARED."""
        if snapshot is None:
            return
        now = next((f for f in findings if same_finding(f, self.finding)), None)
        if now is not None:
            self.finding, self.read_at, self.cleared_at, self.gone_pid = now, snapshot.time, None, None
        elif self.cleared_at is None:
            self.cleared_at = snapshot.time
            pid = self.finding.values.get("pid")
            if isinstance(pid, int) and all(p.pid != pid for p in snapshot.processes):
                self.gone_pid = pid
        if self.is_mounted:
            set_content(self.query_one("#finding-text", TextBlock), self._text())
