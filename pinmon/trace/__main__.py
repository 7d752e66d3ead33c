"""``python -m pinmon.trace [--] prog.py args...`` or ``python -m pinmon.trace -m module args...``.

Runs the program as ``python prog.py`` would (``runpy``, ``sys.argv`` set to the program's, its
directory first on ``sys.path``) with the tracer installed. Its exit code, output and signal
handling are its own: ``SystemExit`` propagates, an exception prints its usual traceback.
"""
from __future__ import annotations

import os
import runpy
import sys

USAGE = "usage: python -m pinmon.trace [--] PROG.py [ARGS...] | -m MODULE [ARGS...]\n"


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        sys.stderr.write(USAGE)
        raise SystemExit(0 if argv else 2)
    import pinmon.trace
    from pinmon.trace.report import warn_if_unusable

    warn_if_unusable(os.environ.get("PINMON_TRACE_DIR") or None, "pinmon.trace")
    os.environ.setdefault("PINMON_TRACE_ANNOUNCE", "1")  # one line saying which engine runs
    if argv[0] == "-m":
        if len(argv) < 2:
            sys.stderr.write(USAGE)
            raise SystemExit(2)
        sys.argv = argv[1:]
        sys.path.insert(0, os.getcwd())
        pinmon.trace.install()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        # python prog.py puts the program's directory first on sys.path, not ours.
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        pinmon.trace.install()
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
