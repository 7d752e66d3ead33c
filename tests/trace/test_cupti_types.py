"""The Protocols that type cupti-python for the CUPTI engine (pinmon/trace/cupti_types.py) and the stub
of cuda-bindings (typings/cuda/bindings/driver.pyi) name what those packages have: the stand-ins of
cupti-python 13.0 and 12.8 have every name listed, with as many parameters; and where cupti-python or
cuda-bindings is installed (the GPU box: PYTHONPATH=/tmp/site), the real one has every name, with the
parameter names listed. mypy trusts both, so a name they list that the package lacks would only fail
inside a traced program."""
import ast
import importlib
import inspect
import os
import pathlib
import sys

import pytest

from pinmon.trace import cupti_types as T
from tests.protocol_names import methods, missing, parameter_names

from . import cupti_records as R

HERE = os.path.dirname(os.path.abspath(__file__))
FAKECUPTI = {13: os.path.join(HERE, "fakecupti"), 12: os.path.join(HERE, "fakecupti12")}
DRIVER_STUB = pathlib.Path(HERE).parents[1] / "typings" / "cuda" / "bindings" / "driver.pyi"


def load_fake(major: int):
    sys.path.insert(0, FAKECUPTI[major])
    try:
        for name in ("cupti", "cupti.cupti"):
            sys.modules.pop(name, None)
        return importlib.import_module("cupti.cupti")
    finally:
        sys.path.remove(FAKECUPTI[major])
        for name in ("cupti", "cupti.cupti"):
            sys.modules.pop(name, None)


def instances(c, record) -> list:
    """(Protocol, an object cupti-python gives for it) for every Protocol of cupti_types."""
    return [(T.Cupti, c), (T.ActivityKinds, c.ActivityKind), (T.CallbackIds, c.runtime_api_trace_cbid),
            (T.CallbackIds, c.driver_api_trace_cbid), (T.NamedInt, c.Result(0)),
            (T.NamedInt, next(iter(c.driver_api_trace_cbid))), (T.Record, record)]


def test_every_protocol_is_checked_here():
    protocols = {c for _, c in inspect.getmembers(T, inspect.isclass) if c.__module__ == T.__name__}
    assert protocols == {p for p, _ in instances(load_fake(13), R.api())}


@pytest.mark.parametrize("major", [13, 12])
def test_the_stand_ins_have_every_name_with_as_many_parameters(major):
    c = load_fake(major)
    assert missing(instances(c, R.api())) == []
    for name, params in methods(T.Cupti).items():
        if name != "Result":
            assert len(inspect.signature(getattr(c, name)).parameters) == len(params), name


def real_cupti():
    try:
        from cupti import cupti
    except Exception as e:  # not installed (a dependency of the traced program, not of pinmon)
        pytest.skip(f"cupti-python does not import here: {type(e).__name__}: {e}")
    return cupti


def test_the_real_cupti_python_has_every_name_and_parameter():
    c = real_cupti()
    record = c.ActivityAPI  # its record classes: ``kind`` is a field of each
    assert missing(instances(c, record)) == []
    for name, params in methods(T.Cupti).items():
        if name != "Result":
            assert parameter_names(getattr(c, name)) == params, name
    ids = {m.name: int(m) for m in c.runtime_api_trace_cbid}
    assert ids["cudaHostRegister_v4000"] == 152  # what tests/trace's stand-ins and records use
    assert {m.name: int(m) for m in c.driver_api_trace_cbid}["cuMemHostRegister_v2"] == 379


class Compiled:
    """A compiled function as inspect cannot read it: only its docstring names its parameters."""

    __signature__ = "unreadable"

    def __init__(self, doc):
        self.__doc__ = doc

    def __call__(self, *a):
        return None


@pytest.mark.parametrize("doc, names", [("cuDeviceGetPCIBusId(int length, dev)\n Returns a PCI Bus Id", ["length", "dev"]),
                                        ("activity_enable(kind: int)", ["kind"]), ("get_timestamp() -> int", []),
                                        ("no signature here", None)])
def test_parameter_names_read_a_cython_docstring(doc, names):
    assert parameter_names(Compiled(doc)) == names


def stub_functions() -> dict:
    """{function: its parameter names} declared in typings/cuda/bindings/driver.pyi."""
    tree = ast.parse(DRIVER_STUB.read_text())
    return {n.name: [a.arg for a in n.args.args] for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_the_driver_stub_declares_what_the_engine_calls():
    engine = (pathlib.Path(HERE).parents[1] / "pinmon" / "trace" / "engine_cupti.py").read_text()
    called = {n.attr for n in ast.walk(ast.parse(engine))
              if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "driver"}
    assert called and called <= set(stub_functions()) | {"CUresult", "CUdevice"}


def test_the_real_cuda_bindings_have_the_stubs_functions():
    try:
        from cuda.bindings import driver
    except Exception as e:
        pytest.skip(f"cuda-bindings does not import here: {type(e).__name__}: {e}")
    for name, params in stub_functions().items():
        assert parameter_names(getattr(driver, name)) == params, name
    assert int(driver.CUresult.CUDA_SUCCESS) == 0
