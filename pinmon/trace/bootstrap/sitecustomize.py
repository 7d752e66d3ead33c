"""Starts pinmon's tracer in a Python interpreter that ``pinmon trace`` started, once it uses CUDA.

``pinmon trace`` puts this directory on PYTHONPATH, so every Python interpreter the command starts
runs this module at start-up. Here it only registers a finder on ``sys.meta_path`` that waits for the
first import of a CUDA library (``TRIGGERS``); an interpreter that never imports one is left as it
was: no pinmon module, no thread, no report. At that import the tracer starts (hooks, engine, report
thread), before the library's own code runs. pinmon is loaded from its install directory
(``$PINMON_TRACE_PKG_DIR``) by that path alone: nothing is put on ``sys.path``, so the program's
imports resolve exactly as without the tracer.

Then this module hands over to the ``sitecustomize`` it shadows, if the environment has one, so the
traced program starts exactly as it would have.
"""
from __future__ import annotations

import os
import sys

# Types for mypy only (it takes any name TYPE_CHECKING as true): this module runs in every interpreter
# pinmon trace starts, which must load nothing more than it would have (typing among them).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

# Top-level modules (and numba's CUDA part) whose import means CUDA work follows: the tracer starts
# at the first of them. pinmon/trace/engine_cupti.py arms CUPTI on the same list (CUDA_MODULES).
TRIGGERS = frozenset(("torch", "cupy", "jax", "jaxlib", "numba.cuda", "cuda", "tensorflow", "cudf", "rmm",
                      "tensorrt", "pycuda", "triton", "onnxruntime", "paddle", "mxnet", "cuml", "nvidia.dali"))


class _StartOnCudaImport:
    """A meta path finder that never finds anything itself: at the first import of a trigger it
    starts the tracer and returns the spec the tracer's import hook makes for that module (so the
    library's hooks go in right after it loads)."""

    def __init__(self) -> None:
        self.done = False
        self.busy = False

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if self.done or self.busy or fullname not in TRIGGERS:
            return None
        if not self._exists(fullname, path, target):
            return None  # "try: import torch" where there is none: no CUDA here
        self.done = True  # once, whatever happens: a tracer that cannot start is not retried per import
        try:
            trace = _load_pinmon_trace()
            if trace is None or not trace.install():
                return None
            from pinmon.trace.importhook import hooked_spec

            return hooked_spec(fullname, path, target)
        except Exception:
            return None  # never stop the program's import

    def _exists(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None) -> bool:
        """Whether another finder has ``fullname``."""
        self.busy = True
        try:
            for finder in sys.meta_path:
                if finder is not self and hasattr(finder, "find_spec") and \
                        finder.find_spec(fullname, path, target) is not None:
                    return True
            return False
        except Exception:
            return False
        finally:
            self.busy = False

    def invalidate_caches(self) -> None:
        pass


def _load_pinmon_trace() -> ModuleType | None:
    """``pinmon.trace`` from pinmon's own install directory, without putting it on ``sys.path``."""
    if "pinmon.trace" in sys.modules:
        return sys.modules["pinmon.trace"]
    if "pinmon" not in sys.modules:
        pkg_dir = os.environ.get("PINMON_TRACE_PKG_DIR")
        if not pkg_dir:
            return None
        import importlib.machinery
        import importlib.util

        spec = importlib.machinery.PathFinder.find_spec("pinmon", [pkg_dir])
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        sys.modules["pinmon"] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop("pinmon", None)
            raise
    import importlib

    return importlib.import_module("pinmon.trace")


def _pinmon_trace_bootstrap() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("PINMON_TRACE", "1") != "0":
        sys.meta_path.insert(0, _StartOnCudaImport())
    # Chain to the sitecustomize this one shadows.
    saved = list(sys.path)
    me = sys.modules.pop("sitecustomize", None)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        import importlib

        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    except Exception:
        import traceback

        traceback.print_exc()  # what Python itself does with a failing sitecustomize
    finally:
        sys.path[:] = saved + [p for p in sys.path if p not in saved]
        # The import system pops this module's name from sys.modules when our exec ends.
        if me is not None:
            sys.modules["sitecustomize"] = me


_pinmon_trace_bootstrap()
