"""On a real GPU: registered memory is registered under every engine (issue 30 B6). A traced program
``cudaHostRegister``s 32 MiB and holds it; ``pinmon check --json`` must show its row with
``held.registered_bytes`` 32 MiB and ``held.pinned_bytes`` at least that, under ``--engine hooks``
and ``--engine cupti`` (CUPTI 13: cupti-python on the box, else skipped); its last report, after
``cudaHostUnregister``, none registered.

Registered through CuPy (``cupy.cuda.runtime.hostRegister``, which the hooks see too; under CUPTI the
figure must be CUPTI's own, ``registered_from: "cupti"``) and, under CUPTI, through the driver API
(``cuda.bindings.driver.cuMemHostRegister``, which no hook sees). The CUPTI 12 variant runs
``bench/trace_paced.py``'s CUDA 12 runtime program (it registers 8 MiB through ctypes) with the CUDA 12
wheels of ``$PINMON_CUPTI12_WHEELS`` (a directory: cupti-python 12.8.0, cuda-bindings 12.8.0,
nvidia-cuda-cupti-cu12 and nvidia-cuda-runtime-cu12 12.8.90; bench/README.md says how to fetch them),
skipped without it. Reports and the check are saved under ``$PINMON_RESULTS_DIR/trace_register/``
when set."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.bench_scripts import load_bench
from tests.waiting import read_until

pytestmark = pytest.mark.gpu
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIB = 1 << 20
REGISTERED = 32 * MIB

PROG = r"""
import ctypes, mmap, os, sys
import cupy
how, n = sys.argv[1], int(sys.argv[2])
buf = mmap.mmap(-1, n)  # page-aligned anonymous memory, as a program's own buffer
ptr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
dev = cupy.empty(1 << 20, dtype=cupy.uint8)  # the context, current on this thread
rt = cupy.cuda.runtime
if how == "cupy":
    rt.hostRegister(ptr, n, 0)
else:
    from cuda.bindings import driver
    res = driver.cuMemHostRegister(ptr, n, 0)
    assert int(res[0] if isinstance(res, tuple) else res) == 0, res
rt.memcpy(dev.data.ptr, ptr, 1 << 20, rt.memcpyHostToDevice)  # a copy from it: pinned
print("registered", os.getpid(), flush=True)
sys.stdin.read()  # held until the test closes stdin
if how == "cupy":
    rt.hostUnregister(ptr)
else:
    res = driver.cuMemHostUnregister(ptr)
    assert int(res[0] if isinstance(res, tuple) else res) == 0, res
print("unregistered", flush=True)
"""


def importable(name: str) -> bool:
    r = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, timeout=120)
    return r.returncode == 0


def save(name: str, files: dict) -> None:
    base = os.environ.get("PINMON_RESULTS_DIR")
    if not base:
        return
    d = os.path.join(base, "trace_register", name)
    os.makedirs(d, exist_ok=True)
    for fname, text in files.items():
        with open(os.path.join(d, fname), "w") as f:
            f.write(text)


def read_report(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


@pytest.mark.parametrize("engine, how", [("hooks", "cupy"), ("cupti", "cupy"), ("cupti", "driver")])
def test_a_registered_range_is_registered_in_the_row(tmp_path, engine, how):
    if engine == "cupti" and not importable("cupti.cupti"):
        pytest.skip("cupti-python is not installed (the CUPTI 13 variant needs it)")
    if how == "driver" and not importable("cuda.bindings.driver"):
        pytest.skip("cuda-bindings is not installed")
    name = f"{engine}_{how}"
    report_dir = tmp_path / "reports"
    report_dir.mkdir(mode=0o700)
    env = dict(os.environ, PINMON_TRACE_DIR=str(report_dir))
    child = subprocess.Popen([sys.executable, "-m", "pinmon", "trace", "--engine", engine, "--",
                              sys.executable, "-c", PROG, how, str(REGISTERED)],
                             cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    report = str(report_dir / f"{child.pid}.json")  # pinmon trace execs: the program's pid
    first = check_out = check_err = ""
    live: dict = {}
    try:
        first = child.stdout.readline()
        assert first.startswith("registered"), first + child.stderr.read()
        # A report written after the registration (every 0.5 s); the last one read is asserted on below.
        live = read_until(lambda: read_report(report),
                          lambda r: (r.get("pinned") or {}).get("registered_bytes") == REGISTERED,
                          timeout_s=60, interval_s=0.2)
        check = subprocess.run([sys.executable, "-m", "pinmon", "check", "--json", "--window", "1"],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        check_out, check_err = check.stdout, check.stderr
    finally:
        # communicate() closes stdin, which ends the program's hold; a stdin closed before it is a
        # ValueError there, which would hide the test's own assertions.
        out, err = child.communicate(input="", timeout=120)
    final = read_report(report)
    save(name, {"live_report.json": json.dumps(live), "final_report.json": json.dumps(final),
                "check.json": check_out, "check.stderr": check_err, "program.stdout": first + out,
                "program.stderr": err})
    assert child.returncode == 0, err
    assert live.get("engine") == engine, live.get("engine_notice")
    if engine == "cupti":
        assert live["pinned"].get("registered_from") == "cupti", live["cupti"].get("registrations_error")
    assert check_out, check_err
    rows = [p for p in json.loads(check_out)["snapshot"]["processes"] if p["pid"] == child.pid]
    assert len(rows) == 1 and rows[0]["source"] == "traced", check_out
    held = rows[0]["held"]
    assert held["registered_bytes"] == REGISTERED, held
    assert held["pinned_bytes"] >= REGISTERED, held
    # After cudaHostUnregister: the release ended the range.
    assert final["final"] is True and final["pinned"]["registered_bytes"] == 0, final["pinned"]
    assert final["allocs"]["registers"] == 1
    if engine == "cupti":
        assert final["cupti"]["pinned"]["unregistrations"] == 1


def test_cupti12_counts_a_ctypes_registration_as_registered():
    """CUPTI 12 (cupti-python 12.8 on a CUDA 12.8 runtime program): the 8 MiB the program registers
    through ctypes, which no hook sees, are registered in the report."""
    wheels = os.environ.get("PINMON_CUPTI12_WHEELS")
    if not wheels or not os.path.isdir(wheels):
        pytest.skip("set PINMON_CUPTI12_WHEELS to a directory of the CUDA 12 wheels (bench/README.md)")
    paced = load_bench("trace_paced")
    installed = paced.install_wheels(os.path.abspath(wheels))
    try:
        assert installed["pip_rc"] == 0 and installed["cupti"], installed["pip_tail"]
        row = paced.run_engine("cupti", ["cudart12"], 3.0, installed)
    finally:
        shutil.rmtree(installed["target"], ignore_errors=True)
    save("cupti12_cudart12", {"row.json": json.dumps(row, indent=1)})
    assert row["engine_in_report"] == "cupti" and row["cupti"]["major"] == 12, row.get("engine_notice")
    reg = row["registered"]
    why = {k: row["cupti"].get(k) for k in ("registrations_error", "registrations_notes")}
    assert reg["program"] == 8 * MIB and reg["report"] == 8 * MIB and reg["from"] == "cupti", (reg, why)
    assert reg["pinned_bytes"] >= 8 * MIB
