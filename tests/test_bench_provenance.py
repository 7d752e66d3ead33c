"""bench/provenance.py and the bench results: every result says which commit, versions and GPU made it,
and no result names a path or the host of the machine it ran on."""
import json
import os
import re
import subprocess
import sys
import types

import pytest

from tests.bench_scripts import load_bench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
RESULTS = os.path.join(BENCH, "results")


@pytest.fixture(scope="module")
def prov():
    return load_bench("provenance")


def _strings(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)
    elif isinstance(obj, str):
        yield obj


def _git_head():
    try:
        r = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except OSError:
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def test_provenance_of_this_checkout(prov, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML: the result says so
    p = prov.provenance()
    head = _git_head()
    if head:
        assert p["commit"] == head and p["dirty"] in (True, False)
    import pinmon

    assert p["versions"]["pinmon"] == pinmon.__version__
    assert "textual" in p["versions"]
    assert "pynvml" in p["gpu_error"] and "gpus" not in p
    assert {"python", "kernel", "machine", "cpus"} <= p.keys()
    assert not {"host", "hostname", "node", "tree", "path"} & p.keys()
    assert not [s for s in _strings(p) if s.startswith("/")], "a path of this machine in the provenance"


def test_provenance_records_the_command_line_without_the_machines_paths(prov, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(sys, "argv", [os.path.join(ROOT, "bench", "x.py"), "/tmp/run7/x.json", "--seconds", "3"])
    assert prov.provenance()["argv"] == [os.path.join("bench", "x.py"), "x.json", "--seconds", "3"]


def test_commit_from_environment_where_the_tree_has_no_git(prov, tmp_path, monkeypatch):
    (tmp_path / "pinmon").mkdir()
    (tmp_path / "pinmon" / "__init__.py").write_text('"""x"""\n__version__ = "9.8.7"\n')
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    monkeypatch.setenv("PINMON_COMMIT", "abc123")
    assert prov.commit(str(tmp_path)) == ("abc123", None)
    assert prov.versions(str(tmp_path))["pinmon"] == "9.8.7"
    monkeypatch.delenv("PINMON_COMMIT")
    assert prov.commit(str(tmp_path)) == (None, None)


def test_a_named_commit_wins_over_the_copys_own_git(prov, monkeypatch):
    """The GPU box gets a copy of the tree whose .git HEAD is no commit of the project."""
    monkeypatch.setenv("PINMON_COMMIT", "abc123")
    assert prov.commit(ROOT) == ("abc123", None)
    monkeypatch.delenv("PINMON_COMMIT")
    assert prov.commit(ROOT)[0] not in (None, "abc123")


class _FakeNvml(types.ModuleType):
    def __init__(self, fail_init=None):
        super().__init__("pynvml")
        self.fail_init, self.shutdowns = fail_init, 0

    def nvmlInit(self):
        if self.fail_init:
            raise self.fail_init

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self):
        return b"580.159.04"

    def nvmlSystemGetCudaDriverVersion(self):
        return 13000

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return "NVIDIA H200" if h == 0 else b"NVIDIA H100"


def test_driver_and_gpus_from_nvml(prov, monkeypatch):
    fake = _FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert prov.nvml() == {"driver": "580.159.04", "cuda_driver": "13.0", "gpus": ["NVIDIA H200", "NVIDIA H100"]}
    assert fake.shutdowns == 1


def test_nvml_failing_is_said_not_raised(prov, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml(fail_init=RuntimeError("Driver Not Loaded")))
    assert prov.nvml() == {"gpu_error": "RuntimeError: Driver Not Loaded"}


def test_portable_argv(prov):
    argv = [sys.executable, "-m", "pinmon", os.path.join(ROOT, "bench", "transfer_load.py"),
            "/usr/local/nvidia/bin/nvidia-smi", "--json", "x.json"]
    assert prov.portable_argv(argv) == [os.path.basename(sys.executable), "-m", "pinmon",
                                        os.path.join("bench", "transfer_load.py"), "nvidia-smi", "--json", "x.json"]


def test_portable_paths(prov, tmp_path):
    tmp = str(tmp_path)
    cases = {
        os.path.join(ROOT, "bench", "x.py"): os.path.join("bench", "x.py"),
        f"{tmp}/site/cupti/__init__.py": "site/cupti/__init__.py",              # a --target install
        f"{tmp}/cupti134/nvidia/cu13/lib/libcupti.so.13": "cupti134/nvidia/cu13/lib/libcupti.so.13",
        "/opt/v/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13": "site-packages/nvidia/cu13/lib/libcupti.so.13",
        f"{tmp}/v/lib/python3.12/site-packages/cupti/__init__.py": "site-packages/cupti/__init__.py",
        "/dev/nvidiactl": "/dev/nvidiactl",                                     # no machine's own
    }
    for path, want in cases.items():
        assert prov.portable_path(path, ROOT, tmp) == want, path
    text = (f'{{"cupti_module": "{tmp}/site/cupti/__init__.py", "log": "/opt/v/lib/python3.12/site-packages/torch/'
            'profiler.py:224: UserWarning", "map": "/dev/zero (deleted)", "url": "http://a/b"}')
    assert prov.portable_text(text, ROOT, tmp) == (
        '{"cupti_module": "site/cupti/__init__.py", "log": "site-packages/torch/profiler.py:224: UserWarning", '
        '"map": "/dev/zero (deleted)", "url": "http://a/b"}')


def _scripts():
    """bench/*.py and bench/research/*.py, as paths below bench/."""
    research = os.path.join(BENCH, "research")
    return sorted([f for f in os.listdir(BENCH) if f.endswith(".py") and f != "provenance.py"]
                  + [f"research/{f}" for f in os.listdir(research) if f.endswith(".py")])


@pytest.mark.parametrize("script", _scripts())
def test_every_script_that_writes_a_json_result_adds_provenance(script):
    with open(os.path.join(BENCH, script), encoding="utf-8") as f:
        src = f.read()
    if "json.dump(" in src:
        assert "provenance(" in src, f"bench/{script} writes JSON without provenance()"
    assert "platform.node(" not in src, f"bench/{script} records the host name"
    assert not re.search(r"[\"'](tree|host)[\"']\s*:\s*(tree|platform)", src), f"bench/{script} records a path"


# A path of the machine: its interpreters, checkouts, home, temporary and output directories. Which
# library a process loaded is recorded from site-packages/ on (bench/provenance.py portable_path).
_PATH = re.compile(r"(?<![\w.])/(?:work|root|home|opt|tmp|usr|srv|mnt|var)/[^\s\"',:]*")


def _result_files():
    for base, _, files in os.walk(RESULTS):
        for name in files:
            yield os.path.join(base, name)


def test_no_result_names_a_path_of_its_machine():
    bad = []
    for path in _result_files():
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in _PATH.finditer(text):
            bad.append(f"{os.path.relpath(path, ROOT)}: {m.group(0)}")
    assert not bad, "\n".join(bad[:20])


def test_no_bench_result_records_its_host():
    bad = []
    for path in _result_files():
        if not path.endswith(".json"):
            continue
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        # A pinmon snapshot's "host" is its host-memory section; a bench result's was the host name.
        if isinstance(doc, dict) and isinstance(doc.get("host"), str):
            bad.append(os.path.relpath(path, ROOT))
    assert not bad, bad
