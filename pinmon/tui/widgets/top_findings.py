"""The worst findings for the overview: one line each on a small terminal, in full on a large one.

Every line about a finding starts with what it is about (a process's pid and name, a container, pod
or job, a GPU, the host: ``finding_subject``), then its figures. Small (``detailed`` off): each finding
is one line (cut with "…" by the CSS), the subject in its short form, so the panels below it stay on
an 80x24 screen. Large (``detailed``): each finding has a head line (severity, subject, rule id), then
its message, each wrapped under its own start; a rule's findings come together and the advice they
share once, after them (``finding_groups``). They take the height the panel has: in full where they
fit, and where they do not, the least severe are shortened first (the advice, then the message; a step
at a time among equals), so a critical finding keeps its whole text where any other can give way; what cannot be shown says "… N more". The Advisor tab and
Enter on a finding there have everything.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from textual.content import Content
from textual.widget import Widget

from ...model import Finding, Snapshot
from ...units import printable
from ..view.finding_groups import group_by_rule
from ..view.finding_subject import finding_subject
from ..view.format import COLLECTING
from ..view.state import ViewState
from .base import NoLinks, TextBlock, View, lines, set_content
from .findings import badge, finding_head
from .wrap import hanging

INDENT = "       "
# A finding's text in full, within reason: a runaway message stays bounded (as in the pop-up).
TEXT_CHARS = 4000
ADVICE_LEAD = "       → "
# Each block's (message lines, advice lines) at each step of shortening; None: in full.
STEPS: tuple[tuple[int | None, int | None], ...] = (
    (None, None), (None, 2), (2, 1), (2, 0), (1, 0))
SEVERITY_RANK = {"critical": 3, "warning": 2, "info": 1}


def one_line(f: Finding, snapshot: Snapshot | None) -> Content:
    """A finding in one line: severity, the subject's short form, the message."""
    return Content.assemble(badge(f), " ", (finding_subject(f, snapshot, short=True), "bold"), "  ",
                            printable(f.message))


@dataclass(frozen=True)
class Block:
    """What the overview shows of a rule's group: a finding (its head, message and the advice that is
    its own), or, with ``finding`` None, the advice the group's findings share."""

    finding: Finding | None
    advice: str
    rank: int  # how severe: the least severe blocks are shortened first


def blocks(findings: Sequence[Finding]) -> list[Block]:
    out = []
    for g in group_by_rule(findings):
        for f, own in zip(g.findings, g.own_advice):
            out.append(Block(f, own, SEVERITY_RANK.get(f.severity, 0)))
        if g.shared_advice:
            out.append(Block(None, g.shared_advice, max(SEVERITY_RANK.get(f.severity, 0) for f in g.findings)))
    return out


def block_rows(b: Block, snapshot: Snapshot | None, width: int, step: tuple) -> list[Content]:
    message_lines, advice_lines = step
    rows = []
    if b.finding is not None:
        rows.append(finding_head(b.finding, snapshot, width))
        rows += hanging(INDENT, printable(b.finding.message, TEXT_CHARS), width, message_lines)
    if b.advice and advice_lines != 0:
        rows += hanging(Content.styled(ADVICE_LEAD, "bold $accent"),
                        Content.styled(printable(b.advice, TEXT_CHARS), "italic"), width, advice_lines)
    return rows


# Wrapped blocks kept between refreshes (``fitted``'s ``memo``), at most this many: an advice text
# and most messages repeat from one second to the next, and wrapping them is most of the panel's cost.
MEMO_BLOCKS = 256


def _block_key(b: Block, snapshot: Snapshot | None, width: int, step: int) -> tuple:
    f = b.finding
    if f is None:
        return (None, b.advice, width, step)
    return (f.severity, f.rule, f.message, b.advice, finding_subject(f, snapshot),
            finding_subject(f, snapshot, short=True), width, step)


def _block_keys(b: Block, snapshot: Snapshot | None, width: int) -> list[tuple]:
    """``_block_key`` of the block at each step: its subject looked up once, not once a step."""
    first = _block_key(b, snapshot, width, 0)
    return [(*first[:-1], step) for step in range(len(STEPS))]


def fitted(findings: Sequence[Finding], snapshot: Snapshot | None, width: int, height: int,
           memo: dict | None = None) -> list[Content]:
    """The findings in ``height`` lines: each in full where all fit, else shortened from the least
    severe up (the later first among equals), and the findings left over counted in a last line.
    ``memo``: a dict kept by the caller, where wrapped blocks are found again on the next call."""
    if not findings:
        return []
    shown = blocks(findings)
    steps = [0] * len(shown)
    memo = {} if memo is None else memo
    if len(memo) > MEMO_BLOCKS:
        memo.clear()
    keys: dict[int, list[tuple]] = {i: _block_keys(b, snapshot, width) for i, b in enumerate(shown)}
    # The same blocks (text, subject, width) in the same height: the same lines as the last time.
    whole = ("fitted", tuple(k[0] for k in keys.values()), height)
    kept = memo.get(whole)
    if kept is not None:
        return kept

    def rows_of(i: int) -> list[Content]:
        key = keys[i][steps[i]]
        rows = memo.get(key)
        if rows is None:
            rows = memo[key] = block_rows(shown[i], snapshot, width, STEPS[steps[i]])
        return rows

    # Lines per block at its step, and their running sum over the blocks shown: each step below
    # changes one block's count (summing them all again at each step made the panel's cost grow
    # with the square of the findings, every second).
    lengths = [len(rows_of(i)) for i in range(len(shown))]
    # findings_from[k]: whether a finding (not a shared advice) is among the blocks from k on.
    findings_from = [False] * (len(shown) + 1)
    for k in range(len(shown) - 1, -1, -1):
        findings_from[k] = findings_from[k + 1] or shown[k].finding is not None
    count = len(shown)
    lines_shown = sum(lengths)
    while lines_shown + (1 if findings_from[count] else 0) > height:
        # A step off the least severe block still shown that can be shortened (among equals, the
        # least shortened, then the later), else one block fewer.
        open_ = [i for i in range(count) if steps[i] < len(STEPS) - 1]
        if open_:
            i = min(open_, key=lambda i: (shown[i].rank, steps[i], -i))
            steps[i] += 1
            lines_shown -= lengths[i]
            lengths[i] = len(rows_of(i))
            lines_shown += lengths[i]
        elif count > 1:
            count -= 1
            lines_shown -= lengths[count]
        else:
            break
    out = [row for i in range(count) for row in rows_of(i)]
    left = sum(1 for b in shown[count:] if b.finding is not None)
    if left:
        out.append(Content.styled(f"… {left} more (6: Advisor)", "dim"))
    memo[whole] = out
    return out


def advisor_title(count: int | None) -> str:
    """The overview's advisor panel title: how many findings, and the key to the Advisor tab."""
    if not count:
        return "Advisor"
    return f"Advisor: {count} finding{'s' if count != 1 else ''} (6: in full)"


class TopFindings(NoLinks, TextBlock, View):
    def __init__(self, limit: int = 3, detailed: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.limit = limit
        self.detailed = detailed
        self._state: ViewState | None = None
        self._memo: dict = {}  # fitted()'s wrapped blocks, kept from one refresh to the next

    def on_resize(self) -> None:
        if self.detailed and self._state is not None:
            self.show(self._state)  # wrapped and fitted to the new size

    def show(self, state: ViewState) -> None:
        self._state = state
        box = self.parent
        if isinstance(box, Widget):  # the panel's border says how many there are (a "6" there read as a count)
            title = advisor_title(len(state.findings) if state.snapshot is not None else None)
            if box.border_title != title:
                box.border_title = title
        if state.snapshot is None:
            set_content(self, Content.styled(COLLECTING, "dim"))
            return
        if not state.findings:
            set_content(self, Content.styled("No findings.", "$success"))
            return
        if self.detailed:
            width, height = (self.content_size if self.is_mounted else (0, 0))
            rows = fitted(state.findings, state.snapshot, width, height or 2 * self.limit, self._memo)
            set_content(self, lines(*rows))
            return
        rows = [one_line(f, state.snapshot) for f in state.findings[: self.limit]]
        if len(state.findings) > self.limit:
            rows.append(Content.styled(f"… {len(state.findings) - self.limit} more (6: Advisor)", "dim"))
        set_content(self, lines(*rows))
