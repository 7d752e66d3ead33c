"""A text bar with an optional marker (the 50%-of-RAM line for pinned memory)."""
from __future__ import annotations

from typing import Optional

from textual.content import Content


def bar(fraction: Optional[float], width: int, style: str, mark: Optional[float] = None) -> Content:
    """``width`` cells filled to ``fraction``; a ``┃`` at ``mark`` stays visible filled or not."""
    if fraction is None:
        return Content.styled("·" * width, "dim")
    filled = round(max(0.0, min(1.0, fraction)) * width)
    mark_at = None if mark is None else min(width - 1, int(mark * width))
    parts = []
    for i in range(width):
        if i == mark_at:
            parts.append(("┃", "bold $text on $error" if i < filled else "bold $error"))
        elif i < filled:
            parts.append(("█", style))
        else:
            parts.append(("░", "dim"))
    return Content.assemble(*parts)
