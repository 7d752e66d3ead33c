"""The scripts of bench/ as modules, for the tests that run their GPU-free parts."""
from __future__ import annotations

import importlib.util
import os
import sys

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")


def load_bench(name: str):
    """bench/NAME.py, loaded afresh (not kept in ``sys.modules``). bench/ is on the path while it
    loads, as when the script runs, for its own imports (``provenance``)."""
    sys.path.insert(0, BENCH)
    try:
        spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH, f"{name}.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(BENCH)
