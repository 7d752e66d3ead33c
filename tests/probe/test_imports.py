"""Who imports what in the probe: CuPy only in cuda.py, analysis pure, no cycle, the probe text apart
from the collectors and the CUDA side."""
from tests.import_graph import ROOT, cycles, imports

CUDA_SIDE = {"pinmon.probe.engine", "pinmon.probe.cuda", "pinmon.probe.buffers", "pinmon.probe.timing",
             "pinmon.probe.numa"}


def test_only_cuda_py_imports_cupy():
    for path in sorted((ROOT / "probe").glob("*.py")):
        found = {m for m in imports(f"probe/{path.name}") if m.split(".")[0] == "cupy"}
        assert not found or path.name == "cuda.py", path.name
    assert "cupy" in imports("probe/cuda.py")


def test_analysis_is_pure():
    assert imports("probe/analysis.py") & (CUDA_SIDE | {"cupy", "numpy", "ctypes"}) == set()


def test_no_import_cycle_in_the_probe():
    assert cycles("probe") == []


def test_probe_text_reaches_neither_the_collectors_nor_the_cuda_side():
    names = imports("outputs/probe_text.py")
    assert not {m for m in names if m.startswith("pinmon.collect")}
    assert not names & CUDA_SIDE
