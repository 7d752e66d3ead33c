"""Shared pytest set-up: GPU tests are skipped unless CuPy can see a CUDA device."""
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
