"""The package starts no command through a shell (``shell=True``, ``os.system``, ``os.popen``...):
nothing a user names or writes can become a shell command line."""
import os
import re

import pytest

pytestmark = pytest.mark.hardening

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pinmon")
SHELL = re.compile(r"shell\s*=\s*True|os\.system\s*\(|os\.popen\s*\(|commands\.getoutput|pty\.spawn\s*\(\s*['\"]")


def test_no_shell_commands_anywhere_in_the_package():
    hits = []
    for d, _dirs, files in os.walk(PKG):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(d, name)
                with open(path, encoding="utf-8") as f:
                    for n, line in enumerate(f, 1):
                        if SHELL.search(line):
                            hits.append(f"{os.path.relpath(path, PKG)}:{n}: {line.strip()}")
    assert hits == []
