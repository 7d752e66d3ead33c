"""A run that leaves new ``pinmon-*`` entries in the system's temporary directory fails: a test uses
``tmp_path`` or removes what it made. Entries that were there before the run are not counted, nor
entries of other users: a user's tracer makes ``/tmp/pinmon-<uid>`` whenever it runs, on a shared box
in the middle of a test run too, and the tests make theirs as the user who runs them.

The check is made once, by the process that runs the whole session (pytest alone, or the xdist
controller after every worker has finished): a worker that finished early would otherwise count an
entry that a test on another worker has made and not yet removed.
"""
from __future__ import annotations

import glob
import os
import sys
import tempfile

import pytest

_BEFORE = pytest.StashKey[set]()


def pinmon_temp_entries(uid: int | None = None) -> set:
    """The ``pinmon-*`` entries of the temporary directory that ``uid`` (default: this process's
    effective uid) owns."""
    uid = os.geteuid() if uid is None else uid
    out = set()
    for path in glob.glob(os.path.join(tempfile.gettempdir(), "pinmon-*")):
        try:
            if os.lstat(path).st_uid == uid:
                out.add(path)
        except OSError:  # removed while we looked: not left behind
            pass
    return out


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionstart(session):
    if not _is_worker(session.config):
        session.config.stash[_BEFORE] = pinmon_temp_entries()


def pytest_sessionfinish(session, exitstatus):
    before = session.config.stash.get(_BEFORE, None)
    if before is None:
        return
    left = sorted(pinmon_temp_entries() - before)
    if not left:
        return
    message = (f"the tests left {len(left)} pinmon-* entries in {tempfile.gettempdir()}:"
               f" {', '.join(left[:5])}")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(message, red=True, bold=True)
    else:
        print(message, file=sys.stderr)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
