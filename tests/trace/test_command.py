"""``pinmon trace`` and ``python -m pinmon.trace``: the program runs as it would alone (exit code,
stdout, stderr, argv, signals), with the tracer started at its first import of a CUDA library (a fake
CuPy here) and not before; installing never imports torch or cupy; a traced program forks with no
thread of the tracer's."""
import json
import os
import signal
import subprocess
import sys

import pytest

from .conftest import FAKES, pinmon_cmd

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def env(report_dir, **extra):
    e = dict(os.environ, PINMON_TRACE_DIR=report_dir, PINMON_TRACE_INTERVAL="0.1")
    e.pop("PYTHONPATH", None)
    e.update(extra)
    return e


def pinmon_trace(report_dir, *cmd, **kw):
    return subprocess.run([*pinmon_cmd(), "trace", "--", *cmd],
                          env=env(report_dir, PYTHONPATH=FAKES), capture_output=True, text=True, timeout=60,
                          cwd=ROOT, **kw)


def programs_stderr(r) -> str:
    """The program's own stderr: what follows pinmon trace's line on the engine it will get."""
    first, _, rest = r.stderr.partition("\n")
    assert first.startswith("pinmon trace: engine hooks: ") and "has no cupti-python" in first, r.stderr
    return rest


PROG = ("import sys, cupy, pinmon.trace as t; print('out', t.installed(), sys.argv[1:]);"
        " print('err', file=sys.stderr); sys.exit(int(sys.argv[1]))")


@pytest.mark.parametrize("code", [0, 3, 42])
def test_exit_code_stdout_stderr_are_the_programs(report_dir, code):
    r = pinmon_trace(report_dir, sys.executable, "-c", PROG, str(code), "--flag")
    assert r.returncode == code
    assert r.stdout == f"out True ['{code}', '--flag']\n" and programs_stderr(r) == "err\n"


def test_an_uncaught_exception_looks_the_same(report_dir):
    prog = "import cupy\nraise ValueError('boom')"
    plain = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                           env=env(report_dir, PYTHONPATH=FAKES))
    traced = pinmon_trace(report_dir, sys.executable, "-c", prog)
    assert traced.returncode == plain.returncode == 1
    assert programs_stderr(traced) == plain.stderr and "ValueError: boom" in plain.stderr


def test_a_missing_command_is_one_line(report_dir):
    r = pinmon_trace(report_dir, "no-such-program-here")
    assert r.returncode == 127 and r.stderr.count("\n") == 1 and "cannot run" in r.stderr
    r = subprocess.run([sys.executable, "-m", "pinmon", "trace"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "no command" in r.stderr


def test_the_report_appears_and_the_final_one_is_written_at_exit(report_dir):
    r = pinmon_trace(report_dir, sys.executable, "-c", "import os, cupy; print(os.getpid())")
    pid = int(r.stdout)
    data = json.load(open(os.path.join(report_dir, f"{pid}.json")))
    assert data["final"] is True and data["pid"] == pid and data["argv"] == ["-c"]


def test_signals_reach_the_program(report_dir):
    prog = ("import signal, sys, time\n"
            "def h(s, f):\n    print('got', s, flush=True); sys.exit(9)\n"
            "signal.signal(signal.SIGTERM, h)\nprint('ready', flush=True)\ntime.sleep(30)\n")
    p = subprocess.Popen([sys.executable, "-m", "pinmon", "trace", "--", sys.executable, "-c", prog],
                         env=env(report_dir), stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert p.stdout.readline() == "ready\n"
    p.send_signal(signal.SIGTERM)  # to the pid pinmon trace was started as
    assert p.wait(20) == 9 and p.stdout.read() == f"got {int(signal.SIGTERM)}\n"
    p = subprocess.Popen([sys.executable, "-m", "pinmon", "trace", "--", sys.executable, "-c",
                          "import time; print('ready', flush=True); time.sleep(30)"],
                         env=env(report_dir), stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert p.stdout.readline() == "ready\n"
    p.send_signal(signal.SIGINT)
    assert p.wait(20) == -signal.SIGINT  # Python's own KeyboardInterrupt exit, as without the tracer


def test_python_m_pinmon_trace_runs_a_script_and_a_module(report_dir, tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import sys, os, pinmon.trace as t\n"
                      "before = t.installed()\n"
                      "import cupy\n"
                      "print(__name__, sys.argv, before, t.installed(), sys.path[0] == os.path.dirname(__file__))\n"
                      "sys.exit(5)\n")
    r = subprocess.run([sys.executable, "-m", "pinmon.trace", "--", str(script), "a", "b"],
                       env=env(report_dir, PYTHONPATH=FAKES), capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 5 and r.stdout == f"__main__ ['{script}', 'a', 'b'] False True True\n", r.stderr
    (tmp_path / "mymod.py").write_text("import sys, cupy, pinmon.trace as t\n"
                                       "print(__name__, sys.argv[1:], t.installed())\n")
    r = subprocess.run([sys.executable, "-P", "-m", "pinmon.trace", "-m", "mymod", "x"],
                       env=env(report_dir, PYTHONPATH=os.pathsep.join([ROOT, FAKES])), capture_output=True,
                       text=True, cwd=str(tmp_path))
    assert r.returncode == 0 and r.stdout == "__main__ ['x'] True\n", r.stderr


def test_install_is_idempotent_and_imports_neither_torch_nor_cupy(report_dir):
    prog = ("import sys, pinmon.trace as t\n"
            "a = t.install(); b = t.install()\n"
            "print(a, b, 'torch' in sys.modules, 'cupy' in sys.modules, len(sys.meta_path))\n")
    r = subprocess.run([sys.executable, "-c", prog], env=env(report_dir), capture_output=True, text=True, cwd=ROOT)
    first = r.stdout.split()
    assert first[:4] == ["True", "True", "False", "False"], r.stderr


def test_a_fake_cupy_program_under_pinmon_trace_reports_its_allocations(report_dir):
    prog = ("import os, time, cupy\nrt = cupy.cuda.runtime\n"
            "ps = [rt.hostAlloc(4096, 0) for _ in range(50)]\nprint(os.getpid())\n")
    e = env(report_dir, PYTHONPATH=FAKES)
    r = subprocess.run([sys.executable, "-m", "pinmon", "trace", "--", sys.executable, "-c", prog],
                       env=e, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    data = json.load(open(os.path.join(report_dir, f"{int(r.stdout)}.json")))
    assert data["allocs"]["count"] == 50 and data["pinned"]["bytes"] == 50 * 4096
    assert data["call_sites"]["alloc"][0]["site"] == "<string>:3"


def test_the_bootstrap_runs_the_sitecustomize_it_shadows(report_dir, tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['THEIR_SITECUSTOMIZE'] = 'ran'\n")
    e = env(report_dir, PYTHONPATH=os.pathsep.join([str(tmp_path), FAKES]))
    r = subprocess.run([*pinmon_cmd(), "trace", "--", sys.executable, "-c",
                        "import os, sys, cupy, pinmon.trace as t; print(os.environ.get('THEIR_SITECUSTOMIZE'),"
                        " t.installed(), sys.modules['sitecustomize'].__file__)"],
                       env=e, capture_output=True, text=True, cwd=str(tmp_path), timeout=60)
    assert r.returncode == 0 and programs_stderr(r) == "", r.stderr
    ran, installed, _ = r.stdout.split()
    assert (ran, installed) == ("ran", "True")


def test_a_forked_child_reports_as_itself(report_dir):
    # The child waits (30 s at most) for its own first report, then leaves without the exit's report.
    prog = ("import os, sys, time, json\nimport pinmon.trace as t\nt.install()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    mine, end = os.path.join(os.environ['PINMON_TRACE_DIR'], f'{os.getpid()}.json'), time.monotonic() + 30\n"
            "    while not os.path.exists(mine) and time.monotonic() < end:\n        time.sleep(0.02)\n"
            "    os._exit(0 if t.writer().pid == os.getpid() else 1)\n"
            "_, status = os.waitpid(pid, 0)\nprint(pid, os.waitstatus_to_exitcode(status))\n")
    r = subprocess.run([sys.executable, "-c", prog], env=env(report_dir, PYTHONPATH=ROOT),
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    child, code = r.stdout.split()
    assert code == "0", r.stderr
    assert os.path.exists(os.path.join(report_dir, f"{child}.json"))
