"""The last piece a view built in each of its places, kept with what it was built from.

At 1 Hz most of a panel is built from the same figures as a second ago: the same formatted rate,
the same bar heights, the same name and link. A piece built again costs its construction, and it is
also a new object to the widget, which must compare it with what is on screen before it knows there
is nothing to redraw. Built once per change, a piece is handed out again as the very same object,
which the comparison settles at once (``Content.is_same`` checks identity first).

A slot keeps one piece; a view has a fixed set of slots (per row, per direction), so what is kept
stays bounded by what the view shows.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class Memo:
    def __init__(self) -> None:
        self._kept: dict[Hashable, tuple[Hashable, object]] = {}

    def get(self, slot: Hashable, key: Hashable, build: Callable[..., T], *args: Any) -> T:
        """The piece of ``slot`` built from ``key``: the one kept where ``key`` equals the key it was
        built from, else ``build(*args)``, kept in its place."""
        kept = self._kept.get(slot)
        if kept is not None and kept[0] == key:
            return kept[1]  # type: ignore[return-value]  # built by this slot's builder from this key
        value = build(*args)
        self._kept[slot] = (key, value)
        return value

    def forget(self, keep: Callable[[Hashable], bool]) -> None:
        """Drop the slots ``keep`` refuses (places the view no longer has)."""
        for slot in [s for s in self._kept if not keep(s)]:
            del self._kept[slot]

    def clear(self) -> None:
        self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)
