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


def test_every_option_is_in_the_readme():
    """Each option of `pinmon` and of every command appears in the README (its Commands section and
    the global options under it), so a new option cannot go undocumented."""
    from pinmon.cli.main import build_parser

    parser = build_parser()
    section = read("README.md").split("## Commands", 1)[1].split("\n## ", 1)[0]
    parsers = [("pinmon", parser)] + [(f"pinmon {n}", p) for n, p in parser.subcommands.items()]
    missing = []
    for name, p in parsers:
        for action in p.arguments:
            opts = [o for o in action.option_strings if o not in ("-h", "--help")]
            if opts and not any(re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", section) for o in opts):
                missing.append(f"{name} {opts[0]}")
    assert not missing, f"README.md's Commands section lacks {missing}"
