"""A run that leaves new ``pinmon-*`` entries in the system's temporary directory fails: a test uses
``tmp_path`` or removes what it made. Entries that were there before the run are not counted.

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


def pinmon_temp_entries() -> set:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "pinmon-*")))


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
