"""Fixtures for the tracer tests: a fake CuPy hooked into a fresh tracer state, a private report dir."""
import os
import sys

import pytest

FAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakecupy")


def _drop_fake_modules():
    for name in list(sys.modules):
        if name == "cupy" or name.startswith(("cupy.", "cupyx")):
            del sys.modules[name]


@pytest.fixture
def fake_cupy():
    """(cupy, state): the fake CuPy, freshly imported and hooked into its own TracerState."""
    from pinmon.trace import hooks_cupy
    from pinmon.trace.state import TracerState

    _drop_fake_modules()
    sys.path.insert(0, FAKES)
    try:
        import cupy
        import cupyx  # noqa: F401

        state = TracerState()
        hooks_cupy.hook(cupy, state)
        yield cupy, state
    finally:
        sys.path.remove(FAKES)
        _drop_fake_modules()


@pytest.fixture
def report_dir(tmp_path):
    d = tmp_path / "reports"
    d.mkdir(mode=0o700)
    os.chmod(d, 0o700)
    return str(d)


def pinmon_cmd(driver: bool = True) -> list:
    """The ``pinmon`` command as on a box whose NVIDIA driver is (or is not) loaded, whatever this one
    has: what ``pinmon trace`` says of CUPTI before the program depends on it."""
    code = ("import sys; from pinmon.trace import target; "
            f"target.driver_loaded = lambda *a: {driver}; "
            "from pinmon.cli import main; sys.exit(main())")
    return [sys.executable, "-c", code]
