"""A pop-up that shows one item in full (a process, a group) as labelled rows, and follows it through
the snapshots: the view hands every new snapshot to an open pop-up (``update``), so its figures stay
live; when the item has left the snapshots, its last figures stay and the border says since when.

Each row's text wraps under its own start, right of the label column, so nothing is cut and the
labels keep their column; a box taller than the screen scrolls (up/down, PgUp/PgDn, Home/End: the
box has the focus). The keys sit in the box's bottom border, always on screen.
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
from ..view.detail_row import LABEL_CELLS, DetailRow
from ..view.format import fmt_time
from ..widgets.wrap import HangingText

STYLES = {"head": "bold", "dim": "dim", "warning": "bold $warning", "": ""}


# The keys a pop-up that shows an item in full answers, in its bottom border.
KEYS_HINT = "↑↓ PgUp PgDn: scroll  Esc / Enter / q: close"


def detail_items(rows: Sequence[DetailRow]) -> list[tuple[Content, Content]]:
    """Each row as (its label in the label column, its text): ``HangingText`` wraps the text under
    its own start at the width the pop-up has."""
    return [(Content.styled(f"{r.label:<{LABEL_CELLS}}", "dim"), Content.styled(r.text, STYLES.get(r.style, "")))
            for r in rows]


class LiveDetailScreen(ModalScreen[None]):
    """Subclasses say where the item is in a snapshot (``find``), its rows and its border's title
    (``border_text``: not ``title``, which is the screen's own)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,q", "dismiss", "Close")]
    BOX_ID = "detail-box"
    TEXT_ID = "detail-text"

    def __init__(self, item: Any, snapshot: Snapshot | None, findings: Sequence[Finding] = ()):
        super().__init__()
        self.item = item
        self.snapshot = snapshot
        self.findings = tuple(findings)
        self.gone_at: float | None = None  # the first snapshot without it

    @property
    def gone(self) -> bool:
        return self.gone_at is not None

    def find(self, snapshot: Snapshot) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def rows(self) -> Sequence[DetailRow]:  # pragma: no cover - interface
        raise NotImplementedError

    def border_text(self, read_at: str) -> str:  # pragma: no cover - interface
        """The border's title; ``read_at``: the time of the snapshot its figures are from."""
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        with VerticalScroll(id=self.BOX_ID) as box:
            box.border_subtitle = KEYS_HINT
            yield HangingText(id=self.TEXT_ID)

    def on_mount(self) -> None:
        self._draw()

    def update(self, snapshot: Snapshot | None, findings: Sequence[Finding]) -> None:
        """A newer snapshot: the item in it, or the last one seen when it has left the snapshots."""
        if snapshot is None:
            return
        item = self.find(snapshot)
        if item is None:
            if self.gone_at is None:
                self.gone_at = snapshot.time
        else:
            self.item, self.snapshot, self.findings, self.gone_at = item, snapshot, tuple(findings), None
        if self.is_mounted:
            self._draw()

    def _draw(self) -> None:
        # Times without the date: the title must fit an 80-column pop-up's border.
        read_at = fmt_time(self.snapshot.time if self.snapshot is not None else None, with_date=False)
        self.query_one(f"#{self.BOX_ID}").border_title = self.border_text(read_at)
        self.query_one(f"#{self.TEXT_ID}", HangingText).set_items(detail_items(self.rows()))
