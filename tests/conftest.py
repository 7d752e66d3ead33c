"""Shared pytest set-up: Hypothesis profiles, GPU tests skipped unless CuPy can see a CUDA device,
and a run that leaves new ``pinmon-*`` entries in the system's temporary directory fails
(tests/tmp_leftovers.py).

Hypothesis profiles: ``quick`` (the default) runs 300 examples where a test does not set its own
count; ``full`` runs 10,000, which ``.ci/run`` uses on the parser fuzzers (the tests marked ``fuzz``:
``-m fuzz --hypothesis-profile full``, or ``PINMON_HYPOTHESIS_PROFILE=full``). No deadline in either: a
loaded machine must not fail an example for being slow.
"""
import os
import signal

import pytest
from hypothesis import settings

settings.register_profile("quick", max_examples=300, deadline=None)
settings.register_profile("full", max_examples=10_000, deadline=None)
# --hypothesis-profile (Hypothesis's pytest option) overrides this when the run starts.
settings.load_profile(os.environ.get("PINMON_HYPOTHESIS_PROFILE", "quick"))

# A suite started in the background of a non-interactive shell inherits SIGINT ignored, and the
# programs the tests start would inherit that too: the tests that send them SIGINT need Python's
# own handling of it, as a terminal's Ctrl-C gives.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: two workers per CPU. Much of the suite waits (real uprobes, cgroups, subprocesses,
    the app's pilot) rather than computes, so a CPU runs two workers' tests in about the time of one's."""
    return 2 * (os.cpu_count() or 1)


def _gpu_available() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if any("gpu" in item.keywords for item in items) and not _gpu_available():
        skip = pytest.mark.skip(reason="no CUDA GPU (CuPy) here")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


def pytest_configure(config):
    # A run that leaves pinmon-* entries in the temporary directory fails (tests/tmp_leftovers.py).
    config.pluginmanager.import_plugin("tests.tmp_leftovers")
    # The stand-in libcuda and a child process calling it (``lib``, ``child``), for the attach tests
    # under tests/attach, tests/cli and tests/tui.
    config.pluginmanager.import_plugin("tests.attach.standin")
