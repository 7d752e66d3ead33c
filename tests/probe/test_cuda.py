"""CuPy for the probe without a GPU: a missing CuPy, no device, a missing or old driver, each said in
one line; importing the probe never needs CuPy."""
import subprocess
import sys

import pytest

from pinmon.probe import cuda as C
from pinmon.probe import probe_available, run_probe
from tests.fakes.fake_cupy import FakeCUDARuntimeError, make_fake_cupy

CAP = 2 * (1 << 20)


def test_no_cupy_probe_available_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    ok, reason = probe_available()
    assert ok is False
    assert reason.startswith("probe unavailable: CuPy is not installed")
    assert "pinmon[cuda12]" in reason


def test_import_needs_no_cupy():
    code = ("import sys; sys.modules['cupy'] = None\n"
            "import pinmon.probe, pinmon.probe.engine, pinmon.probe.numa, pinmon.outputs.probe_text\n"
            "print(pinmon.probe.run_probe('quick').status)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "unavailable"


def test_no_device(monkeypatch):
    cp = make_fake_cupy()
    cp.cuda.runtime.device_count = 0
    monkeypatch.setitem(sys.modules, "cupy", cp)
    assert probe_available() == (False, "probe unavailable: no CUDA device visible to CuPy")
    r = run_probe("quick", max_pinned_bytes=CAP)
    assert r.status == "unavailable" and r.reason == "no CUDA device visible to CuPy"
    assert probe_available(3)[1] == "probe unavailable: no CUDA device visible to CuPy"
    cp.cuda.runtime.device_count = 1
    assert probe_available(3) == (False, "probe unavailable: CUDA device 3 not found (CuPy sees 1)")


INSUFFICIENT = "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version"


def _driver_box(monkeypatch, tmp_path, driver, runtime, module_loaded=True, error=INSUFFICIENT):
    """A CuPy stand-in whose device count fails with ``error``, on a box with this driver."""
    version_file = tmp_path / "nvidia-version"
    if module_loaded:
        version_file.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159\n")
    monkeypatch.setattr(C, "NVIDIA_PROC_VERSION", str(version_file))
    monkeypatch.setattr(C, "WSL_GPU_DEVICE", str(tmp_path / "no-dxg"))
    cp = make_fake_cupy()
    cp.cuda.runtime.count_error = error
    cp.cuda.runtime.driver_version = driver
    cp.cuda.runtime.runtime_version = runtime
    monkeypatch.setitem(sys.modules, "cupy", cp)
    return cp


def test_no_driver_says_so_not_another_cupy(monkeypatch, tmp_path):
    # cupy-cuda12x installed, no libcuda: CUDA answers InsufficientDriver and a driver version of 0.
    _driver_box(monkeypatch, tmp_path, driver=0, runtime=12080, module_loaded=False)
    ok, reason = probe_available()
    assert not ok and reason == ("probe unavailable: no NVIDIA driver: the CUDA driver library, libcuda,"
                                 f" is not installed (CUDA: {INSUFFICIENT})")
    r = run_probe("quick", max_pinned_bytes=CAP)
    assert r.status == "unavailable" and r.reason.startswith("no NVIDIA driver: ")
    assert "cupy-cuda" not in r.reason and "newer" not in r.reason


def test_a_driver_library_without_its_kernel_module(monkeypatch, tmp_path):
    _driver_box(monkeypatch, tmp_path, driver=12080, runtime=12080, module_loaded=False,
                error="cudaErrorNoDevice: no CUDA-capable device is detected")
    assert probe_available()[1] == ("probe unavailable: no NVIDIA driver: the NVIDIA kernel module is not"
                                    " loaded (CUDA: cudaErrorNoDevice: no CUDA-capable device is detected)")


def test_old_driver_of_an_older_cuda_major_gets_the_matching_cupy(monkeypatch, tmp_path):
    _driver_box(monkeypatch, tmp_path, driver=12020, runtime=13000)
    ok, reason = probe_available()
    assert not ok and reason == (
        f"probe unavailable: no usable CUDA device ({INSUFFICIENT}) (the NVIDIA driver supports CUDA 12.2,"
        " this CuPy is built for CUDA 13.0: update the driver, or install the CuPy for CUDA 12,"
        " cupy-cuda12x (pip install 'pinmon[cuda12]'))")


def test_old_driver_of_the_same_cuda_major_is_told_to_update(monkeypatch, tmp_path):
    _driver_box(monkeypatch, tmp_path, driver=12020, runtime=12080)
    reason = probe_available()[1]
    assert reason.endswith("(the NVIDIA driver supports CUDA 12.2, this CuPy is built for CUDA 12.8:"
                           " update the driver)")
    assert "cupy-cuda" not in reason


def test_a_new_enough_driver_gets_no_version_advice(monkeypatch, tmp_path):
    _driver_box(monkeypatch, tmp_path, driver=13000, runtime=12080)
    assert probe_available()[1] == f"probe unavailable: no usable CUDA device ({INSUFFICIENT})"


def test_a_cupy_that_cannot_tell_versions_gets_a_plain_hint(monkeypatch, tmp_path):
    cp = _driver_box(monkeypatch, tmp_path, driver=None, runtime=12080)

    def fails():
        raise FakeCUDARuntimeError("cudaErrorUnknown: unknown error")

    cp.cuda.runtime.driverGetVersion = fails
    reason = probe_available()[1]
    assert reason.endswith("(the NVIDIA driver is missing or older than this CuPy's CUDA: see `nvidia-smi`)")
    assert "cupy-cuda" not in reason


def test_each_cupy_module_gets_its_own_read_kernel_even_where_ids_repeat(monkeypatch):
    """A freed module's id() comes back as a new one's: the kernel cache must not key on it. Every
    id() in the module is made the same here, as if each new module took the last one's address."""
    import types

    class Compiles:
        def __init__(self, code, name):
            pass

        def compile(self):
            pass

    class Fails(Compiles):
        def compile(self):
            raise RuntimeError("no NVRTC")

    def module(kernel_type):
        cp = types.ModuleType("cupy")
        cp.RawKernel = kernel_type
        return cp

    monkeypatch.setattr(C, "id", lambda obj: 0x5EED, raising=False)
    monkeypatch.setattr(C, "_read_kernels", {})
    C.read_kernel(module(Compiles), 0)
    with pytest.raises(RuntimeError, match="no NVRTC"):  # compiled by this module, not another's kernel
        C.read_kernel(module(Fails), 0)
