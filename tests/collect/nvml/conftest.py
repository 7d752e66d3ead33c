"""Fixtures of the NVML tests."""
import pytest


@pytest.fixture
def no_sysfs(tmp_path):
    return str(tmp_path / "sys")
