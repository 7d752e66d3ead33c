"""A run that leaves a new pinmon-* entry in the temporary directory fails, with or without xdist;
one that leaves only what was there before passes. Runs pytest on a small suite of its own, with a
private temporary directory."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SUITE = '''
import os, tempfile

def test_{name}():
    if os.environ.get("LEAVE") == "{name}":
        open(os.path.join(tempfile.gettempdir(), "pinmon-left-by-{name}"), "w").close()
    if os.environ.get("OTHER_USER") == "{name}":
        # Another user's tracer makes its /tmp/pinmon-<uid> while the tests run.
        path = os.path.join(tempfile.gettempdir(), "pinmon-1500")
        os.mkdir(path)
        os.chown(path, 1500, 1500)
'''


def run_suite(tmp_path, leave, workers, other_user=""):
    suite, tmp = tmp_path / "suite", tmp_path / "tmp"
    suite.mkdir(parents=True)
    tmp.mkdir()
    (tmp / "pinmon-there-before").mkdir()
    for name in ("a", "b", "c", "d"):
        (suite / f"test_{name}.py").write_text(SUITE.format(name=name))
    args = ["-p", "xdist", "-n", str(workers)] if workers else []
    # Only the plugins needed: the others' start-up is most of the run's time.
    env = dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmp), LEAVE=leave, OTHER_USER=other_user, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.tmp_leftovers",
                           *args, str(suite)], cwd=suite, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("workers", [0, 2], ids=["serial", "xdist"])
def test_a_new_entry_fails_the_run_and_one_there_before_does_not(tmp_path, workers):
    r = run_suite(tmp_path / "left", "c", workers)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "the tests left 1 pinmon-* entries" in r.stdout and "pinmon-left-by-c" in r.stdout
    assert "4 passed" in r.stdout
    r = run_suite(tmp_path / "clean", "", workers)
    assert r.returncode == 0 and "pinmon-" not in r.stdout, r.stdout + r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's entry needs root")
def test_another_users_entry_made_during_the_run_is_not_the_tests(tmp_path):
    r = run_suite(tmp_path / "other", "", 0, other_user="b")
    assert r.returncode == 0 and "pinmon-1500" not in r.stdout, r.stdout + r.stderr
