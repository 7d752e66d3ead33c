"""What a JSON text would cost to parse, counted on its bytes before it is parsed.

``json.loads`` builds a Python object for every value, and an empty dict costs 64 bytes for its three
bytes of text: a 60 MiB recording line of ``{},{},...`` (180 KB gzipped) made 1.6 GB of objects
before the reader could refuse it. ``over_budget`` counts the objects and lists (``{``, ``[``) and
the separators (``,``) outside strings, at C speed and with no copy for most texts, and says when
they pass ``limits.MAX_JSON_CONTAINERS`` or ``MAX_JSON_VALUES``.

Counting the whole text is an upper bound, and enough when it is under the caps. Over them, strings
are taken out first (escapes, then quoted spans: two linear regular-expression passes, each a copy at
most the text's size), since a command line or a call site may hold any of those characters.
"""
from __future__ import annotations

import re

from ..limits import MAX_JSON_CONTAINERS, MAX_JSON_VALUES

_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
_ESCAPE_STR = re.compile(r"\\.", re.DOTALL)
_STRING_STR = re.compile(r'"[^"]*"')


def _counts(text: bytes | bytearray | str) -> tuple[int, int]:
    if isinstance(text, str):
        return text.count("{") + text.count("["), text.count(",")
    return text.count(b"{") + text.count(b"["), text.count(b",")


def structure_counts(text: bytes | bytearray | str) -> tuple[int, int]:
    """(objects and lists, separators) in ``text`` outside its strings; an upper bound when both are
    within the caps (strings not taken out then)."""
    containers, separators = _counts(text)
    if containers <= MAX_JSON_CONTAINERS and separators <= MAX_JSON_VALUES:
        return containers, separators
    if isinstance(text, str):
        if '"' not in text:
            return containers, separators
        bare_str = _ESCAPE_STR.sub("", text) if "\\" in text else text
        return _counts(_STRING_STR.sub("", bare_str))
    if b'"' not in text:
        return containers, separators
    # JSON escapes are two characters (\uXXXX's digits are plain text): without them, a string is
    # every byte between two quotes.
    bare = _ESCAPE.sub(b"", text) if b"\\" in text else text
    return _counts(_STRING.sub(b"", bare))


def over_budget(text: bytes | bytearray | str) -> str | None:
    """Why ``text`` would cost too much to parse, or None."""
    containers, separators = structure_counts(text)
    if containers > MAX_JSON_CONTAINERS:
        return f"{containers:,} JSON objects and lists; a snapshot has at most {MAX_JSON_CONTAINERS:,}"
    if separators > MAX_JSON_VALUES:
        return f"{separators:,} JSON values; a snapshot has at most {MAX_JSON_VALUES:,}"
    return None
