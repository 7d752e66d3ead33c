"""``pinmon trace [--] CMD [ARGS...]``: run a program with pinmon's in-process tracer injected.

The command replaces pinmon (``exec``), so its exit code, output and signals are the program's own.
The tracer gets in through the environment: ``PYTHONPATH`` starts with ``pinmon/trace/bootstrap``,
whose ``sitecustomize`` waits, in every Python interpreter the command starts (also through a shell
script, ``torchrun`` or a child process), for the first import of a CUDA library, starts the tracer
then, and runs the ``sitecustomize`` it shadows. An interpreter that imports none is left as it was.
Interpreters started with ``-I``, ``-E`` or ``-S`` skip that hook: use ``python -P -m pinmon.trace
prog.py`` there (with pinmon installed in that environment).

Before the program starts:
- the report directory is checked (and created 0700 when missing): when reports cannot be written
  there (no parent directory, a symlink, another user's directory, a mode open to others) one warning
  line on stderr says why. The program runs all the same.
- with the ``auto`` or ``cupti`` engine, the program's interpreter is checked (``pinmon.trace.target``):
  one line says the engine it will get and, where ``cupti-python`` is missing from that interpreter's
  environment, the pip command that installs it there. A command that is no Python program gets a line
  saying so (only the Python programs it starts are traced); without an NVIDIA driver nothing is said of
  CUPTI, which cannot start there. The traced process adds a line only when what
  it gets differs (CUPTI taken by another tool, say).

``--engine`` (default: ``$PINMON_TRACE_ENGINE``, else ``auto``) picks CUPTI or the hooks; a value of
that variable that names no engine is refused (exit 2).
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from ...units import printable
from ..common import UsageError
from ..options import Settings, shared
from ..parser import Commands


def add_parser(sub: Commands) -> None:
    p = sub.add_parser(
        "trace", parents=shared("config"),
        help="run a Python GPU program with the in-process tracer (exact per-process figures)",
        description="Run CMD with pinmon's in-process tracer: every Python process it starts that imports "
                    "a CUDA library (CuPy, PyTorch, JAX, numba.cuda, cuda-python, ...) reports its pinned "
                    "allocations and host<->device copies every 0.5 s to the per-user report directory, "
                    "where pinmon, pinmon check and the exporter show it as 'traced'. Exit code, output "
                    "and signals are CMD's own.")
    p.add_argument("--dir", metavar="DIR", dest="trace_dir", default=None,
                   help="report directory (default $XDG_RUNTIME_DIR/pinmon, else /tmp/pinmon-UID)")
    p.add_argument("--engine", choices=("auto", "cupti", "hooks"), default=None,
                   help="cupti: every library's copies and pinned allocations through NVIDIA CUPTI "
                        "(needs cupti-python in the program's Python environment; pinmon says which pip "
                        "command installs it there); hooks: CuPy/PyTorch calls only; auto (default): "
                        "CUPTI where it initialises, else the hooks")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="CMD",
                   help="the command, e.g. -- python train.py --epochs 3")


def bootstrap_dir() -> str:
    from ... import trace

    return os.path.join(os.path.dirname(os.path.abspath(trace.__file__)), "bootstrap")


def traced_env(environ: Mapping[str, str] | None = None, trace_dir: str | None = None,
               engine: str | None = None) -> dict[str, str]:
    """The environment that injects the tracer into Python processes."""
    env = dict(os.environ if environ is None else environ)
    boot = bootstrap_dir()
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != boot]
    env["PYTHONPATH"] = os.pathsep.join([boot, *parts])
    import pinmon

    env["PINMON_TRACE_PKG_DIR"] = os.path.dirname(os.path.dirname(os.path.abspath(pinmon.__file__)))
    env.pop("PINMON_TRACE", None)
    env.pop("PINMON_TRACE_EXPECT", None)
    if trace_dir:
        env["PINMON_TRACE_DIR"] = os.path.abspath(trace_dir)
    if engine:
        env["PINMON_TRACE_ENGINE"] = engine
    env["PINMON_TRACE_ANNOUNCE"] = "1"
    return env


def say_engine(cmd: list[str], environ: dict[str, str], env: dict[str, str]) -> None:
    """The one line on the engine the program will get (``pinmon.trace.target``); where that is known,
    the traced process speaks up only if it gets another."""
    from ...trace.target import check, driver_branch, driver_loaded

    try:
        line, expected = check(cmd, environ, branch=driver_branch(), driver=driver_loaded())
    except Exception as e:  # the check is advice: it never stops the program
        line, expected = f"cannot tell which engine the program will get ({type(e).__name__})", None
    if line:
        print(f"pinmon trace: {printable(line, 400)}", file=sys.stderr)
    if expected:
        env["PINMON_TRACE_EXPECT"] = expected


def run(args: argparse.Namespace, settings: Settings) -> int:
    cmd = list(args.cmd)  # everything from CMD on, as given (parser.CliParser: never parsed by pinmon)
    if not cmd:
        raise UsageError("trace: no command given (pinmon trace -- python train.py ...)")
    from ...trace import bad_engine_env, engine_mode

    if args.engine is None:
        bad = bad_engine_env()
        if bad:
            raise UsageError(f"trace: {bad}")
    engine = engine_mode(args.engine)
    env = traced_env(trace_dir=args.trace_dir, engine=args.engine)
    from ...trace.report_file import warn_if_unusable

    warn_if_unusable(env.get("PINMON_TRACE_DIR"), "pinmon: trace")
    if engine != "hooks":
        say_engine(cmd, dict(os.environ), env)
    sys.stdout.flush()
    sys.stderr.flush()
    from ...trace.target import command_path, relative_path_match

    exe = command_path(cmd[0], env)
    if exe is None:
        relative = relative_path_match(cmd[0], env)
        why = (f"found only through PATH's relative entry {relative!r}; give its path (./{cmd[0]}) to run it"
               if relative else "No such file or directory")
        print(f"pinmon: trace: cannot run {printable(repr(cmd[0]), 200)}: {printable(why, 300)}", file=sys.stderr)
        return 127
    try:
        os.execve(exe, cmd, env)
    except OSError as e:
        print(f"pinmon: trace: cannot run {printable(repr(cmd[0]), 200)}: {e.strerror or e}", file=sys.stderr)
        return 127 if isinstance(e, FileNotFoundError) else 126
    return 0  # pragma: no cover - exec does not return
