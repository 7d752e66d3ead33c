"""The example programs where there is no CUDA to run on: one line and exit 3, never a traceback; and
only the examples with a PyTorch variant take ``--torch``."""
import os
import subprocess
import sys

import pytest

from .conftest import pinmon_cmd

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = sorted(n for n in os.listdir(os.path.join(ROOT, "examples")) if n.endswith(".py") and n != "_common.py")

# A CuPy whose every call fails as it does on a box without a driver.
NO_DRIVER_CUPY = '''
class CUDARuntimeError(RuntimeError):
    pass
CUDARuntimeError.__module__ = "cupy_backends.cuda.api.runtime"
def _fail(*a, **k):
    raise CUDARuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version")
class _Runtime:
    def __getattr__(self, name):
        if name.startswith("hostAlloc") or name.startswith("memcpy"):
            return 0
        return _fail
    hostAlloc = staticmethod(_fail)
class cuda:
    runtime = _Runtime()
empty = arange = asarray = _fail
'''


def run(script, *args, pythonpath=None):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, os.path.join("examples", script), "--seconds", "0.1", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def no_driver(tmp_path_factory):
    d = tmp_path_factory.mktemp("nodriver")
    for name in ("cupy", "cupyx", "torch"):
        (d / name).mkdir()
    (d / "cupy" / "__init__.py").write_text(NO_DRIVER_CUPY)
    (d / "cupyx" / "__init__.py").write_text("from cupy import _fail as empty_pinned\n")
    (d / "torch" / "__init__.py").write_text(
        "def _fail(*a, **k):\n    raise RuntimeError('Found no NVIDIA driver on your system.')\n"
        "empty = _fail\nuint8 = 'uint8'\nfrom_numpy = _fail\n")
    return str(d)


def library_of(script, *args):
    """The library an example (with these arguments) runs on, as its line names it."""
    with open(os.path.join(ROOT, "examples", script)) as f:
        text = f.read()
    return "PyTorch" if "--torch" in args or "import cupy" not in text else "CuPy"


@pytest.mark.parametrize("script", EXAMPLES)
@pytest.mark.parametrize("setup", ["no-cuda-module", "no-driver"])
def test_an_example_without_cuda_says_so_in_one_line(script, setup, no_driver):
    r = run(script, pythonpath=no_driver if setup == "no-driver" else "/nonexistent")
    if setup == "no-cuda-module" and r.returncode == 0:
        pytest.skip("CuPy and a GPU are here")
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    if setup == "no-driver":
        assert "cannot run without CUDA" in r.stderr
    else:  # the library is missing, not CUDA
        assert r.stderr.startswith(f"{script}: cannot run: {library_of(script)} is not installed"), r.stderr


@pytest.mark.parametrize("script", [s for s in EXAMPLES if library_of(s) == "CuPy"])
def test_the_torch_variant_names_pytorch_when_it_is_missing(script):
    with open(os.path.join(ROOT, "examples", script)) as f:
        if "args.torch" not in f.read():
            pytest.skip("no PyTorch variant")
    r = run(script, "--torch", pythonpath="/nonexistent")
    if r.returncode == 0:
        pytest.skip("PyTorch and a GPU are here")
    assert r.returncode == 3 and r.stderr.startswith(f"{script}: cannot run: PyTorch is not installed"), r.stderr


@pytest.mark.parametrize("script", EXAMPLES)
def test_under_pinmon_trace_without_a_driver_only_the_example_speaks(script, no_driver, tmp_path):
    """No NVIDIA driver: pinmon trace adds no line (no pip command for CUPTI, which cannot run there)."""
    reports = tmp_path / "reports"
    reports.mkdir(mode=0o700)
    env = dict(os.environ, PYTHONPATH=no_driver, PINMON_TRACE_DIR=str(reports))
    r = subprocess.run([*pinmon_cmd(driver=False), "trace", "--", sys.executable, os.path.join("examples", script),
                        "--seconds", "0.1"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and r.stderr.startswith(f"{script}: cannot run"), r.stderr


@pytest.mark.parametrize("script", EXAMPLES)
def test_only_examples_with_a_torch_variant_take_torch(script):
    with open(os.path.join(ROOT, "examples", script)) as f:
        has_variant = "args.torch" in f.read()
    r = run(script, "--help")
    assert ("--torch" in r.stdout) == has_variant
