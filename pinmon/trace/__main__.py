"""``python -P -m pinmon.trace [--] prog.py args...`` or ``python -P -m pinmon.trace -m module args...``.

Runs the program as ``python prog.py`` would (``runpy``, ``sys.argv`` set to the program's, its
directory first on ``sys.path``) with the tracer started when it first imports a CUDA library. Its
exit code, output and signal handling are its own: ``SystemExit`` propagates, an exception prints its
usual traceback.

``python -m`` puts the working directory first on ``sys.path``, so in a directory other users can
write (``/tmp``) their ``pinmon/__init__.py`` would run in place of pinmon: use ``pinmon trace --``
or ``python -P -m pinmon.trace`` (``-P``: no working directory on the path, Python 3.11+). When pinmon
itself was imported from such a directory, this module refuses with one line (exit 2). The package
(``pinmon/trace/__init__.py``) takes the working directory off ``sys.path`` before it imports anything,
so a module there cannot stand in for one the tracer imports.
"""
from __future__ import annotations

import os
import runpy
import sys

USAGE = "usage: python -P -m pinmon.trace [--] PROG.py [ARGS...] | -m MODULE [ARGS...]\n"


def imported_from_unsafe_cwd(cwd_entry: str | None, package_file: str, cwd: str) -> str | None:
    """Why pinmon, imported from ``package_file``, came from a working directory that other users can
    write (so it may not be pinmon at all), or None. ``cwd_entry``: the working directory's entry
    that ``python -m`` put on ``sys.path`` (None: it put none, as with ``-P``)."""
    if cwd_entry is None:
        return None
    try:
        pkg_parent = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(package_file))))
        here = os.path.realpath(cwd)
        if pkg_parent != here:
            return None
        st = os.stat(here)
    except OSError:
        return None
    if st.st_mode & 0o022 or st.st_uid not in (os.geteuid(), 0):
        who = "other users" if st.st_mode & 0o022 else f"uid {st.st_uid}"
        return f"pinmon was imported from the working directory {here}, which {who} can write"
    return None


def main(argv: list[str]) -> None:
    import pinmon
    import pinmon.trace

    from ..units import printable

    unsafe = imported_from_unsafe_cwd(pinmon.trace.PYTHON_M_CWD_ENTRY, pinmon.__file__, os.getcwd())
    if unsafe:
        sys.stderr.write(f"pinmon.trace: refusing to run: {printable(unsafe, 300)}; "
                         "use pinmon trace -- CMD, or python -P -m pinmon.trace\n")
        raise SystemExit(2)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        sys.stderr.write(USAGE)
        raise SystemExit(0 if argv else 2)
    import pinmon.trace
    from pinmon.trace.report_file import warn_if_unusable

    bad = pinmon.trace.bad_engine_env()
    if bad:
        sys.stderr.write(f"pinmon.trace: {bad}\n")
        raise SystemExit(2)
    warn_if_unusable(os.environ.get("PINMON_TRACE_DIR") or None, "pinmon.trace")
    os.environ.setdefault("PINMON_TRACE_ANNOUNCE", "1")  # one line saying which engine runs
    if argv[0] == "-m":
        if len(argv) < 2:
            sys.stderr.write(USAGE)
            raise SystemExit(2)
        sys.argv = argv[1:]
        sys.path.insert(0, os.getcwd())  # as python -m MODULE does
        pinmon.trace.start_on_cuda_import()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        # python prog.py puts the program's directory first on sys.path.
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        pinmon.trace.start_on_cuda_import()
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
