"""The probe engine without a GPU: the no-CuPy path, and the engine's control flow (caps, cleanup on
errors, Ctrl-C and cancel, time budget, break-even, notes) against a CuPy stand-in whose "device"
is host memory. Also the text formatting of hand-made results."""
import ctypes
import random
import subprocess
import sys
import threading
import time
import types

import pytest

from pinmon.model import ProbeMeasurement, ProbeResult
from pinmon.outputs.probe_text import format_probe, headline
from pinmon.probe import analysis as A
from pinmon.probe import buffers as B
from pinmon.probe import cuda as C
from pinmon.probe import engine as E
from pinmon.probe import plan as P
from pinmon.probe import safety as S
from pinmon.probe import break_even_transfers, probe_available, run_probe
from pinmon.units import KIB, MIB

CAP = 2 * MIB  # small buffers keep the stand-in's memmoves quick


# --- a CuPy stand-in ------------------------------------------------------------------------------

class FakeCUDARuntimeError(RuntimeError):
    pass


FakeCUDARuntimeError.__name__ = "CUDARuntimeError"


class FakeRuntime:
    memcpyHostToDevice = 1
    memcpyDeviceToHost = 2
    hostAllocDefault, hostAllocPortable, hostAllocMapped, hostAllocWriteCombined = 0, 1, 2, 4
    CUDARuntimeError = FakeCUDARuntimeError

    def __init__(self):
        self.device_count = 1
        self.host: dict = {}
        self.device: dict = {}
        self.registered: dict = {}
        self.pinned_now = 0
        self.pinned_peak = 0
        self.fail_at: dict = {}  # call name -> fail on this call number (1-based)
        self.calls: dict = {}
        self.count_error = None

    def _call(self, name):
        self.calls[name] = self.calls.get(name, 0) + 1
        if self.fail_at.get(name) == self.calls[name]:
            raise FakeCUDARuntimeError("cudaErrorMemoryAllocation: out of memory")

    def _pin(self, n):
        self.pinned_now += n
        self.pinned_peak = max(self.pinned_peak, self.pinned_now)

    def getDeviceCount(self):
        if self.count_error:
            raise FakeCUDARuntimeError(self.count_error)
        return self.device_count

    # CUDA's version numbers (1000 * major + 10 * minor); a driver of 0 is CUDA's "no driver".
    driver_version = 13000
    runtime_version = 13000

    def driverGetVersion(self):
        return self.driver_version

    def runtimeGetVersion(self):
        return self.runtime_version

    def setDevice(self, i):
        self._call("setDevice")

    def deviceGetPCIBusId(self, i):
        return "0000:00:06.0"

    def malloc(self, n):
        self._call("malloc")
        buf = ctypes.create_string_buffer(n)
        ptr = ctypes.addressof(buf)
        self.device[ptr] = buf
        return ptr

    def free(self, ptr):
        self._call("free")
        if ptr:
            del self.device[ptr]

    def hostAlloc(self, n, flags):
        self._call("hostAlloc")
        buf = ctypes.create_string_buffer(n)
        ptr = ctypes.addressof(buf)
        self.host[ptr] = (buf, n, flags)
        self._pin(n)
        return ptr

    def freeHost(self, ptr):
        self._call("freeHost")
        _, n, _ = self.host.pop(ptr)
        self.pinned_now -= n

    def hostRegister(self, ptr, n, flags):
        self._call("hostRegister")
        assert ptr % 4096 == 0, "registered buffers are page-aligned"
        self.registered[ptr] = n
        self._pin(n)

    def hostUnregister(self, ptr):
        self._call("hostUnregister")
        self.pinned_now -= self.registered.pop(ptr)

    def memcpyAsync(self, dst, src, n, kind, stream):
        self._call("memcpyAsync")
        assert kind in (1, 2)
        ctypes.memmove(dst, src, n)

    def pointerGetAttributes(self, ptr):
        assert ptr in self.host
        return types.SimpleNamespace(device=0, devicePointer=ptr, hostPointer=ptr, type=1)


def make_fake_cupy(compile_error=None):
    rt = FakeRuntime()

    class Event:
        def __init__(self, *a, **k):
            self.t = None

        def record(self, stream=None):
            self.t = time.perf_counter()
            return self

        def synchronize(self):
            pass

    class Stream:
        def __init__(self, null=False, non_blocking=False, ptds=False):
            assert non_blocking
            self.ptr = 12345

        def synchronize(self):
            pass

    class Device:
        def __init__(self, i=0):
            self.id = i
            self.attributes = {"MultiProcessorCount": 4}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def use(self):
            pass

    class RawKernel:
        def __init__(self, code, name, options=()):
            self.code, self.name = code, name
            self.launches = 0

        def compile(self, log_stream=None):
            if compile_error:
                raise RuntimeError(compile_error)

        def __call__(self, grid, block, args, **kwargs):
            assert len(args) == 3 and "stream" in kwargs
            self.launches += 1

    cp = types.ModuleType("cupy")
    cp.cuda = types.SimpleNamespace(runtime=rt, Event=Event, Stream=Stream, Device=Device,
                                    get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3)
    cp.RawKernel = RawKernel
    return cp


@pytest.fixture
def fake(monkeypatch):
    cp = make_fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    yield cp.cuda.runtime
    assert_all_freed(cp.cuda.runtime)


def assert_all_freed(rt):
    assert rt.host == {}, "pinned buffers left allocated"
    assert rt.registered == {}, "buffers left registered"
    assert rt.device == {}, "device buffers left allocated"
    assert rt.pinned_now == 0
    assert B.held_pinned_bytes() == 0


# --- without CuPy ---------------------------------------------------------------------------------

def test_no_cupy_probe_available_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    ok, reason = probe_available()
    assert ok is False
    assert reason.startswith("probe unavailable: CuPy is not installed")
    assert "pinmon[cuda12]" in reason


@pytest.mark.parametrize("kind", P.KINDS)
def test_no_cupy_run_probe_returns_unavailable(monkeypatch, kind):
    monkeypatch.setitem(sys.modules, "cupy", None)
    r = run_probe(kind, link_theoretical_bytes_per_s=63e9)
    assert r.status == "unavailable" and "CuPy is not installed" in r.reason
    assert r.kind == kind and r.measurements == () and r.duration_s >= 0
    assert r.link_theoretical_bytes_per_s == 63e9
    assert format_probe(r).startswith("probe unavailable: CuPy is not installed")
    assert ProbeResult.from_dict(r.to_dict()) == r


def test_import_needs_no_cupy():
    code = ("import sys; sys.modules['cupy'] = None\n"
            "import pinmon.probe, pinmon.probe.engine, pinmon.outputs.probe_text\n"
            "print(pinmon.probe.run_probe('quick').status)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "unavailable"


def test_unknown_kind_is_a_caller_bug():
    with pytest.raises(ValueError):
        run_probe("everything")


def test_refused_cap_never_touches_cuda(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    r = run_probe("quick", max_pinned_bytes=0)
    assert r.status == "unavailable" and r.reason == "probe disabled: --max-pinned is 0"
    assert format_probe(r).strip() == "probe disabled: --max-pinned is 0"


# --- with the stand-in ----------------------------------------------------------------------------

def rows(r, kind, memory=None):
    return [m for m in r.measurements if m.kind == kind and (memory is None or m.memory == memory)]


def test_quick_measures_four_copies(fake):
    r = run_probe("quick", max_pinned_bytes=CAP)
    assert r.status == "ok" and r.reason is None and r.max_pinned_bytes == CAP
    copies = rows(r, "copy")
    assert {(m.memory, m.direction) for m in copies} == {(m, d) for m in ("pinned", "pageable")
                                                        for d in ("h2d", "d2h")}
    for m in copies:
        assert m.size_bytes == CAP and m.repeats == P.copy_repeats(CAP)
        assert m.bytes_per_s > 0 and m.seconds > 0
        assert "capped" in m.note
    init = rows(r, "init")
    assert len(init) == 1 and init[0].seconds >= 0 and "CUDA context" in init[0].note
    assert "0000:00:06.0" in init[0].note
    assert fake.pinned_peak <= CAP


def test_sweep_sizes_and_cap(fake):
    r = run_probe("sweep", max_pinned_bytes=CAP)
    assert r.status == "ok"
    sizes = sorted({m.size_bytes for m in rows(r, "copy")})
    assert sizes == [s for s in P.SWEEP_SIZES_BYTES if s <= CAP]
    assert "skipped" in rows(r, "init")[0].note
    assert fake.pinned_peak <= CAP


def test_alloc_rows_and_break_even(fake):
    r = run_probe("alloc", max_pinned_bytes=CAP)
    assert r.status == "ok"
    for size in [s for s in P.ALLOC_SIZES_BYTES if s <= CAP]:
        for kind in ("alloc", "free"):
            for memory in ("pinned", "pageable"):
                notes = {m.note for m in r.measurements
                         if m.kind == kind and m.memory == memory and m.size_bytes == size}
                assert notes == {"first", "steady"}
        pinned_copy = [m for m in rows(r, "copy", "pinned") if m.size_bytes == size][0]
        assert "break_even_transfers=" in pinned_copy.note
    assert fake.pinned_peak <= CAP


def test_modes_rows_and_notes(fake):
    r = run_probe("modes", max_pinned_bytes=CAP)
    assert r.status == "ok", r.reason
    got = {(m.kind, m.memory) for m in r.measurements}
    for want in [("cpu_read", "pinned"), ("cpu_read", "write_combined"), ("cpu_write", "pinned"),
                 ("cpu_write", "write_combined"), ("copy", "write_combined"), ("copy", "pinned"),
                 ("kernel_read", "mapped"), ("kernel_read", "device"), ("copy", "portable"),
                 ("register", "registered"), ("free", "registered"), ("copy", "registered")]:
        assert want in got
    wc = rows(r, "cpu_read", "write_combined")[0]
    # The stand-in's "write-combined" memory is ordinary memory: no penalty, and the note says so.
    assert "no CPU-read penalty measured (write-combining not honoured here, e.g. in a VM)" in wc.note
    assert fake.calls["hostAlloc"] == 4  # default, WC, mapped, portable
    assert fake.pinned_peak <= CAP


def test_modes_uses_the_cudahostalloc_flags(monkeypatch):
    cp = make_fake_cupy()
    rt = cp.cuda.runtime
    seen = []
    real = rt.hostAlloc

    def spy(n, flags):
        seen.append(flags)
        return real(n, flags)

    rt.hostAlloc = spy
    monkeypatch.setitem(sys.modules, "cupy", cp)
    assert run_probe("modes", max_pinned_bytes=CAP).status == "ok"
    assert seen == [0, 4, 2, 1]
    assert_all_freed(rt)


def test_kernel_compile_failure_only_loses_the_kernel_rows(monkeypatch):
    cp = make_fake_cupy(compile_error="nvrtc: error")
    monkeypatch.setitem(sys.modules, "cupy", cp)
    r = run_probe("modes", max_pinned_bytes=CAP)
    assert r.status == "ok"
    for m in rows(r, "kernel_read"):
        assert m.bytes_per_s is None and m.note.startswith("not measured")
    assert rows(r, "copy", "registered")
    assert_all_freed(cp.cuda.runtime)


@pytest.mark.parametrize("call,n", [("hostAlloc", 1), ("hostAlloc", 3), ("memcpyAsync", 5),
                                    ("malloc", 2), ("hostRegister", 2), ("freeHost", 2)])
@pytest.mark.parametrize("kind", P.KINDS)
def test_cuda_error_anywhere_gives_unavailable_and_frees(fake, call, n, kind):
    fake.fail_at[call] = n
    r = run_probe(kind, max_pinned_bytes=CAP)
    if fake.calls.get(call, 0) < n:
        assert r.status == "ok"  # this probe never makes that many such calls
        return
    assert r.status == "unavailable"
    assert "cudaErrorMemoryAllocation" in r.reason and kind in r.reason
    if call == "freeHost":
        # The failed free is the stand-in's bookkeeping, not a leak: forget it for the final check.
        fake.host.clear()
        fake.pinned_now = sum(fake.registered.values())


@pytest.mark.parametrize("kind", P.KINDS)
def test_keyboard_interrupt_from_progress_at_every_step_frees_everything(monkeypatch, kind):
    total = P.build_plan(kind, CAP).total
    for stop_at in range(total + 1):
        cp = make_fake_cupy()
        monkeypatch.setitem(sys.modules, "cupy", cp)

        def progress(done, tot, label, stop_at=stop_at):
            assert tot == total and isinstance(label, str)
            if done == stop_at:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            run_probe(kind, max_pinned_bytes=CAP, progress=progress)
        assert_all_freed(cp.cuda.runtime)
    # The lock was released each time.
    assert run_probe("quick", max_pinned_bytes=CAP).status == "ok"


def test_cancel_returns_what_it_has(fake):
    cancel = threading.Event()

    def progress(done, total, label):
        if done == 2:
            cancel.set()

    r = run_probe("sweep", max_pinned_bytes=CAP, progress=progress, cancel=cancel)
    assert r.status == "ok" and r.reason == "cancelled"
    assert len(rows(r, "copy")) == 2


def test_cancel_from_a_timer_thread_at_random_points(fake):
    rng = random.Random(7)
    for _ in range(20):
        cancel = threading.Event()
        timer = threading.Timer(rng.uniform(0, 0.02), cancel.set)
        timer.start()
        r = run_probe(rng.choice(P.KINDS), max_pinned_bytes=CAP, cancel=cancel)
        timer.join()
        assert r.status == "ok" and r.reason in (None, "cancelled")
        assert_all_freed(fake)


def test_time_budget_stops_between_measurements(fake):
    r = run_probe("sweep", max_pinned_bytes=CAP, time_budget_s=0)
    assert r.status == "ok" and r.reason.startswith("time budget of 0 s spent after 0 of")
    assert rows(r, "copy") == []


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


def test_one_probe_at_a_time(fake):
    assert S.PROBE_LOCK.acquire(blocking=False)
    try:
        r = run_probe("quick", max_pinned_bytes=CAP)
    finally:
        S.PROBE_LOCK.release()
    assert r.status == "unavailable" and "already running" in r.reason


def test_measure_copies(fake):
    out = E.measure_copies([64 * KIB, 1 * MIB], repeats=3, max_pinned_bytes=CAP)
    assert [(m.size_bytes, m.direction) for m in out] == [(64 * KIB, "h2d"), (64 * KIB, "d2h"),
                                                          (1 * MIB, "h2d"), (1 * MIB, "d2h")]
    assert all(m.repeats == 3 and m.bytes_per_s > 0 for m in out)
    with pytest.raises(RuntimeError):
        E.measure_copies([4 * MIB], max_pinned_bytes=CAP)


def test_pinned_buffer_view_round_trip(fake):
    with B.PinnedBuffer(8192, 0) as buf:
        v = buf.view()
        v[:] = 7
        assert bytes(ctypes.string_at(buf.ptr, 4)) == b"\x07" * 4
        del v
        assert B.held_pinned_bytes() == 8192
    assert buf.ptr == 0 and buf.open_s >= 0 and buf.close_s >= 0
    buf.close()  # idempotent


def test_pageable_array_is_page_aligned():
    arr = B.pageable_array(3 * 4096 + 5)
    assert arr.ctypes.data % 4096 == 0 and arr.nbytes == 3 * 4096 + 5


# --- break-even and verdicts on hand-made rows ----------------------------------------------------

def _alloc_rows(size, pinned_alloc, pinned_free, pageable_alloc, pageable_free, pinned_copy, pageable_copy):
    m = ProbeMeasurement
    return [m("alloc", "pinned", size, seconds=pinned_alloc, note="steady"),
            m("alloc", "pinned", size, seconds=pinned_alloc * 10, note="first"),
            m("free", "pinned", size, seconds=pinned_free, note="steady"),
            m("alloc", "pageable", size, seconds=pageable_alloc, note="steady"),
            m("free", "pageable", size, seconds=pageable_free, note="steady"),
            m("copy", "pinned", size, direction="h2d", seconds=pinned_copy, bytes_per_s=size / pinned_copy),
            m("copy", "pageable", size, direction="h2d", seconds=pageable_copy, bytes_per_s=size / pageable_copy)]


def test_break_even_formula():
    # (124 + 37 - 56 - 10) ms of extra cost / (42.6 - 4.9) ms saved per copy
    rows_ = _alloc_rows(256 * MIB, 0.124, 0.037, 0.056, 0.010, 0.0049, 0.0426)
    n = break_even_transfers(rows_, 256 * MIB)
    assert n == pytest.approx((0.124 + 0.037 - 0.056 - 0.010) / (0.0426 - 0.0049))
    r = ProbeResult(time=0, kind="alloc", measurements=tuple(rows_))
    assert break_even_transfers(r, 256 * MIB) == pytest.approx(n)
    assert break_even_transfers(r, 4 * KIB) is None


def test_break_even_edges():
    assert break_even_transfers(_alloc_rows(4096, 1e-5, 1e-5, 1e-3, 0, 1e-5, 2e-5), 4096) == 0.0
    assert break_even_transfers(_alloc_rows(4096, 1e-3, 1e-5, 1e-5, 0, 2e-5, 1e-5), 4096) == float("inf")
    annotated = A.annotate_break_even(_alloc_rows(4096, 1e-3, 1e-5, 1e-5, 0, 2e-5, 1e-5))
    note = [m for m in annotated if m.kind == "copy" and m.memory == "pinned"][0].note
    assert note == "break_even_transfers=never (pageable copy not slower)"


def test_wc_verdict_both_ways():
    m = ProbeMeasurement
    same = [m("cpu_read", "pinned", MIB, bytes_per_s=10e9), m("cpu_read", "write_combined", MIB, bytes_per_s=10.5e9)]
    assert A.wc_read_verdict(same).startswith("no CPU-read penalty measured (write-combining not honoured here")
    slow = [m("cpu_read", "pinned", MIB, bytes_per_s=10e9), m("cpu_read", "write_combined", MIB, bytes_per_s=0.5e9)]
    assert A.wc_read_verdict(slow).startswith("CPU reads 20.0x slower")
    assert A.wc_read_verdict(slow[:1]) is None


# --- formatting -----------------------------------------------------------------------------------

def quick_result(**kw):
    m = ProbeMeasurement
    size = 64 * MIB
    rows_ = (m("init", "device", 0, seconds=0.21, repeats=1, note="CUDA context ready; CUDA device 0 is 0000:00:06.0"),
             m("copy", "pinned", size, "h2d", 55.0e9, size / 55.0e9, 8),
             m("copy", "pageable", size, "h2d", 6.3e9, size / 6.3e9, 8),
             m("copy", "pinned", size, "d2h", 55.1e9, size / 55.1e9, 8),
             m("copy", "pageable", size, "d2h", 11.3e9, size / 11.3e9, 8))
    args = dict(time=1.0, gpu_index=0, kind="quick", link_theoretical_bytes_per_s=32e9 * 16 * 128 / 130 / 8,
                duration_s=0.31, max_pinned_bytes=256 * MIB, measurements=rows_)
    args.update(kw)
    return ProbeResult(**args)


def test_headline_text():
    assert headline(quick_result()) == "pinned H2D 55.0 GB/s vs pageable 6.3 GB/s: 8.7x; 87% of Gen5 x16 (63.0 GB/s)"
    assert headline(quick_result(link_theoretical_bytes_per_s=None)) == \
        "pinned H2D 55.0 GB/s vs pageable 6.3 GB/s: 8.7x"
    assert headline(quick_result(reason="cancelled")).endswith("(cancelled)")
    assert headline(ProbeResult(time=0, status="unavailable", reason="no CUDA device visible to CuPy")) == \
        "probe unavailable: no CUDA device visible to CuPy"


def test_format_probe_quick_table():
    text = format_probe(quick_result())
    lines = text.splitlines()
    assert all(len(l) <= 80 for l in lines)
    assert lines[0] == "Probe quick, CUDA device 0: 310.0 ms (context 210.0 ms), cap 256.0 MiB"
    assert "8.7x" in lines[1]
    row = [l for l in lines if l.strip().startswith("64.0 MiB")][0]
    assert "55.0 GB/s" in row and "6.3 GB/s" in row and "11.3 GB/s" in row and "4.9x" in row
    assert "0000:00:06.0" in text


def test_format_probe_alloc_and_modes():
    size = 64 * MIB
    m = ProbeMeasurement
    alloc_rows = _alloc_rows(size, 0.031, 0.009, 0.014, 0.002, size / 55e9, size / 6.3e9)
    r = ProbeResult(time=0, kind="alloc", measurements=tuple(alloc_rows))
    text = format_probe(r, width=80)
    assert "pinning pays off after" in text and all(len(l) <= 80 for l in text.splitlines())
    modes = ProbeResult(time=0, kind="modes", link_theoretical_bytes_per_s=63.015e9, measurements=(
        m("cpu_read", "write_combined", 16 * MIB, bytes_per_s=10.4e9, seconds=0.0016, repeats=5,
          note="no CPU-read penalty measured (write-combining not honoured here, e.g. in a VM)"),
        m("copy", "pinned", size, "h2d", 55e9, size / 55e9, 8),
        m("kernel_read", "mapped", size, bytes_per_s=50e9, seconds=size / 50e9, repeats=10),
        m("register", "registered", size, seconds=0.0018, repeats=3)))
    text = format_probe(modes, width=60)
    words = " ".join(text.split())
    assert "write-combining not honoured" in words and "kernel_read" in words and "register" in words
    assert all(len(l) <= 60 for l in text.splitlines())
    assert headline(modes).startswith("pinned H2D 55.0 GB/s; 87% of Gen5 x16")


def test_check_report_uses_the_headline():
    from pinmon.model import HostMemory, Snapshot
    from pinmon.outputs.text import format_check

    snap = Snapshot(time=1.0, host=HostMemory(hostname="h"), probe=quick_result())
    assert "pinned H2D 55.0 GB/s vs pageable 6.3 GB/s: 8.7x" in format_check(snap, [])
