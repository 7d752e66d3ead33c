"""The scripts of bench/ as modules, for the tests that run their GPU-free parts."""
from __future__ import annotations

import importlib.util
import os
import sys

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")


def load_bench(name: str):
    """bench/NAME.py (NAME may name a subfolder: ``research/cupti_facts``), loaded afresh (not kept in
    ``sys.modules``). bench/ is on the path while it loads, as when the script runs, for its own
    imports (``provenance``)."""
    sys.path.insert(0, BENCH)
    try:
        path = os.path.join(BENCH, *name.split("/")) + ".py"
        spec = importlib.util.spec_from_file_location(os.path.basename(name), path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(BENCH)
