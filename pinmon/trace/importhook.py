"""Run a function right after a module is first imported, without importing it ourselves.

``when_imported("torch", fn)`` calls ``fn(module)`` at once if the module is already in
``sys.modules``, else after its import finishes (a finder on ``sys.meta_path`` wraps the module's
loader). Installing the tracer therefore never imports torch or cupy, and costs nothing for
programs that never do.
"""
from __future__ import annotations

import importlib.abc
import sys
import threading
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

OnImport = Callable[[ModuleType], object]  # what runs after a module's import, given the module

_callbacks: dict[str, list[OnImport]] = {}
_lock = threading.Lock()


def _run(name: str, module: ModuleType) -> None:
    for fn in _callbacks.pop(name, []):
        try:
            fn(module)
        except Exception:
            pass  # a hook that fails leaves the module as it was; the program goes on


class _Loader(importlib.abc.Loader):
    def __init__(self, name: str, loader: importlib.abc.Loader):
        self._name = name
        self._loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        if spec is not None:
            spec.loader = self._loader  # the module keeps its real loader (reload, resources)
        module.__loader__ = self._loader
        self._loader.exec_module(module)
        _run(self._name, module)

    def __getattr__(self, item: str) -> object:  # get_resource_reader, is_package, ...: the real loader's
        return getattr(self._loader, item)


class _Busy(threading.local):
    on = False  # this thread is inside the finder's own search


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self._busy = _Busy()

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in _callbacks or self._busy.on:
            return None
        self._busy.on = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        except Exception:
            return None
        finally:
            self._busy.on = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _Loader(fullname, spec.loader)
        return spec


_finder = _Finder()


def hooked_spec(fullname: str, path: Sequence[str] | None = None,
                target: ModuleType | None = None) -> ModuleSpec | None:
    """The spec this module's finder gives ``fullname`` (its loader wrapped so that the callbacks
    registered for it run after it loads), or None when none are registered. For a finder that
    starts the tracer in the middle of the import of a module the tracer hooks."""
    return _finder.find_spec(fullname, path, target)


def when_imported(name: str, fn: OnImport) -> None:
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _callbacks.setdefault(name, []).append(fn)
            if _finder not in sys.meta_path:
                sys.meta_path.insert(0, _finder)
            return
    try:
        fn(module)
    except Exception:
        pass
