"""When the tracer starts: ``pinmon trace``'s bootstrap leaves a Python process that never imports a CUDA
library untouched (no pinmon module, no thread, no report, the same ``sys.path``), starts the tracer at
the first CUDA import, and a traced process forks with no thread of the tracer's. ``python -m
pinmon.trace`` does not run from a working directory other users can write, nor import from it; a
``PINMON_TRACE_ENGINE`` that names no engine is refused."""
import ast
import json
import os
import stat
import subprocess
import sys

import pytest

from pinmon.trace.engine_cupti import CUDA_MODULES

from .conftest import FAKES
from .test_command import ROOT, env

BOOTSTRAP = os.path.join(ROOT, "pinmon", "trace", "bootstrap", "sitecustomize.py")

LOOK = """
import json, os, sys, threading
def look():
    return {"pinmon": sorted(m for m in sys.modules if m == "pinmon" or m.startswith("pinmon.")),
            "threads": threading.active_count(), "os_threads": len(os.listdir("/proc/self/task")),
            "path": [p for p in sys.path if "bootstrap" not in p]}
"""


def trace(report_dir, *cmd, pythonpath=None, engine=None, **extra):
    e = env(report_dir, **extra)
    if pythonpath:
        e["PYTHONPATH"] = pythonpath
    args = [sys.executable, "-m", "pinmon", "trace"] + (["--engine", engine] if engine else []) + ["--", *cmd]
    return subprocess.run(args, env=e, capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_a_python_that_never_imports_cuda_stays_untouched(report_dir):
    prog = LOOK + "print(json.dumps(look()))\n"
    plain = subprocess.run([sys.executable, "-c", prog], env=env(report_dir), capture_output=True, text=True,
                           cwd=ROOT)
    r = trace(report_dir, "sh", "-c", f'"{sys.executable}" -c \'{prog}\'', engine="hooks")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    seen = json.loads(r.stdout)
    assert seen["pinmon"] == [] and seen["threads"] == 1 and seen["os_threads"] == 1
    assert seen["path"] == json.loads(plain.stdout)["path"]  # nothing put on sys.path
    assert os.listdir(report_dir) == []  # no report


def test_the_tracer_starts_at_the_first_cuda_import_and_puts_nothing_on_sys_path(report_dir):
    prog = LOOK + ("a = look()\nimport cupy\nimport pinmon.trace as t\nb = look()\n"
                   "print(json.dumps([a, b, t.installed(), os.getpid()]))\n")
    r = trace(report_dir, sys.executable, "-c", prog, pythonpath=FAKES, engine="hooks")
    assert r.returncode == 0, r.stderr
    before, after, installed, pid = json.loads(r.stdout)
    assert before["pinmon"] == [] and before["threads"] == 1
    assert installed and "pinmon.trace.hooks_cupy" in after["pinmon"] and after["threads"] == 2
    assert after["path"] == before["path"]
    with open(os.path.join(report_dir, f"{pid}.json")) as f:
        assert json.load(f)["final"] is True


def test_numba_alone_is_no_cuda_import(report_dir, tmp_path):
    (tmp_path / "numba").mkdir()
    (tmp_path / "numba" / "__init__.py").write_text("")
    (tmp_path / "numba" / "cuda.py").write_text("")
    prog = LOOK + ("import numba\na = look()\nfrom numba import cuda\nb = look()\n"
                   "print(json.dumps([a['pinmon'], 'pinmon.trace' in b['pinmon']]))\n")
    r = trace(report_dir, sys.executable, "-c", prog, pythonpath=str(tmp_path), engine="hooks")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [[], True]


FORK = """
import json, os, sys, threading
at_fork = []
def count():
    at_fork.append(len(os.listdir("/proc/self/task")))
os.register_at_fork(after_in_parent=count)  # runs before the tracer's own after-fork (registered later)
import cupy
import pinmon.trace as t
running = len(os.listdir("/proc/self/task"))
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        os._exit(0 if t.writer().pid == os.getpid() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
print(json.dumps({"running": running, "at_fork": at_fork, "after": t.writer()._thread.is_alive()}))
"""


def test_a_traced_program_forks_with_no_thread_of_the_tracers(report_dir):
    # Python 3.12+ warns (here: fails) at a fork of a process with more than one thread.
    # One thread per OpenBLAS pool: the fake CuPy imports NumPy, whose threads are not the tracer's.
    r = trace(report_dir, sys.executable, "-W", "error::DeprecationWarning", "-c", FORK, pythonpath=FAKES,
              engine="hooks", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    assert r.returncode == 0 and "multi-threaded" not in r.stderr, r.stderr
    out = json.loads(r.stdout)
    assert out["running"] == 2          # the report thread runs...
    assert out["at_fork"] == [1, 1, 1]  # ...but not while the process forks
    assert out["after"] is True         # and runs again after


def test_the_bootstrap_starts_on_the_modules_the_engine_arms_on():
    tree = ast.parse(open(BOOTSTRAP).read())
    triggers = next(ast.literal_eval(node.value.args[0]) for node in ast.walk(tree)
                    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "TRIGGERS")
    assert set(triggers) == set(CUDA_MODULES)
    assert {"torch", "cupy", "jax", "numba.cuda", "cuda"} <= set(triggers) and "numba" not in triggers


# --- python -m pinmon.trace and the working directory -------------------------------------------------

def test_python_m_pinmon_trace_refuses_pinmon_from_a_directory_others_can_write(report_dir, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # as /tmp
    os.symlink(os.path.join(ROOT, "pinmon"), shared / "pinmon")
    (shared / "prog.py").write_text("print('ran')\n")
    r = subprocess.run([sys.executable, "-m", "pinmon.trace", "prog.py"], env=env(report_dir),
                       capture_output=True, text=True, cwd=str(shared), timeout=60)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert "refusing" in r.stderr and "other users can write" in r.stderr and "python -P" in r.stderr
    # -P: no working directory on the path; pinmon comes from its install and the program runs.
    r = subprocess.run([sys.executable, "-P", "-m", "pinmon.trace", "prog.py"], env=env(report_dir),
                       capture_output=True, text=True, cwd=str(shared), timeout=60)
    assert r.returncode == 0 and r.stdout == "ran\n", r.stderr


def test_python_m_pinmon_trace_imports_nothing_from_the_working_directory(report_dir, tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir(mode=0o700)
    marker = tmp_path / "shadowed"
    for name in ("json", "atexit", "threading", "stat", "ctypes"):  # modules the tracer imports
        (cwd / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    prog = tmp_path / "prog.py"
    prog.write_text("import sys; print(sys.path[0])\n")
    r = subprocess.run([sys.executable, "-m", "pinmon.trace", str(prog)], env=env(report_dir, PYTHONPATH=ROOT),
                       capture_output=True, text=True, cwd=str(cwd), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{tmp_path}\n"  # the program's directory first, as python prog.py
    assert not marker.exists(), marker.read_text()


def test_the_unsafe_cwd_rule():
    from pinmon.trace.__main__ import imported_from_unsafe_cwd

    here = os.path.join(ROOT, "pinmon", "__init__.py")
    assert imported_from_unsafe_cwd(None, here, ROOT) is None                 # -P: no cwd on the path
    assert imported_from_unsafe_cwd("", here, "/") is None                    # pinmon from elsewhere
    mode = stat.S_IMODE(os.stat(ROOT).st_mode)
    expected = None if not mode & 0o022 and os.stat(ROOT).st_uid in (os.geteuid(), 0) else str
    got = imported_from_unsafe_cwd("", here, ROOT)
    assert got is None if expected is None else isinstance(got, str)


# --- PINMON_TRACE_ENGINE ------------------------------------------------------------------------------

@pytest.mark.parametrize("form", ["pinmon", "python-m"])
def test_an_engine_variable_that_names_no_engine_is_one_line_and_exit_2(report_dir, tmp_path, form):
    prog = tmp_path / "prog.py"
    prog.write_text("print('ran')\n")
    if form == "pinmon":
        args = [sys.executable, "-m", "pinmon", "trace", "--", sys.executable, str(prog)]
    else:
        args = [sys.executable, "-m", "pinmon.trace", str(prog)]
    r = subprocess.run(args, env=env(report_dir, PINMON_TRACE_ENGINE="bogus\x1b[2J"), capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert "PINMON_TRACE_ENGINE=bogus\\x1b[2J is not an engine (auto, cupti, hooks)" in r.stderr
    ok = subprocess.run(args, env=env(report_dir, PINMON_TRACE_ENGINE=" Hooks "), capture_output=True,
                        text=True, cwd=ROOT, timeout=60)
    assert ok.returncode == 0 and ok.stdout == "ran\n", ok.stderr


def test_a_cuda_library_that_is_not_installed_starts_nothing(report_dir):
    prog = LOOK + ("try:\n    import torch\nexcept ImportError:\n    pass\n"
                   "print(json.dumps(look()['pinmon']))\n")
    r = trace(report_dir, sys.executable, "-c", prog, engine="hooks")
    assert r.returncode == 0 and json.loads(r.stdout) == [], r.stderr
    assert os.listdir(report_dir) == []


def test_interpreter_options_before_m_change_nothing(report_dir, tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir(mode=0o700)
    marker = tmp_path / "shadowed"
    (cwd / "threading.py").write_text(f"open({str(marker)!r}, 'a').write('threading')\n")
    prog = tmp_path / "prog.py"
    prog.write_text("print('ran')\n")
    r = subprocess.run([sys.executable, "-W", "ignore", "-X", "utf8", "-m", "pinmon.trace", str(prog)],
                       env=env(report_dir, PYTHONPATH=ROOT), capture_output=True, text=True, cwd=str(cwd),
                       timeout=60)
    assert r.returncode == 0 and r.stdout == "ran\n", r.stderr
    assert not marker.exists()
