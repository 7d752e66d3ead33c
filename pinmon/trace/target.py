"""Which Python a traced command runs, and whether the CUPTI engine can load there.

The tracer runs inside the traced program's interpreter and imports ``cupti-python`` from *that*
environment, not pinmon's: ``pinmon trace`` installed in one venv, the job in another (or a conda
env) needs ``cupti-python`` in the job's. ``check(cmd, environ)`` finds the interpreter (CMD itself
when it is ``python``/``python3.X``, the interpreter a script's ``#!`` line names, or the first
interpreter among a launcher's arguments: ``mpirun -np 2 python3 train.py``), asks it in a short
subprocess (``CHECK_TIMEOUT_S``) whether it can import ``cupti`` (and has what ``cupti-python``
requires) and which CUDA wheels it has, and returns the one line ``pinmon trace`` prints: the engine
the program will get and, where CUPTI is missing, the pip command to run with that interpreter. A
command that is no Python program (``sleep``, a shell script) gets a line saying what the tracer does
for it; a check that fails says so. Without an NVIDIA driver, nothing is said of CUPTI.

The subprocess imports nothing of CUDA: it looks modules up (``importlib.util.find_spec``) and reads
installed distributions' versions. Root runs it, often in a directory others write, so it imports
nothing from the working directory or the environment's path: see ``CHECK_CODE``.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field

CHECK_TIMEOUT_S = 5.0
MIN_PYTHON = (3, 10)        # pinmon's own requires-python: the tracer runs inside that interpreter
CUDA13_DRIVER_BRANCH = 580  # CUDA 13 needs an R580 driver or later
CUPTI12_DRIVER_BRANCH = 550  # cupti-python 12.8 refuses drivers older than CUDA 12.4 (R550)
# What each CUPTI major needs, pinned to the versions run on the test machine (pyproject's extras
# cupti12 and cupti13 say the same; tests/trace/test_target.py checks that they agree).
CUPTI_PIP = {
    13: ("cupti-python==13.0.1", "cuda-bindings>=13.0,<13.1", "nvidia-cuda-cupti>=13.0,<13.1"),
    12: ("cupti-python==12.8.0", "cuda-bindings==12.8.0", "nvidia-cuda-cupti-cu12==12.8.90"),
}
# Distributions that tell which CUDA major a Python environment's libraries are built for.
CUDA_WHEELS = {12: ("nvidia-cuda-runtime-cu12", "nvidia-cuda-cupti-cu12", "cupy-cuda12x", "jax-cuda12-plugin"),
               13: ("cupy-cuda13x", "jax-cuda13-plugin")}
VERSIONED_WHEELS = ("nvidia-cuda-runtime", "nvidia-cuda-cupti", "cuda-bindings")  # major = version's
_DISTS = ("cupti-python",) + VERSIONED_WHEELS + tuple(d for ds in CUDA_WHEELS.values() for d in ds)
_PYTHON_NAME = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?([dmu]|-dbg)?$")
_ISOLATING = {"I": "-I", "E": "-E", "S": "-S"}  # options that keep sitecustomize or PYTHONPATH out
_OPTS_WITH_VALUE = set("WXcm")
SHELLS = frozenset(("sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox"))

# Runs as root in the program's interpreter, so it must run nothing that the caller's working
# directory or environment could plant: it starts with -E -s (no PYTHONPATH, PYTHONHOME, PYTHONSTARTUP
# or user site; both exist in every Python, unlike -P) in "/", and drops the working directory's entry
# before its first import. What the program's environment adds to the path (PYTHONPATH, the user site)
# comes in argv[1] as JSON and is only searched, as data: a module's spec is looked up, a
# distribution's metadata read, nothing there is imported.
CHECK_CODE = """
import sys
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]
import json, os, re
out = {"version": list(sys.version_info[:3])}
try:
    import importlib.machinery, importlib.util, importlib.metadata as md
    extra = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    added = [p for p in extra.get("path", []) if isinstance(p, str)]
    if extra.get("user_site") and sys.prefix == getattr(sys, "base_prefix", sys.prefix):
        import site
        added.append(site.getusersitepackages())
    search = added + [p for p in sys.path if p not in added]
    def spec(name):
        try:
            return importlib.util.find_spec(name) is not None or \\
                importlib.machinery.PathFinder.find_spec(name, added) is not None
        except Exception:
            return False
    def dist(name):
        try:
            return next(iter(md.distributions(name=name, path=search)), None)
        except Exception:
            return None
    def version(name):
        d = dist(name)
        return None if d is None else d.version
    out["cupti"] = spec("cupti")
    out["dists"] = {d: version(d) for d in %r}
    requires = getattr(dist("cupti-python"), "requires", None) or []
    names = [re.match(r"[A-Za-z0-9._-]+", r).group(0) for r in requires if "extra ==" not in r]
    out["cupti_missing"] = [n for n in names if version(n) is None][:8]
except Exception as e:
    out["error"] = type(e).__name__
print(json.dumps(out))
""" % (_DISTS,)  # noqa: UP031  (a program of braces: .format would double each)


@dataclass
class Interpreter:
    """The Python a command runs: its path (as found, not resolved: a venv's python is a link) and
    the options given to it before the program."""
    path: str
    options: list = field(default_factory=list)
    via: str | None = None   # the script whose #! line names it


def command_path(name: str, environ: dict) -> str | None:
    """Where ``name`` is run from: itself when it holds a slash, else the first match in PATH's
    absolute entries. A relative entry (".", an empty one) would find a program in the working
    directory, which root must not run because of a directory others can write."""
    if os.sep in name:
        return name if os.path.isfile(name) else None
    entries = [d for d in environ.get("PATH", os.defpath).split(os.pathsep) if os.path.isabs(d)]
    return shutil.which(name, path=os.pathsep.join(entries)) if entries else None


def relative_path_match(name: str, environ: dict) -> str | None:
    """The relative PATH entry through which ``name`` would have been found, when only such an entry
    has it (so ``command_path`` does not)."""
    if os.sep in name:
        return None
    for d in environ.get("PATH", os.defpath).split(os.pathsep):
        if not os.path.isabs(d) and shutil.which(name, path=d or ".") is not None:
            return d or "(empty: the working directory)"
    return None


_which = command_path


def is_python_name(path: str) -> bool:
    return bool(_PYTHON_NAME.match(os.path.basename(path)))


def _shebang(path: str) -> list[str] | None:
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def find_interpreter(cmd: list, environ: dict) -> Interpreter | None:
    """The Python interpreter ``cmd`` starts directly, or None when it is not one (or not found)."""
    if not cmd:
        return None
    exe = _which(cmd[0], environ)
    if exe is None:
        return None
    if is_python_name(exe):
        return Interpreter(exe, _leading_options(cmd[1:]))
    words = _shebang(exe)
    if not words:
        return None
    interp, rest = words[0], words[1:]
    if os.path.basename(interp) == "env":
        while rest and (rest[0].startswith("-") or "=" in rest[0]):  # env's own -S, VAR=value
            rest = rest[1:]
        if not rest:
            return None
        interp, rest = rest[0], rest[1:]
        found = _which(interp, environ)
        if found is None:
            return None
        interp = found
    if not is_python_name(interp):
        return None
    return Interpreter(interp, _leading_options(rest), via=exe)


def _leading_options(args: list) -> list:
    """The interpreter options before the program (script, -c or -m)."""
    out = []
    it = iter(args)
    for a in it:
        if not a.startswith("-") or a in ("-", "--"):
            break
        out.append(a)
        if a.startswith("--"):
            continue
        letters = a[1:]
        for i, ch in enumerate(letters):
            if ch in _OPTS_WITH_VALUE:
                if ch in "cm":
                    return out
                if i == len(letters) - 1:
                    out.append(next(it, ""))  # the value is the next argument
                break
    return out


def isolating_option(options: list) -> str | None:
    """The first of -I, -E, -S among ``options``: with it the tracer's bootstrap does not run."""
    for a in options:
        if a.startswith("--") or not a.startswith("-"):
            continue
        for ch in a[1:]:
            if ch in _OPTS_WITH_VALUE:
                break
            if ch in _ISOLATING:
                return _ISOLATING[ch]
    return None


def search_path_of(environ: dict, cwd: str | None = None) -> dict:
    """What the program's environment adds to its module search path, for ``CHECK_CODE`` to search as
    data: PYTHONPATH's entries (relative ones, and the empty one, against the caller's directory, as
    the program will resolve them) and whether the user site applies."""
    here = os.getcwd() if cwd is None else cwd
    raw = environ.get("PYTHONPATH", "")  # set but empty: no entry; an empty entry in it: the directory
    entries = [os.path.join(here, p) for p in raw.split(os.pathsep)] if raw else []
    return {"path": [os.path.normpath(p) for p in entries][:64], "user_site": not environ.get("PYTHONNOUSERSITE")}


def probe_interpreter(path: str, environ: dict, timeout_s: float = CHECK_TIMEOUT_S) -> dict:
    """What ``path`` says of itself (``CHECK_CODE``), or {"error": why} when it does not answer."""
    env = dict(environ)
    env["PINMON_TRACE"] = "0"
    try:
        r = subprocess.run([os.path.abspath(path), "-E", "-s", "-c", CHECK_CODE, json.dumps(search_path_of(environ))],
                           env=env, cwd="/", stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"it did not answer within {timeout_s:g} s"}
    except OSError as e:
        return {"error": f"it did not start ({e.strerror or e})"}
    try:
        out = json.loads(r.stdout[-65536:].decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"it exited {r.returncode} without an answer"}
    return out if isinstance(out, dict) else {"error": "it gave no answer"}


DRIVER_VERSION_FILE = "/proc/driver/nvidia/version"


def driver_loaded(path: str = DRIVER_VERSION_FILE) -> bool:
    """Whether the NVIDIA kernel module is loaded (it makes this file): without it no CUDA runs, and
    so no CUPTI."""
    return os.path.exists(path)


def driver_branch(path: str = DRIVER_VERSION_FILE) -> int | None:
    """The NVIDIA driver's branch (580 for 580.159), from the kernel module's version file."""
    try:
        with open(path, "rb") as f:
            text = f.read(4096).decode("ascii", "replace")
    except OSError:
        return None
    m = re.search(r"\b(\d{3,4})\.\d+(\.\d+)?\b", text)
    return int(m.group(1)) if m else None


def _major(version: object) -> int | None:
    try:
        return int(str(version).split(".")[0])
    except (TypeError, ValueError):
        return None


def cupti_major(dists: dict, branch: int | None) -> int:
    """Which CUPTI major to install: the CUDA major of the environment's CUDA wheels when they name
    one, else the newest the driver runs (13 where the driver is unknown)."""
    majors = set()
    for major, names in CUDA_WHEELS.items():
        if any(dists.get(n) for n in names):
            majors.add(major)
    for name in VERSIONED_WHEELS:
        m = _major(dists.get(name))
        if m in CUPTI_PIP:
            majors.add(m)
    driver_major = None if branch is None else (13 if branch >= CUDA13_DRIVER_BRANCH else 12)
    if len(majors) == 1:
        m = majors.pop()
        return 12 if driver_major == 12 else m
    return driver_major or 13


def pip_line(python: str, major: int) -> str:
    return f"{shlex.quote(python)} -m pip install " + " ".join(shlex.quote(p) for p in CUPTI_PIP[major])


def _script_interpreter(exe: str) -> str | None:
    """The program a script's ``#!`` line names (``bash``), or None when ``exe`` is no script."""
    words = _shebang(exe)
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        rest = [w for w in words[1:] if not (w.startswith("-") or "=" in w)]
        return os.path.basename(rest[0]) if rest else "env"
    return os.path.basename(words[0])


def not_python_line(cmd: list, environ: dict) -> str:
    """What ``pinmon trace`` can do for a command that is no Python program: trace the Python programs
    it starts, never the command itself; the first of them speaks up if CUPTI does not start there."""
    name = os.path.basename(cmd[0])
    exe = _which(cmd[0], environ)
    shell = _script_interpreter(exe) if exe else None
    what = f"{name} is a {shell} script, not a Python program" if shell else f"{name} is not a Python program"
    itself = "" if shell else f", never {name} itself"
    return (f"{what}: the tracer runs inside Python programs that import a CUDA library, so it traces any "
            f"that {name} starts (the first one says so if CUPTI does not start there){itself}")


def _python_started_by(cmd: list, environ: dict) -> list | None:
    """``cmd`` from its first argument that is a Python interpreter, for launchers that take the program
    as arguments (``mpirun -np 2 python3 train.py``, ``env X=1 python3 ...``); None when there is none,
    or when ``cmd`` is a shell or a script, whose arguments say nothing of what it runs."""
    exe = _which(cmd[0], environ)
    if exe is None or os.path.basename(exe) in SHELLS or _script_interpreter(exe) is not None:
        return None
    for i, word in enumerate(cmd[1:64], start=1):
        if is_python_name(word) and _which(word, environ) is not None:
            return cmd[i:]
    return None


def check(cmd: list, environ: dict, branch: int | None = None,
          probe: Callable[[str, dict], dict] = probe_interpreter, driver: bool = True) -> tuple[str, str | None]:
    """(the line to print, the engine expected: "cupti", "hooks" or None when unknown) for ``cmd``
    run with the ``auto`` or ``cupti`` engine; ``branch``: the driver's (``driver_branch``); ``driver``:
    whether one is loaded (``driver_loaded``). Without a driver nothing is said of CUPTI, which cannot
    start there: the program's own error says there is no GPU."""
    if not cmd or _which(cmd[0], environ) is None:
        return "", None  # nothing to run: exec says so
    interp = find_interpreter(cmd, environ)
    if interp is None:
        started = _python_started_by(cmd, environ)
        if started is None:
            return not_python_line(cmd, environ), None
        return check(started, environ, branch, probe, driver)
    py = interp.path
    iso = isolating_option(interp.options)
    if iso:
        return (f"no tracer: {os.path.basename(py)} {iso} does not run pinmon's bootstrap; "
                f"use python -P -m pinmon.trace with pinmon installed in that environment", None)
    info = probe(py, environ)
    if "error" in info:
        return ("", None) if not driver else (f"cannot tell whether {py} has cupti-python: {info['error']}", None)
    version = tuple(info.get("version") or ())
    if version and version[:2] < MIN_PYTHON:
        return (f"no tracer: {py} is Python {'.'.join(map(str, version[:3]))}; "
                f"pinmon's tracer needs {'.'.join(map(str, MIN_PYTHON))} or later", None)
    if not driver:
        return "", "hooks"
    found = info.get("dists")
    dists: dict = found if isinstance(found, dict) else {}
    major = cupti_major(dists, branch)
    if not info.get("cupti"):
        if branch is not None and branch < CUPTI12_DRIVER_BRANCH:
            return (f"engine hooks: {py} has no cupti-python, and the one pinmon knows to work (12.8) needs an "
                    f"R{CUPTI12_DRIVER_BRANCH} or later driver; this one is R{branch}", "hooks")
        return (f"engine hooks: {py} has no cupti-python; for the CUPTI engine run {pip_line(py, major)}",
                "hooks")
    have = dists.get("cupti-python")
    have_major = _major(have)
    if have_major == 13 and branch is not None and branch < CUDA13_DRIVER_BRANCH:
        return (f"engine hooks: {py} has cupti-python {have}, which needs a CUDA 13 driver (R580 or "
                f"later; this one is R{branch}); for the CUPTI engine run {pip_line(py, 12)}", "hooks")
    missing = [str(n)[:60] for n in info.get("cupti_missing") or []][:8]
    if missing:
        return (f"engine hooks: {py} has cupti-python {have} without {', '.join(missing)}; "
                f"run {pip_line(py, have_major if have_major in CUPTI_PIP else major)}", "hooks")
    return (f"engine cupti where CUPTI starts: {py} has cupti-python {have or '(version unknown)'}", "cupti")
