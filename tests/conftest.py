"""Shared pytest set-up: GPU tests are skipped unless CuPy can see a CUDA device, and a run that
leaves new ``pinmon-*`` entries in the system's temporary directory fails (tests clean up)."""
import glob
import os
import tempfile

import pytest


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


def pinmon_temp_entries() -> set:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "pinmon-*")))


@pytest.fixture(scope="session", autouse=True)
def no_pinmon_leftovers_in_tmp():
    """Fails the run (an error in the last test's teardown) if the tests left new ``pinmon-*``
    files or directories in the temporary directory: a test uses ``tmp_path`` or removes what it
    made. Entries that were there before the run are not counted."""
    before = pinmon_temp_entries()
    yield
    left = sorted(pinmon_temp_entries() - before)
    if left:
        pytest.fail(f"the tests left {len(left)} pinmon-* entries in {tempfile.gettempdir()}:"
                    f" {', '.join(left[:5])}", pytrace=False)
