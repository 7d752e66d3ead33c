"""The worst findings for the overview: one line each on a small terminal, in full on a large one.

Small (``detailed`` off): each finding is one line (cut with "…" by the CSS), so the panels below it
stay on an 80x24 screen. Large (``detailed``): each finding has a head line (severity, rule id, and
what it is about: a process's pid and command, a GPU, the host), then its message and its advice,
each wrapped under its own start. They take the height the panel has: in full where they fit, and
where they do not, the least severe ones are shortened first (the advice, then the message), so a
critical finding keeps its whole text; what cannot be shown says "… N more". The Advisor tab and
Enter on a finding there have everything.
"""
from __future__ import annotations

from typing import Optional, Sequence

from textual.content import Content

from ...model import Finding, Snapshot
from ...units import printable
from ..format import command_brief
from ..state import ViewState
from .base import NoLinks, TextBlock, View, lines, set_content
from .findings import badge
from .wrap import hanging

INDENT = "       "
# A finding's text in full, within reason: a runaway message stays bounded (as in the pop-up).
TEXT_CHARS = 4000
ADVICE_LEAD = "       → "
# Each entry's (message lines, advice lines) at each step of shortening; None: in full.
STEPS: tuple[tuple[Optional[int], Optional[int]], ...] = (
    (None, None), (None, 2), (2, 1), (2, 0), (1, 0))


def about(f: Finding, snapshot: Optional[Snapshot]) -> str:
    """What a finding is about, for its head line: "pid 684 python3 train.py", "GPU 0", "host"."""
    pid = f.values.get("pid")
    if isinstance(pid, int) and not isinstance(pid, bool):
        row = next((p for p in snapshot.processes if p.pid == pid), None) if snapshot is not None else None
        return f"pid {pid} {command_brief(row, 80)}" if row is not None else printable(f.subject, 80)
    subject = printable(f.subject, 80)
    if subject.startswith("gpu") and subject[3:].isdigit():
        return f"GPU {subject[3:]}"
    return subject


def head(f: Finding, snapshot: Optional[Snapshot], width: int) -> Content:
    line = Content.assemble(badge(f), " ", (printable(f.rule, 60), "bold"), ("  " + about(f, snapshot), "dim"))
    return line.truncate(width, ellipsis=True) if width else line


def entry(f: Finding, snapshot: Optional[Snapshot], width: int, step: tuple) -> list[Content]:
    message_lines, advice_lines = step
    rows = [head(f, snapshot, width)]
    rows += hanging(INDENT, printable(f.message, TEXT_CHARS), width, message_lines)
    if advice_lines != 0:
        rows += hanging(Content.styled(ADVICE_LEAD, "bold $accent"),
                        Content.styled(printable(f.advice, TEXT_CHARS), "italic"), width, advice_lines)
    return rows


def fitted(findings: Sequence[Finding], snapshot: Optional[Snapshot], width: int, height: int) -> list[Content]:
    """The entries in ``height`` lines: each in full where all fit, else shortened from the least
    severe up (findings come worst first), and the ones left over counted in a last line."""
    if not findings:
        return []
    steps = [0] * len(findings)
    cache: dict[tuple[int, int], list[Content]] = {}

    def rows_of(i: int) -> list[Content]:
        key = (i, steps[i])
        if key not in cache:
            cache[key] = entry(findings[i], snapshot, width, STEPS[steps[i]])
        return cache[key]

    def total(count: int) -> int:
        return sum(len(rows_of(i)) for i in range(count)) + (1 if count < len(findings) else 0)

    count = len(findings)
    while total(count) > height:
        # The least severe entry still shown that can be shortened, else one entry fewer.
        shorter = next((i for i in range(count - 1, -1, -1) if steps[i] < len(STEPS) - 1), None)
        if shorter is not None:
            steps[shorter] += 1
        elif count > 1:
            count -= 1
        else:
            break
    out = [row for i in range(count) for row in rows_of(i)]
    if count < len(findings):
        out.append(Content.styled(f"… {len(findings) - count} more (6: Advisor)", "dim"))
    return out


class TopFindings(NoLinks, TextBlock, View):
    def __init__(self, limit: int = 3, detailed: bool = False, **kw):
        super().__init__(**kw)
        self.limit = limit
        self.detailed = detailed
        self._state: Optional[ViewState] = None

    def on_resize(self) -> None:
        if self.detailed and self._state is not None:
            self.show(self._state)  # wrapped and fitted to the new size

    def show(self, state: ViewState) -> None:
        self._state = state
        if state.snapshot is None:
            set_content(self, Content.styled("waiting for the first snapshot…", "dim"))
            return
        if not state.findings:
            set_content(self, Content.styled("No findings.", "$success"))
            return
        if self.detailed:
            width, height = (self.content_size if self.is_mounted else (0, 0))
            rows = fitted(state.findings, state.snapshot, width, height or 2 * self.limit)
            set_content(self, lines(*rows))
            return
        rows = [badge(f) + " " + printable(f.message) for f in state.findings[: self.limit]]
        if len(state.findings) > self.limit:
            rows.append(Content.styled(f"… {len(state.findings) - self.limit} more (6: Advisor)", "dim"))
        set_content(self, lines(*rows))
