"""A text bar with an optional marker (the advisor's critical share of RAM for pinned memory)."""
from __future__ import annotations

from textual.content import Content


def bar(fraction: float | None, width: int, style: str, mark: float | None = None) -> Content:
    """``width`` cells filled to ``fraction``; a ``┃`` at ``mark`` stays visible filled or not.

    At most four spans (filled, mark, empty), not one per cell: the memory panel redraws every
    second, and rendering costs per span.
    """
    if fraction is None:
        return Content.styled("·" * width, "dim")
    filled = round(max(0.0, min(1.0, fraction)) * width)
    mark_at = None if mark is None else min(width - 1, int(mark * width))
    cells = [("█", style) if i < filled else ("░", "dim") for i in range(width)]
    if mark_at is not None and mark_at >= 0:
        cells[mark_at] = ("┃", "bold $text on $error" if mark_at < filled else "bold $error")
    parts: list[tuple[str, str]] = []
    for char, cell_style in cells:
        if parts and parts[-1][1] == cell_style and parts[-1][0][-1] == char:
            parts[-1] = (parts[-1][0] + char, cell_style)
        else:
            parts.append((char, cell_style))
    return Content.assemble(*parts)
