"""Helpers for the hooks: wrap an attribute in place, remember the original, and a re-entry guard.

A wrapper calls the original first and does its bookkeeping after, inside ``try``; the original's
result and exceptions reach the caller unchanged. ``guard`` keeps a hooked function that calls
another hooked function (``cupy.asnumpy`` calls ``ndarray.get``) from counting one copy twice.
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TypeVar

ORIGINAL = "__pinmon_original__"
# A hooked function's type: the wrapper ``make`` returns takes and returns what the original does.
F = TypeVar("F", bound=Callable[..., object])


class _Guard(threading.local):
    """``on`` is True, in this thread, while a hooked function runs the original it wraps."""

    on = False


guard = _Guard()


def patch(owner: object, name: str, make: Callable[[F], F]) -> bool:
    """Replace ``owner.name`` by ``make(original)``; False when absent or not writable."""
    try:
        original: F = getattr(owner, name)  # what is there is what ``make`` wraps: its type is F
    except AttributeError:
        return False
    if getattr(original, ORIGINAL, None) is not None:
        return True  # already hooked (install() twice, or a module re-exported under two names)
    try:
        wrapper = make(original)
        functools.update_wrapper(wrapper, original)
        setattr(wrapper, ORIGINAL, original)
        setattr(owner, name, wrapper)
        return True
    except (AttributeError, TypeError):
        return False


def unpatch(owner: object, name: str) -> None:
    """Put the original back (tests)."""
    current = getattr(owner, name, None)
    original = getattr(current, ORIGINAL, None)
    if original is not None:
        setattr(owner, name, original)
