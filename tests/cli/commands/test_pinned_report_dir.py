"""``pinmon pinned`` says when its own trace report directory is unusable (open to others): the
reader's notice reaches the command's output, so a user sees why no traced figures appear."""
import json
import os

import pytest

from pinmon.cli import main

pytestmark = pytest.mark.hardening


def test_pinned_says_when_its_own_report_directory_is_unusable(tmp_path, monkeypatch, capsys):
    d = tmp_path / "open"
    d.mkdir()
    os.chmod(d, 0o755)
    monkeypatch.setenv("PINMON_TRACE_DIR", str(d))
    assert main(["pinned", "--pid", str(os.getpid()), "--json"]) == 0
    notices = json.loads(capsys.readouterr().out)["notices"]
    assert f"trace reports: {d} has mode 755, not 700: its reports are not read" in notices
