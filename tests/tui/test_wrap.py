"""Hanging indents: wrapped text stays under its own start, and long text is cut with "…"."""
from textual.content import Content

from pinmon.tui.widgets.wrap import hanging

TEXT = "cap pinned buffers (e.g. DataLoader pin_memory with fewer workers), or move the job elsewhere"


def test_continuation_lines_start_under_the_text_not_at_column_0():
    rows = hanging("   → ", TEXT, 40)
    assert len(rows) > 1
    assert rows[0].plain.startswith("   → cap")
    for row in rows[1:]:
        assert row.plain.startswith(" " * 5) and row.plain[5] != " "
    assert all(r.cell_length <= 40 for r in rows)
    assert " ".join(r.plain.strip().removeprefix("→ ") for r in rows) == TEXT


def test_text_over_max_lines_ends_in_an_ellipsis_within_the_width():
    rows = hanging(" WARN  ", TEXT * 3, 40, max_lines=2)
    assert len(rows) == 2
    assert rows[-1].plain.endswith("…") and rows[-1].cell_length <= 40


def test_short_text_and_unknown_width_are_one_line():
    assert [r.plain for r in hanging("→ ", "reuse", 40, max_lines=2)] == ["→ reuse"]
    assert [r.plain for r in hanging("→ ", TEXT, None)] == ["→ " + TEXT]
    assert [r.plain for r in hanging("→ ", TEXT, 0)] == ["→ " + TEXT]


def test_styles_survive_the_wrap():
    rows = hanging(Content.styled("→ ", "bold"), Content.styled(TEXT, "italic"), 30)
    assert all(any("italic" in str(span.style) for span in row.spans) for row in rows)
