"""The overview's findings fitted to their lines: the same choice as summing every block's lines again
at each step (the definition), at a cost that no longer grows with the square of the findings."""
from __future__ import annotations

import random

from textual.content import Content

from pinmon.tui.widgets.top_findings import STEPS, block_rows, blocks, fitted
from tests.factories import finding

from .fakes import make_snapshot

RULES = ("pinned-ram-share", "pinned-unattributed", "memlock-limit-low", "pcie-link-degraded", "pageable-copies")
SEVERITIES = ("critical", "warning", "info")


def by_definition(findings, snapshot, width, height) -> list:
    """``fitted`` as its docstring defines it, every total summed again."""
    shown = blocks(findings)
    steps = [0] * len(shown)

    def rows_of(i):
        return block_rows(shown[i], snapshot, width, STEPS[steps[i]])

    def total(count):
        more = any(b.finding is not None for b in shown[count:])
        return sum(len(rows_of(i)) for i in range(count)) + (1 if more else 0)

    count = len(shown)
    while total(count) > height:
        open_ = [i for i in range(count) if steps[i] < len(STEPS) - 1]
        if open_:
            steps[min(open_, key=lambda i: (shown[i].rank, steps[i], -i))] += 1
        elif count > 1:
            count -= 1
        else:
            break
    out = [row for i in range(count) for row in rows_of(i)]
    left = sum(1 for b in shown[count:] if b.finding is not None)
    if left:
        out.append(Content.styled(f"… {left} more (6: Advisor)", "dim"))
    return out


def test_fitted_chooses_as_the_definition_does():
    rng = random.Random(5)
    snapshot = make_snapshot(0)
    for _ in range(60):
        found = [finding(rule=rng.choice(RULES), severity=rng.choice(SEVERITIES),
                         message="pinned " + "x" * rng.randint(5, 160))
                 for _ in range(rng.randint(1, 14))]
        width, height = rng.randint(20, 120), rng.randint(1, 40)
        want = [r.plain for r in by_definition(found, snapshot, width, height)]
        memo: dict = {}
        assert [r.plain for r in fitted(found, snapshot, width, height, memo)] == want, (width, height)
        # Again with the blocks it kept: the same lines; in another height, that height's.
        assert [r.plain for r in fitted(found, snapshot, width, height, memo)] == want
        other = [r.plain for r in by_definition(found, snapshot, width, height + 3)]
        assert [r.plain for r in fitted(found, snapshot, width, height + 3, memo)] == other
