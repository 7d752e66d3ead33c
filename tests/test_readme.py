"""The README's test command is the one CI runs, and every CLI command is documented."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def test_ci_runs_the_readme_test_command():
    readme = read("README.md")
    block = readme.split("TEST-COMMAND", 1)[1]
    cmd = re.search(r"```\n(.+?)\n```", block, re.S).group(1).strip()
    ci_lines = [l.strip() for l in read(".ci/run").splitlines()]
    assert cmd in ci_lines


def test_every_command_is_in_the_readme():
    from pinmon.cli.commands import COMMANDS

    readme = read("README.md")
    for name in COMMANDS:
        assert f"`pinmon {name}" in readme, name
