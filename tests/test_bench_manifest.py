"""bench/results/MANIFEST.json and bench/manifest.py: the manifest lists exactly the result files on disk,
is what the files and the script's SOURCES give, and every result file a doc cites is in it; the
script reads each file's own provenance first and says what it cannot place."""
import json
import os
import subprocess
import sys

import pytest

from tests.bench_scripts import load_bench
from tests.test_docs import DOC_FILES, _named_results, _read

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
RESULTS = os.path.join(BENCH, "results")


@pytest.fixture(scope="module")
def man():
    return load_bench("manifest")


@pytest.fixture(scope="module")
def committed():
    with open(os.path.join(RESULTS, "MANIFEST.json"), encoding="utf-8") as f:
        return json.load(f)


# --- the committed manifest ----------------------------------------------------------------------

def test_the_manifest_lists_every_result_file_and_only_those(man, committed):
    on_disk = set(man.result_files())
    listed = set(committed["files"])
    assert not on_disk - listed, f"result files missing from MANIFEST.json: {sorted(on_disk - listed)}"
    assert not listed - on_disk, f"MANIFEST.json lists files that do not exist: {sorted(listed - on_disk)}"


def test_the_manifest_is_what_the_files_give(man, committed):
    built, errors = man.build()
    assert not errors, errors
    assert built == committed, "bench/results/MANIFEST.json is stale: run python3 bench/manifest.py"
    assert not man.problems(built)


def test_every_entry_names_its_command_commit_and_machine(committed):
    for rel, e in committed["files"].items():
        assert e["command"] and e["script"] and e["ran_on"] and e["commit"], rel
        assert e["commit_from"] in ("provenance", "file", "committed", "measured"), rel
        assert os.path.exists(os.path.join(ROOT, e["script"])), rel
        assert e["superseded_by"] is None or isinstance(e["superseded_by"], dict), rel


@pytest.mark.parametrize("doc", ["bench/README.md"] + DOC_FILES)
def test_every_result_file_a_doc_cites_is_in_the_manifest(doc, committed):
    listed = set(committed["files"])
    basenames = {os.path.basename(f) for f in listed}
    missing = []
    for name in sorted(_named_results(_read(doc))):
        rel = name[len("bench/results/"):] if name.startswith("bench/results/") else name
        if rel == "MANIFEST.json":
            continue  # the manifest itself
        if rel.startswith(("tests/", "contrib/", "examples/")) and os.path.exists(os.path.join(ROOT, rel)):
            continue  # a file of the repository, not a result
        if rel.endswith("/"):
            ok = any(f.startswith(rel) or f"/{rel}" in f"/{f}" for f in listed)
        elif "/" in rel:
            ok = rel in listed
        else:
            ok = rel in basenames
        if not ok:
            missing.append(name)
    assert not missing, f"{doc} cites results that MANIFEST.json does not list: {missing}"


def test_research_scripts_run_from_their_folder():
    """bench/research/ scripts import bench/provenance.py and find the checkout from one level down."""
    research = os.path.join(BENCH, "research")
    scripts = sorted(f for f in os.listdir(research) if f.endswith(".py"))
    assert scripts
    for name in scripts:
        r = subprocess.run([sys.executable, os.path.join(research, name), "--help"], capture_output=True,
                           text=True, timeout=60, cwd=ROOT)
        assert r.returncode == 0, f"{name}: {r.stderr[-400:]}"


# --- bench/manifest.py on made-up results -----------------------------------------------------------

def _write(root, rel, content):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(content if isinstance(content, str) else json.dumps(content))


PROV = {"commit": "abc1234", "dirty": False, "argv": ["bench/x.py", "out.json", "--fast"],
        "versions": {"pinmon": "0.1.0", "cupy-cuda13x": "14.2.0"}, "driver": "580.159.04",
        "cuda_driver": "13.0", "gpus": ["NVIDIA H200"], "python": "3.12.3", "kernel": "6.1", "cpus": 16}


def test_a_results_own_provenance_wins_over_the_table(man, tmp_path):
    _write(tmp_path, "x.json", {"provenance": PROV, "figure": 1})
    sources = {"x.json": {"ran_on": "H200", "command": "python3 bench/x.py OUT.json", "commit": "0000000",
                          "commit_from": "committed"}}
    m, errors = man.build(str(tmp_path), sources)
    assert not errors
    e = m["files"]["x.json"]
    assert e["command"] == "python3 bench/x.py out.json --fast" and e["script"] == "bench/x.py"
    assert (e["commit"], e["commit_from"]) == ("abc1234", "provenance")
    assert e["versions"] == {"pinmon": "0.1.0", "cupy-cuda13x": "14.2.0", "python": "3.12.3",
                             "driver": "580.159.04", "cuda_driver": "13.0", "kernel": "6.1"}
    assert e["gpus"] == ["NVIDIA H200"] and e["ran_on"] == "H200" and e["superseded_by"] is None


def test_the_table_fills_in_what_an_older_result_does_not_say(man, tmp_path):
    _write(tmp_path, "old.json", {"python": "3.12.3", "cupy": "14.2.0", "cuda_runtime": 13020, "rate": 5})
    _write(tmp_path, "dir/a/report.json", {"argv": ["examples/good_pipeline.py"], "pinned": {}})
    sources = {"old.json": {"ran_on": "H200", "command": "python3 bench/old.py OUT.json", "commit": "61520a1",
                            "commit_from": "committed"},
               "dir/": {"ran_on": "H200", "command": "python3 -m pytest -q tests/gpu/test_trace_gpu.py",
                        "commit": "c8ee739", "commit_from": "committed"}}
    m, errors = man.build(str(tmp_path), sources)
    assert not errors
    old = m["files"]["old.json"]
    assert (old["command"], old["commit"], old["commit_from"]) == ("python3 bench/old.py OUT.json", "61520a1",
                                                                  "committed")
    assert old["versions"] == {"python": "3.12.3", "cupy": "14.2.0", "cuda_runtime": "13.2"}
    # A tracer report's argv is its program's, not the command that wrote the result.
    rep = m["files"]["dir/a/report.json"]
    assert rep["script"] == "tests/gpu/test_trace_gpu.py" and rep["commit"] == "c8ee739"


def test_a_text_results_first_line_gives_its_command_commit_and_versions(man, tmp_path):
    _write(tmp_path, "gpu_tests.txt", "# python3 -m pytest -q -m gpu tests/gpu, commit 0039148, NVIDIA H200, "
                                      "driver 580.159.04, cupy-cuda13x 14.2.0\n25 passed\n")
    m, errors = man.build(str(tmp_path), {"gpu_tests.txt": {"ran_on": "H200"}})
    assert not errors
    e = m["files"]["gpu_tests.txt"]
    assert e["command"] == "python3 -m pytest -q -m gpu tests/gpu" and e["script"] == "tests/gpu"
    assert (e["commit"], e["commit_from"]) == ("0039148", "file")
    assert e["versions"] == {"driver": "580.159.04", "cupy-cuda13x": "14.2.0"} and e["gpus"] == ["NVIDIA H200"]


def test_provenance_line_is_what_the_manifest_reads_back(man):
    prov = load_bench("provenance")
    parsed = man._from_header("# bash bench/h200_batch.sh OUT gputests, " + prov.line(PROV))
    assert parsed["command"] == "bash bench/h200_batch.sh OUT gputests" and parsed["commit"] == "abc1234"
    assert parsed["gpus"] == ["NVIDIA H200"]
    assert parsed["versions"] == {"driver": "580.159.04", "python": "3.12.3", "pinmon": "0.1.0",
                                  "cupy-cuda13x": "14.2.0"}


def test_what_the_script_cannot_place_is_an_error(man, tmp_path):
    _write(tmp_path, "stray.log", "raw output\n")
    _write(tmp_path, "silent.json", {"figure": 1})
    _write(tmp_path, "broken.json", "{not json")
    sources = {"silent.json": {"ran_on": "H200"}, "broken.json": {"ran_on": "H200", "command": "python3 bench/x.py"},
               "gone.json": {"ran_on": "H200", "command": "python3 bench/x.py"}}
    m, errors = man.build(str(tmp_path), sources)
    text = "\n".join(errors)
    assert "stray.log: not in SOURCES" in text
    assert "silent.json: records no command" in text
    assert "broken.json: unreadable" in text
    assert "SOURCES['gone.json'] matches no file" in text
    assert set(m["files"]) == set()


def test_superseded_files_and_parts_are_checked(man, tmp_path):
    _write(tmp_path, "new.json", {"provenance": PROV, "tui": 1})
    _write(tmp_path, "old.json", {"provenance": PROV, "tui": 1, "nvitop": 2})
    _write(tmp_path, "older.json", {"provenance": PROV})
    sources = {"new.json": {"ran_on": "H200"},
               "old.json": {"ran_on": "H200", "superseded_by": {"tui": "new.json", "dmon": "new.json",
                                                                "nvitop": "gone.json"}},
               "older.json": {"ran_on": "H200", "superseded_by": "new.json"}}
    m, errors = man.build(str(tmp_path), sources)
    assert not errors
    found = man.problems(m, str(tmp_path))
    assert any("older.json: superseded by new.json as a whole: delete it" in p for p in found)
    assert any("old.json: has no part dmon" in p for p in found)
    assert any("old.json: part nvitop superseded by gone.json, which is not in bench/results" in p for p in found)
    assert not any("part tui" in p for p in found)


def test_check_fails_on_a_stale_manifest_and_passes_once_written(man, tmp_path, monkeypatch, capsys):
    results = str(tmp_path / "results")
    _write(results, "x.json", {"provenance": PROV})
    _write(str(tmp_path), "bench/x.py", "")
    monkeypatch.setattr(man, "SOURCES", {"x.json": {"ran_on": "H200"}})
    monkeypatch.setattr(man, "ROOT", str(tmp_path))
    assert man.main(["--check", "--results", results]) == 1
    assert "is not what the files give" in capsys.readouterr().err
    assert man.main(["--results", results]) == 0
    assert man.main(["--check", "--results", results]) == 0
    _write(results, "x.json", {"provenance": dict(PROV, commit="def5678")})
    assert man.main(["--check", "--results", results]) == 1
