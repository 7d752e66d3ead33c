"""One line of an instance's ``trace_pipe`` -> an ``Event``; pure, never raises on bad text.

The kernel prints each uprobe hit as::

    <comm>-<tid> (<tgid>) [<cpu>] <flags> <seconds>: <event>: (<address>) <name>=<value> ...

(a return probe's address is ``(<function> <- <return address>)``).

``(<tgid>)`` is there with the instance's ``record-tgid`` option (``-------`` where the kernel has not
saved it yet), the flags column with the top instance's ``irq-info`` (an instance starts with the top
one's options). The command name is the thread's and may hold spaces and dashes, so the line is read
from the right of it: the tid is the last ``-<digits>`` before the CPU column. A value is a decimal
number, ``{a,b,...}`` for an array, or something else (a fetch that faulted) which reads as None.

A lost-events notice, ``CPU:<n> [LOST <count> EVENTS]``, is a ``Lost``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

MAX_LINE_CHARS = 4096
MAX_ARRAY_ITEMS = 64

_LINE = re.compile(
    r"^\s*(?P<comm>.*)-(?P<tid>\d+)\s+(?:\(\s*(?P<tgid>\d+|-+)\)\s+)?\[(?P<cpu>\d+)\]\s+"
    r"(?:(?P<flags>[^\s\d][^\s]*)\s+)?(?P<ts>\d+(?:\.\d+)?):\s+(?P<event>[A-Za-z_][A-Za-z0-9_.]*):\s+"
    r"\((?P<ip>0x[0-9a-fA-F]+(?: <- 0x[0-9a-fA-F]+)?)\)(?P<args>.*)$")
_ARG = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\{[^}]*\}|\S+)")
_LOST = re.compile(r"^\s*CPU:\s*(?P<cpu>\d+)\s+\[LOST\s+(?P<count>\d+)\s+EVENTS\]\s*$")

Value = int | tuple[int, ...] | None


@dataclass(frozen=True)
class Event:
    tid: int
    tgid: int | None      # None where the kernel printed no tgid
    cpu: int
    ts: float                # seconds on the instance's trace clock
    name: str                # the event's name in its group
    fields: dict[str, Value]


@dataclass(frozen=True)
class Lost:
    cpu: int
    count: int


def _value(text: str) -> Value:
    if text.startswith("{"):
        items = text[1:-1].split(",") if text.endswith("}") else []
        out = []
        for item in items[:MAX_ARRAY_ITEMS]:
            v = _int(item.strip())
            if v is None:
                return None
            out.append(v)
        return tuple(out)
    return _int(text)


def _int(text: str) -> int | None:
    if not text or len(text) > 24:
        return None
    try:
        return int(text, 0) if text.startswith("0x") else int(text)
    except ValueError:
        return None


def parse_line(line: str) -> Event | Lost | None:
    """An event, a lost-events notice, or None for anything else (a header, a cut line)."""
    if len(line) > MAX_LINE_CHARS:
        return None
    m = _LINE.match(line)
    if m is None:
        lost = _LOST.match(line)
        return Lost(int(lost["cpu"]), int(lost["count"])) if lost else None
    tgid_text = m["tgid"]
    tgid = int(tgid_text) if tgid_text and tgid_text[0] != "-" else None
    fields = {k: _value(v) for k, v in _ARG.findall(m["args"])}
    try:
        ts = float(m["ts"])
    except ValueError:
        return None
    return Event(int(m["tid"]), tgid, int(m["cpu"]), ts, m["event"], fields)
