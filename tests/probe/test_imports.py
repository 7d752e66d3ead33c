"""Who imports what in the probe: CuPy only in cuda.py, analysis pure, the probe text apart from the
collectors and the CUDA side."""
import ast
import pathlib

import pinmon

ROOT = pathlib.Path(pinmon.__file__).parent


def imports(relpath: str) -> set[str]:
    """Absolute names of the modules ``pinmon/<relpath>`` imports (relative imports resolved)."""
    path = ROOT / relpath
    package = ["pinmon", *pathlib.PurePath(relpath).parent.parts]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out.add(module)
            out |= {f"{module}.{a.name}" for a in node.names}
    return out


def test_only_cuda_py_imports_cupy():
    for path in sorted((ROOT / "probe").glob("*.py")):
        found = {m for m in imports(f"probe/{path.name}") if m.split(".")[0] == "cupy"}
        assert not found or path.name == "cuda.py", path.name
    assert "cupy" in imports("probe/cuda.py")


def test_analysis_is_pure():
    cuda_side = {"cupy", "numpy", "ctypes", "pinmon.probe.cuda", "pinmon.probe.buffers",
                 "pinmon.probe.timing", "pinmon.probe.engine", "pinmon.probe.numa"}
    assert imports("probe/analysis.py") & cuda_side == set()


def test_probe_text_reaches_neither_the_collectors_nor_the_cuda_side():
    names = imports("outputs/probe_text.py")
    assert not {m for m in names if m.startswith("pinmon.collect")}
    assert not names & {"pinmon.probe.engine", "pinmon.probe.cuda", "pinmon.probe.buffers",
                        "pinmon.probe.timing", "pinmon.probe.numa"}
