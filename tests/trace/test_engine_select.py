"""``pinmon trace --engine``: which engine runs, the one line that says so, the fallback to the hooks
with a notice, and that the program's output and exit code stay its own. CUPTI is a stand-in
(fakecupti) fed records of the same copies the fake CuPy's hooks see."""
import json
import os
import subprocess
import sys

import pytest

from .conftest import FAKES, pinmon_cmd
from .test_command import ROOT, env

FAKECUPTI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakecupti")
FAKECUPTI12 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakecupti12")  # cupti-python 12.8's names
MIB = 1 << 20

PROG = """
import os, sys, time, types
import cupy
rt = cupy.cuda.runtime
p = rt.hostAlloc(1 << 20, 0)
d = rt.malloc(1 << 20)
rt.memcpy(d, p, 1 << 20, 1)
try:
    from cupti import cupti  # the stand-in: CUPTI sees the same allocation and copy
    t = cupti.get_timestamp()
    mem = dict(kind=49, memory_operation_type=1, memory_kind=2, correlation_id=5, bytes=1 << 20, address=p,
               timestamp=t)
    cupti._emit(types.SimpleNamespace(**mem))
    cp = dict(kind=1, copy_kind=1, src_kind=2, dst_kind=3, bytes=1 << 20, start=t, end=t + 20000,
              copy_count=1, device_id=0, context_id=1, stream_id=7, flags_=0)
    cupti._emit(types.SimpleNamespace(**cp))
except ImportError:
    pass
print(os.getpid())
sys.exit(3)
"""


def run(report_dir, engine=None, cupti=True, major=13, via_shell=False, prog=PROG, **extra):
    path = os.pathsep.join([FAKES, FAKECUPTI if major == 13 else FAKECUPTI12] if cupti else [FAKES])
    args = [*pinmon_cmd(), "trace"] + (["--engine", engine] if engine else [])
    cmd = [sys.executable, "-c", prog]
    if via_shell:  # pinmon trace cannot tell which Python a shell starts
        cmd = ["sh", "-c", 'exec "$0" "$@"', *cmd]
    r = subprocess.run(args + ["--", *cmd], env=env(report_dir, PYTHONPATH=path, **extra),
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 3, r.stderr  # the program's own exit code, whatever the engine
    pid = int(r.stdout)
    with open(os.path.join(report_dir, f"{pid}.json")) as f:
        return r, pid, json.load(f)


@pytest.mark.parametrize("engine, major, version", [(None, 13, "13.0.1"), ("auto", 13, "13.0.1"),
                                                     (None, 12, "12.8.0"), ("cupti", 12, "12.8.0")])
def test_auto_runs_cupti_says_so_once_and_counts_each_copy_once(report_dir, engine, major, version):
    r, _pid, rep = run(report_dir, engine, major=major)
    # pinmon trace's line before the program; the program, getting what it said, adds none.
    assert r.stderr == f"pinmon trace: engine cupti where CUPTI starts: {sys.executable} has cupti-python {version}\n"
    assert rep["cupti"]["version"] == version and rep["cupti"]["major"] == major
    assert rep["cupti"]["device_buffers"]["device_buffer_pool_limit"] == 8  # the pool cap went in
    assert rep["engine"] == "cupti" and rep["engine_notice"] is None and rep["final"] is True
    assert rep["copies"]["h2d"]["pinned"]["count"] == 1 and rep["copies"]["h2d"]["pinned"]["bytes"] == MIB
    assert rep["hooks"]["copies"]["h2d"]["pinned"]["count"] == 1
    assert rep["allocs"]["count"] == 1 and rep["pinned"]["bytes"] == MIB
    assert rep["cupti"]["state"] == "closed" and rep["cupti"]["records"] == 2


@pytest.mark.parametrize("major, version", [(13, "13.0.1"), (12, "12.8.0")])
def test_where_pinmon_trace_cannot_tell_the_program_says_which_engine_runs(report_dir, major, version):
    r, pid, rep = run(report_dir, major=major, via_shell=True)
    said, got = r.stderr.splitlines()
    assert said.startswith("pinmon trace: sh is not a Python program: the tracer runs inside Python programs")
    assert got == f"pinmon trace: engine cupti (cupti-python {version}), pid {pid}"
    assert rep["engine"] == "cupti" and rep["copies"]["h2d"]["pinned"]["count"] == 1


def test_engine_hooks_never_loads_cupti(report_dir):
    r, _, rep = run(report_dir, "hooks")
    assert r.stderr == "" and rep["engine"] == "hooks" and "cupti" not in rep
    assert rep["copies"]["h2d"]["pinned"]["count"] == 1


def test_the_environment_variable_picks_the_engine(report_dir):
    r, _, rep = run(report_dir, PINMON_TRACE_ENGINE="hooks")
    assert rep["engine"] == "hooks" and r.stderr == ""


@pytest.mark.parametrize("engine", ["auto", "cupti"])
def test_cupti_taken_by_another_tool_falls_back_to_the_hooks(report_dir, engine):
    r, pid, rep = run(report_dir, engine, FAKE_CUPTI_FAIL="39")
    assert rep["engine"] == "hooks" and "in use by another tool" in rep["engine_notice"]
    said, got = r.stderr.splitlines()  # what pinmon trace expected, then what the program got
    assert said.startswith("pinmon trace: engine cupti where CUPTI starts")
    assert got.startswith(f"pinmon trace: engine hooks, pid {pid}: CUPTI did not start: in use by another tool")
    assert rep["copies"]["h2d"]["pinned"]["count"] == 1  # the hooks' figures


def test_without_cupti_python_auto_uses_the_hooks_with_a_notice(report_dir):
    r, _pid, rep = run(report_dir, cupti=False)
    assert rep["engine"] == "hooks" and rep["engine_notice"] == "cupti-python is not installed (cupti)"
    # One line, before the program: the engine and the pip command for the program's own interpreter
    # (CUPTI 13 or 12 after this machine's driver: tests/trace/test_target.py covers the choice).
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(
        f"pinmon trace: engine hooks: {sys.executable} has no cupti-python; for the CUPTI engine run "
        f"{sys.executable} -m pip install cupti-python==1")


def test_a_bad_engine_is_one_line_and_exit_2(report_dir):
    r = subprocess.run([sys.executable, "-m", "pinmon", "trace", "--engine", "gpu", "--", "true"],
                       env=env(report_dir), capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--engine" in r.stderr


# A 32 MiB cudaHostRegister: through CuPy (the hooks see it), or as a CUDA 12 runtime program through
# ctypes does it (only CUPTI sees it); CUPTI's stand-in gets the records CUPTI writes for the call.
REGISTER_PROG = """
import ctypes, mmap, os, sys, types
import cupy
n = 32 << 20
buf = mmap.mmap(-1, n)
ptr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
if os.environ["REGISTER_BY"] == "cupy":
    cupy.cuda.runtime.hostRegister(ptr, n, 0)
try:
    from cupti import cupti
    t = cupti.get_timestamp()
    cupti._emit(types.SimpleNamespace(kind=49, memory_operation_type=1, memory_kind=2, correlation_id=7,
                                      address=ptr, bytes=n, timestamp=t))
    cupti._emit(types.SimpleNamespace(kind=5, cbid=152, correlation_id=7, return_value=0))
except ImportError:
    pass
print(os.getpid())
sys.exit(3)
"""


@pytest.mark.parametrize("engine, major, by", [("hooks", 13, "cupy"), ("cupti", 13, "cupy"), ("cupti", 13, "ctypes"),
                                               ("cupti", 12, "cupy"), ("cupti", 12, "ctypes")])
def test_registered_memory_is_registered_under_every_engine(report_dir, engine, major, by):
    """B6: a 32 MiB cudaHostRegister is in the row's pinned bytes and, exactly once, its registered bytes,
    whichever engine counts it (the hooks; CUPTI 12 or 13, which also sees a registration the hooks miss)."""
    from pinmon.collect.traced.report_checks import TracedProcess

    _, pid, rep = run(report_dir, engine, major=major, prog=REGISTER_PROG, REGISTER_BY=by)
    assert rep["engine"] == engine
    assert rep["pinned"]["registered_bytes"] == 32 * MIB and rep["pinned"]["bytes"] >= 32 * MIB
    assert rep["allocs"]["registers"] == 1
    if engine == "cupti":
        assert rep["pinned"]["registered_from"] == "cupti" and rep["cupti"]["major"] == major
    held = TracedProcess(pid, rep, rss_bytes=64 * MIB).held_figures()  # what the process's row shows
    assert held["registered_bytes"] == 32 * MIB and held["pinned_bytes"] >= 32 * MIB
