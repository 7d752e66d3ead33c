"""``pinmon trace``'s check of the program's interpreter: which interpreter a command runs, what it
says of itself, which CUPTI major to install there and the one line printed."""
import glob
import os
import subprocess
import sys

import pytest

from pinmon.trace import target as T

from .conftest import pinmon_cmd
from .test_command import ROOT, env

FAKECUPTI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakecupti")
PY = sys.executable


def script(tmp_path, name, text, mode=0o755):
    p = tmp_path / name
    p.write_text(text)
    os.chmod(p, mode)
    return str(p)


def test_the_interpreter_of_a_command(tmp_path):
    e = dict(os.environ, PATH=f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    assert T.find_interpreter([PY, "train.py"], e).path == PY
    assert T.find_interpreter([PY, "-u", "-W", "error", "-X", "dev", "train.py", "-I"], e).options == \
        ["-u", "-W", "error", "-X", "dev"]
    s = script(tmp_path, "torchrun", f"#!{PY}\nprint()\n")
    found = T.find_interpreter(["torchrun", "--nproc", "2"], e)
    assert (found.path, found.via) == (PY, s)
    os.symlink(PY, tmp_path / "python3.99")
    script(tmp_path, "envrun", "#!/usr/bin/env -S python3.99 -I\n")
    found = T.find_interpreter(["envrun"], e)
    assert found.path == str(tmp_path / "python3.99") and found.options == ["-I"]
    script(tmp_path, "job.sh", "#!/bin/bash\npython3 train.py\n")
    assert T.find_interpreter(["job.sh"], e) is None
    assert T.find_interpreter(["sh", "-c", "python3 x.py"], e) is None
    assert T.find_interpreter(["no-such-command"], e) is None


@pytest.mark.parametrize("options, flag", [
    (["-I"], "-I"), (["-u", "-E"], "-E"), (["-sS"], "-S"), (["-W", "error"], None), (["-WE"], None),
    (["-X", "importtime"], None), (["--check-hash-based-pycs", "never"], None), ([], None)])
def test_options_that_keep_the_bootstrap_out(options, flag):
    assert T.isolating_option(T._leading_options(options + ["prog.py"])) == flag


@pytest.mark.parametrize("dists, branch, major", [
    ({}, None, 13), ({}, 580, 13), ({}, 570, 12),
    ({"nvidia-cuda-runtime-cu12": "12.8.90"}, 580, 12),        # a CUDA 12 job on an R580 driver
    ({"cupy-cuda12x": "13.4"}, None, 12),
    ({"cuda-bindings": "13.0.3", "nvidia-cuda-cupti": "13.0.85"}, None, 13),
    ({"cupy-cuda13x": "14.2"}, 570, 12),                        # CUDA 13 cannot run there anyway
    ({"cupy-cuda12x": "13.4", "cupy-cuda13x": "14.2"}, 580, 13),  # both: the driver decides
])
def test_which_cupti_major_to_install(dists, branch, major):
    assert T.cupti_major(dists, branch) == major


def test_the_pip_lines_are_the_extras():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert list(T.CUPTI_PIP[13]) == extras["cupti13"] and list(T.CUPTI_PIP[12]) == extras["cupti12"]
    assert T.pip_line("/opt/my env/bin/python", 12) == (
        "'/opt/my env/bin/python' -m pip install cupti-python==12.8.0 cuda-bindings==12.8.0 "
        "nvidia-cuda-cupti-cu12==12.8.90")


def test_driver_branch(tmp_path):
    f = tmp_path / "version"
    f.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n"
                 "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    assert T.driver_branch(str(f)) == 580
    f.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n")
    assert T.driver_branch(str(f)) == 535
    assert T.driver_branch(str(tmp_path / "none")) is None


def fake_probe(**answer):
    return lambda path, environ: dict({"version": [3, 12, 3], "cupti": False, "dists": {}}, **answer)


def test_the_line_for_each_case(tmp_path):
    e = dict(os.environ)
    line, expect = T.check([PY, "x.py"], e, 580, probe=fake_probe(
        cupti=True, dists={"cupti-python": "13.0.1", "cuda-bindings": "13.0.3"}))
    assert (line, expect) == (f"engine cupti where CUPTI starts: {PY} has cupti-python 13.0.1", "cupti")
    line, expect = T.check([PY, "x.py"], e, 580, probe=fake_probe(dists={"nvidia-cuda-runtime-cu12": "12.8"}))
    assert expect == "hooks" and line == (f"engine hooks: {PY} has no cupti-python; for the CUPTI engine run "
                                          f"{T.pip_line(PY, 12)}")
    line, expect = T.check([PY], e, 535, probe=fake_probe())
    assert expect == "hooks" and "needs an R550 or later driver; this one is R535" in line and "pip" not in line
    line, expect = T.check([PY], e, 570, probe=fake_probe(
        cupti=True, dists={"cupti-python": "13.0.1", "cuda-bindings": "13.0.3"}))
    assert expect == "hooks" and "needs a CUDA 13 driver" in line and "R570" in line and T.pip_line(PY, 12) in line
    line, expect = T.check([PY], e, 580, probe=fake_probe(
        cupti=True, dists={"cupti-python": "12.8.0"}, cupti_missing=["cuda-bindings", "nvidia-cuda-cupti-cu12"]))
    assert expect == "hooks" and "without cuda-bindings, nvidia-cuda-cupti-cu12" in line
    assert T.pip_line(PY, 12) in line
    line, expect = T.check([PY], e, None, probe=fake_probe(version=[3, 8, 10]))
    assert expect is None and line.startswith(f"no tracer: {PY} is Python 3.8.10")
    line, expect = T.check([PY, "-I", "x.py"], e, None, probe=fake_probe())
    assert expect is None and "-I does not run pinmon's bootstrap" in line
    line, expect = T.check([PY], e, None, probe=lambda p, env: {"error": "it did not answer within 5 s"})
    assert expect is None and line == f"cannot tell whether {PY} has cupti-python: it did not answer within 5 s"
    assert T.check(["no-such-command"], e, 580, probe=fake_probe()) == ("", None)


def test_a_command_that_is_no_python_program(tmp_path):
    """``sleep``, a shell or a shell script: said plainly, with what the tracer will and will not do and
    no pip command (which Python it starts, if any, is not known here)."""
    e = dict(os.environ, PATH=f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    for driver in (True, False):
        line, expect = T.check(["sleep", "10"], e, 580, probe=fake_probe(), driver=driver)
        assert expect is None and line == (
            "sleep is not a Python program: the tracer runs inside Python programs that import a CUDA library, "
            "so it traces any that sleep starts (the first one says so if CUPTI does not start there), never "
            "sleep itself")
    line, expect = T.check(["sh", "-c", "python3 x.py"], e, 580, probe=fake_probe())
    assert expect is None and line.startswith("sh is not a Python program") and "pip" not in line
    script(tmp_path, "job.sh", "#!/bin/bash\npython3 train.py\n")
    line, expect = T.check(["job.sh"], e, 580, probe=fake_probe())
    assert expect is None and line.startswith("job.sh is a bash script, not a Python program: ")
    assert "never" not in line and "pip" not in line


def test_a_launcher_is_checked_for_the_python_it_starts(tmp_path):
    e = dict(os.environ, PATH=f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    asked = []
    probe = fake_probe(cupti=True, dists={"cupti-python": "13.0.1"})
    line, expect = T.check(["env", "A=1", PY, "train.py"], e, 580, probe=lambda p, env: asked.append(p) or probe(p, env))
    assert asked == [PY] and expect == "cupti" and line.startswith(f"engine cupti where CUPTI starts: {PY}")
    # A shell's arguments say nothing of what it runs.
    line, expect = T.check(["sh", "-c", 'exec "$0" "$@"', PY, "x.py"], e, 580, probe=probe)
    assert expect is None and line.startswith("sh is not a Python program")


def test_without_a_driver_nothing_is_said_of_cupti():
    """No NVIDIA driver: CUPTI cannot start, so no engine line and no pip command; what holds for any
    engine (an old Python, -I) is still said."""
    e = dict(os.environ)
    assert T.check([PY, "x.py"], e, None, probe=fake_probe(), driver=False) == ("", "hooks")
    line, _ = T.check([PY, "x.py"], e, None, probe=fake_probe(version=[3, 8, 10]), driver=False)
    assert line.startswith(f"no tracer: {PY} is Python 3.8.10")
    assert T.check([PY, "-I", "x.py"], e, None, probe=fake_probe(), driver=False)[0].startswith("no tracer:")
    assert T.check([PY], e, None, probe=lambda p, env: {"error": "x"}, driver=False) == ("", None)
    assert T.driver_loaded("/nonexistent/version") is False


def test_asking_a_real_interpreter(tmp_path):
    info = T.probe_interpreter(PY, dict(os.environ, PYTHONPATH=""))
    assert info["version"][:2] == list(sys.version_info[:2]) and info["cupti"] is False
    assert info["dists"]["cupti-python"] is None
    info = T.probe_interpreter(PY, dict(os.environ, PYTHONPATH=FAKECUPTI))
    assert info["cupti"] is True and info["dists"]["cupti-python"] == "13.0.1" and info["cupti_missing"] == []
    # A cupti-python whose requirements are not installed.
    site = tmp_path / "site"
    meta = site / "cupti_python-12.8.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: cupti-python\nVersion: 12.8.0\n"
                                   "Requires-Dist: cuda-bindings==12.8.0\nRequires-Dist: pytest\n"
                                   "Requires-Dist: sphinx; extra == 'docs'\n")
    info = T.probe_interpreter(PY, dict(os.environ, PYTHONPATH=str(site)))
    assert info["dists"]["cupti-python"] == "12.8.0" and info["cupti_missing"] == ["cuda-bindings"]
    slow = script(tmp_path, "python3", "#!/bin/sh\nsleep 5\n")
    assert T.probe_interpreter(slow, dict(os.environ), timeout_s=0.3) == {"error": "it did not answer within 0.3 s"}
    mute = script(tmp_path, "python", "#!/bin/sh\nexit 7\n")
    assert T.probe_interpreter(mute, dict(os.environ)) == {"error": "it exited 7 without an answer"}


def test_pinmon_trace_prints_the_line_for_a_shell_command_and_a_script(tmp_path):
    d = tmp_path / "reports"
    d.mkdir(mode=0o700)
    r = subprocess.run([*pinmon_cmd(), "trace", "--", "sh", "-c", "echo hi"], env=env(str(d)),
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0 and r.stdout == "hi\n"
    assert r.stderr.startswith("pinmon trace: sh is not a Python program: the tracer runs inside Python programs")
    s = script(tmp_path, "job", f"#!{PY}\nprint('job')\n")
    r = subprocess.run([*pinmon_cmd(), "trace", "--", s], env=env(str(d)), capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0 and r.stdout == "job\n"
    assert r.stderr.startswith(f"pinmon trace: engine hooks: {PY} has no cupti-python") and r.stderr.count("\n") == 1
    r = subprocess.run([*pinmon_cmd(driver=False), "trace", "--", s], env=env(str(d)), capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0 and r.stdout == "job\n" and r.stderr == ""  # no driver: no pip command
    r = subprocess.run([PY, "-m", "pinmon", "trace", "--engine", "hooks", "--", s], env=env(str(d)),
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.stderr == ""  # the hooks need no check


# Modules a planted directory could offer: the check's own imports and what Python itself looks up.
PLANTED = ("json", "re", "os", "site", "sitecustomize", "usercustomize", "importlib", "encodings", "cupti")


def plant(directory, marker):
    """Modules in ``directory`` that, imported, write ``marker``; cupti among them."""
    code = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for name in PLANTED:
        (directory / f"{name}.py").write_text(code)
    return directory


def older_pythons():
    """Interpreters other than this one (where present) that lack -P (older than 3.11) or predate -I."""
    found = []
    for pattern in ("/root/.pyenv/versions/3.8*/bin/python3.8", "/root/.pyenv/versions/3.10*/bin/python3.10",
                    "/root/.pyenv/versions/2.7*/bin/python2.7", "/usr/bin/python3.1[0-9]"):
        found += sorted(glob.glob(pattern))[:1]
    return found


@pytest.mark.parametrize("python", [PY] + older_pythons())
@pytest.mark.parametrize("pythonpath", [None, "", ":", ".", "lib"])
def test_the_check_runs_nothing_from_the_working_directory(tmp_path, monkeypatch, python, pythonpath):
    """Root running ``pinmon trace -- python3 prog.py`` in a directory others write: the check of the
    interpreter imports none of the modules planted there (nor in a relative PYTHONPATH entry)."""
    marker = tmp_path / "ran"
    work, lib = tmp_path / "work", tmp_path / "work" / "lib"
    lib.mkdir(parents=True)
    plant(work, marker), plant(lib, marker)
    monkeypatch.chdir(work)
    environ = dict(os.environ)
    environ.pop("PYTHONPATH", None)
    if pythonpath is not None:
        environ["PYTHONPATH"] = pythonpath
    info = T.probe_interpreter(python, environ)
    assert not marker.exists(), marker.read_text()
    assert info["version"][0] in (2, 3)
    if info["version"][:2] >= [3, 8]:
        assert "error" not in info
        # A cupti the program would import (its PYTHONPATH names the directory) is found, as data.
        assert info["cupti"] is bool(pythonpath)


def test_pinmon_trace_in_a_directory_others_write_runs_nothing_from_it(tmp_path):
    """The form docs/hardening.md calls safe: ``pinmon trace -- python3 /path/prog.py`` run by root in a
    directory holding planted modules; neither the check nor the program imports them."""
    marker = tmp_path / "ran"
    work, prog = tmp_path / "work", tmp_path / "prog"
    work.mkdir(), prog.mkdir()
    plant(work, marker)
    os.chmod(work, 0o1777)
    (prog / "benign.py").write_text("import json, re\nprint(json.dumps('ok'))\n")
    reports = tmp_path / "reports"
    reports.mkdir(mode=0o700)
    # pinmon as its console script starts it: no working directory on its own path.
    pinmon = pinmon_cmd()
    pinmon[-1] = "import sys; del sys.path[0]; " + pinmon[-1]
    r = subprocess.run(pinmon + ["trace", "--", PY, str(prog / "benign.py")], env=env(str(reports)), cwd=work,
                       capture_output=True, text=True, timeout=60)
    assert not marker.exists(), marker.read_text()
    assert r.returncode == 0 and r.stdout == '"ok"\n', r.stderr
    assert "has no cupti-python" in r.stderr


def test_a_relative_path_entry_never_finds_the_command(tmp_path):
    """Root's PATH with "." (or an empty entry) in a directory others write: pinmon trace neither
    checks nor runs the program planted there under the command's name."""
    marker = tmp_path / "ran"
    work = tmp_path / "work"
    work.mkdir()
    for name in ("python3", "mytool"):
        script(work, name, f"#!/bin/sh\necho planted >> {marker}\n")
    reports = tmp_path / "reports"
    reports.mkdir(mode=0o700)
    system_path = os.environ.get("PATH", os.defpath)
    for path in (f".{os.pathsep}{system_path}", f"{os.pathsep}{system_path}", f"{system_path}{os.pathsep}"):
        e = env(str(reports), PATH=path)
        r = subprocess.run([*pinmon_cmd(), "trace", "--", "python3", "-c", "print('real')"], env=e, cwd=work,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout == "real\n", r.stderr  # the python3 of PATH's absolute entries
        r = subprocess.run([*pinmon_cmd(), "trace", "--", "mytool"], env=e, cwd=work, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 127 and "found only through PATH's relative entry" in r.stderr
        assert r.stderr.count("\n") == 1 and "./mytool" in r.stderr
    assert not marker.exists(), marker.read_text()
    assert T.command_path("mytool", {"PATH": "."}) is None and T.command_path(PY, {}) == PY
