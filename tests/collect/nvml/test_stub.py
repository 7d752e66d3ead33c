"""typings/pynvml.pyi, the narrow stub mypy reads for pynvml, says what the installed nvidia-ml-py
has: mypy's stubtest compares its functions and constants with the module (.ci/run runs this file
on the oldest and the newest nvidia-ml-py that pyproject.toml allows), the structures' fields are
compared with their ``_fields_`` here, and every name pinmon calls or reads by name is declared."""
import ast
import ctypes
import importlib
import os
import pathlib
import re
import subprocess
import sys

import pynvml
import pytest

from pinmon.collect.nvml import NVML_FUNCTIONS
from pinmon.collect.nvml import gpm as gpm_module

REPO = pathlib.Path(__file__).resolve().parents[3]
STUB = REPO / "typings" / "pynvml.pyi"
NVML_SOURCES = sorted((REPO / "pinmon" / "collect" / "nvml").glob("*.py"))


def stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text())


def stub_functions() -> set[str]:
    return {n.name for n in stub_tree().body if isinstance(n, ast.FunctionDef)}


def stub_names() -> set[str]:
    """Every name the stub declares at module level: functions, classes, constants."""
    names = set()
    for n in stub_tree().body:
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
    return names


def stub_fields() -> dict[str, list[str]]:
    """{class: its annotated attributes} for every class of the stub that declares some."""
    out = {}
    for n in stub_tree().body:
        if isinstance(n, ast.ClassDef):
            fields = [s.target.id for s in n.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
            if fields:
                out[n.name] = fields
    return out


def test_stubtest_finds_the_stub_true_to_the_installed_pynvml(tmp_path):
    env = {**os.environ, "MYPYPATH": str(STUB.parent)}
    run = subprocess.run([sys.executable, "-m", "mypy.stubtest", "pynvml", "--ignore-missing-stub"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_function_pinmon_calls_is_in_the_stub():
    assert set(NVML_FUNCTIONS) <= stub_functions()
    assert len(set(NVML_FUNCTIONS)) == len(NVML_FUNCTIONS) == 22


def test_every_name_pinmon_reads_off_pynvml_is_in_the_stub():
    # Constants and structures are read by name (getattr with a fallback), so grep for the names.
    read = set()
    for path in NVML_SOURCES:
        read |= set(re.findall(r'"((?:NVML_[A-Z0-9_]+)|(?:c_nvml\w+))"', path.read_text()))
    own = set()  # names pinmon defines itself (call.py's NVML_ERROR_* codes, NVML_FUNCTIONS)
    for path in NVML_SOURCES:
        own |= set(vars(importlib.import_module(f"pinmon.collect.nvml.{path.stem}".removesuffix(".__init__"))))
    read -= own
    assert read, "the pattern finds the names read by name"
    assert read <= stub_names(), sorted(read - stub_names())


def fields_of(structure: type) -> set[str]:
    return {name for name, *_ in structure._fields_}


STRUCTURES = sorted(c for c in stub_fields() if issubclass(getattr(pynvml, c), (ctypes.Structure, ctypes.Union)))


@pytest.mark.parametrize("cls", STRUCTURES)
def test_the_fields_the_stub_gives_a_structure_are_its_own(cls):
    assert set(stub_fields()[cls]) <= fields_of(getattr(pynvml, cls))


def test_the_other_classes_attributes_are_what_pynvml_sets():
    assert set(STRUCTURES) | {"nvmlFriendlyObject", "NVMLError"} == set(stub_fields())
    # A process is made from a c_nvmlProcessInfo_t's fields; an error keeps its code in ``value``.
    assert set(stub_fields()["nvmlFriendlyObject"]) <= fields_of(pynvml.c_nvmlProcessInfo_t)
    assert stub_fields()["NVMLError"] == ["value"] and pynvml.NVMLError(3).value == 3


def test_gpm_metric_ids_are_pynvml_s():
    assert (gpm_module.PCIE_TX_PER_SEC, gpm_module.PCIE_RX_PER_SEC) == (
        pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC, pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC)
