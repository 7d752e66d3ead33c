"""What the app tells the user in a pop-up (a toast): a ``Note``, without Textual."""
from __future__ import annotations

from typing import Literal, NamedTuple

# Textual's toast severities (its ``SeverityLevel``), named here so the session needs no Textual.
NoteSeverity = Literal["information", "warning", "error"]


class Note(NamedTuple):
    """Something to tell the user in a pop-up."""
    text: str
    severity: NoteSeverity = "information"
    timeout: float | None = None
