"""One labelled row of a pop-up that shows an item in full (a process, a group): no Textual here."""
from __future__ import annotations

from typing import NamedTuple

# The label column's width: the longest label ("H2D pageable", "1 MiB+ pinned", "container id") and
# a space.
LABEL_CELLS = 14


class DetailRow(NamedTuple):
    label: str          # the left column ("" continues the row above)
    text: str
    style: str = ""     # "", "head" (a title or table header), "dim" (a note), "warning" (a finding's figure)
