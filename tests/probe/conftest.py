"""The probe tests' CuPy stand-in: ``fake`` installs it as ``cupy`` and checks that every buffer was
freed once the test is over."""
import sys

import pytest

from tests.fakes.fake_cupy import assert_all_freed, make_fake_cupy


@pytest.fixture
def fake(monkeypatch):
    cp = make_fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    yield cp.cuda.runtime
    assert_all_freed(cp.cuda.runtime)
