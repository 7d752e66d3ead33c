"""bench/results/MANIFEST.json: for every result file, the command that wrote it, the commit it measured,
the versions it ran with, where it ran, and which file supersedes a part of it.

    python3 bench/manifest.py            writes bench/results/MANIFEST.json
    python3 bench/manifest.py --check    exit 1, naming each difference, where MANIFEST.json is not what
                                         the files and SOURCES give, or a file is wholly superseded

What a result says about itself wins: its ``provenance`` block (bench/provenance.py: commit, argv,
versions, driver, GPUs, Python), else its own top-level ``argv``, ``commit`` and version keys, else, for
a text result, a first line ``# COMMAND, commit C, NAME VERSION, ...`` (what ``bench/provenance.py
--line`` prints). SOURCES below gives the rest: where each file ran, the command where the file records
none, and the commit where it records none. ``commit_from`` says where the commit came from:
"provenance" or "file" (the result's own), "committed" (SOURCES: the commit that added the file's
content, which is the tree it measured or a later one) or "measured" (SOURCES: the tree it measured, as
noted when the file was committed). Every file under bench/results needs
a SOURCES row (a key ending in "/" covers a directory); a row that matches no file is an error too.

``superseded_by`` maps a top-level key of a result to the file that replaces that part; a result
replaced as a whole ("superseded_by": "FILE") is deleted, and ``--check`` says so while it remains.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
RESULTS = os.path.join(BENCH, "results")
MANIFEST = "MANIFEST.json"
SCHEMA = "pinmon.bench.manifest/1"

H200 = "H200"  # one NVIDIA H200 on PCIe Gen5 x16, 16 vCPUs of a virtual machine (env_h200.txt)
H100 = "H100"  # one NVIDIA H100 80GB HBM3 on PCIe Gen5 x16, 16 vCPUs of a virtual machine (env_h100.txt)
CPU_BOX = "2-core box, no GPU"

# path under bench/results -> where it ran, and what the file does not say itself.
SOURCES: dict[str, dict] = {
    "attach_accuracy_h100.json": {"ran_on": H100, "note": "as attach_accuracy_h200.json, after the engine's one event"
                                  " a libcuda file and no return probes"},
    "attach_cost_h100.json": {"ran_on": H100, "note": "the one-event engine: attach and detach times, the cost of a"
                              " probed call, 1 MiB pinned copy loops synchronous and asynchronous (2 rounds each)"},
    "attach_cpu_h100.json": {"ran_on": H100, "note": "pinmon's CPU while attached to a CuPy process making 10,000"
                                                       " probed calls a second, 20 s, binary pages"},
    "attach_cost_rounds_h100.json": {"ran_on": H100, "note": "attach and detach, seven rounds, and the cost of a"
                                                               " probed call, on a CuPy process"},
    "attach_vs_cupti_h100.json": {"ran_on": H100, "note": "a paced torch workload under pinmon trace --engine cupti,"
                                  " attached too: each stream's bytes/s by attach and by CUPTI against the truth"},
    "attach_cost_cpu.json": {"ran_on": CPU_BOX, "note": "pinmon attach on the tests' stand-in libcuda (gcc): attach and"
                             " detach times, pinmon's CPU at 10,000 events/s with each reader, the cost of a probed"
                             " call; a VM shared with other jobs"},
    "attach_accuracy_h200.json": {"ran_on": H200, "note": "pinmon attach after paced traffic of torch, CuPy, numba,"
                                  " JAX, the CUDA runtime (cuda-bindings) and a C program had started: every copy"
                                  " kind's bytes/s against the truth, allocation sizes, write-combined flagged"},
    "attach_cost_h200.json": {"ran_on": H200, "note": "the machine's libcuda copied to ext4, a CuPy workload:"
                              " attach and detach times, pinmon's CPU at 10,000 events/s, the cost of a probed call,"
                              " a loop of 1 MiB cudaMemcpy from pinned memory with and without the probes"},
    "attach_cost_driver_h200.json": {"ran_on": H200, "note": "as attach_cost_h200.json with the C workload"
                                     " (bench/attach/paced_driver.c) calling libcuda directly"},
    "cgroup_cost_h200.json": {"ran_on": H200, "note": "cgroup v2, real groups"},
    "cgroup_cost_v1_cpu.json": {"ran_on": CPU_BOX, "note": "cgroup v1, real groups"},
    "cgroup_evidence_h200.json": {"ran_on": H200, "command": "python3 bench/cgroup_evidence.py OUT.json",
                                  "note": "cgroup v2: check while 2.5 GiB is pinned in a 4 GiB cgroup, the"
                                          " recording replayed after the OOM kill"},
    "cgroup_evidence_check.json": {"ran_on": H200, "command": "python3 bench/cgroup_evidence.py OUT.json",
                                   "commit": "e8a549c", "commit_from": "measured",
                                   "note": "the pinmon check --json document of cgroup_evidence_h200.json"},
    "check_demo_h200.json": {"ran_on": H200, "command": "python3 bench/check_demo.py pinmon/data/demo.jsonl.gz OUT.json",
                             "note": "what the demo recording showed as recorded, before bench/demo_filter.py took"
                                     " the recording box's agent out: every expected rule, nothing missing",
                             "superseded_by": {"notices": "check_demo_filtered_cpu.json"}},
    "check_demo_filtered_cpu.json": {"ran_on": CPU_BOX, "note": "the bundled demo after bench/demo_filter.py (no"
                                     " notice, group or command path of the recording box): every expected rule"
                                     " still fires, nothing missing"},
    "check_during_h2d_h200.json": {
        "ran_on": H200, "command": "bash bench/h200_evidence.sh OUTDIR", "commit": "f9b7c99",
        "commit_from": "committed",
        "note": "pinmon check --json --window 2 under load_h2d_for_check.json's load, while a second "
                "transfer_load.py ran for the live screenshots: two loads on the link"},
    "load_h2d_for_check.json": {
        "ran_on": H200, "command": "python3 bench/transfer_load.py 6 --json OUT.json", "commit": "f9b7c99",
        "commit_from": "committed", "note": "the load under check_during_h2d_h200.json (h200_evidence.sh)"},
    "check_probe_during_load_h200.txt": {
        "ran_on": H200, "command": "python3 -m pinmon check --probe", "commit": "f9b7c99",
        "commit_from": "committed", "note": "during the two loads of check_during_h2d_h200.json"},
    "check_probe_h100.json": {
        "ran_on": H100, "command": "python3 -m pinmon check --probe --json", "commit": "2f03100",
        "commit_from": "measured", "note": "the first of three timed runs (check_probe_wall_h100.txt;"
                                           " bash bench/gpu_batch.sh OUTDIR checkprobe)"},
    "check_probe_wall_h100.txt": {"ran_on": H100, "note": "goal: 3 s"},
    "oom_after_the_fact_h100.json": {
        "ran_on": H100, "note": "a job-shaped cgroup v2 step OOM-killed by CuPy's pinned memory, then removed;"
                                " a one-shot check reports the kill afterwards (every goal true)"},
    "check_probe_h200.json": {
        "ran_on": H200, "command": "python3 -m pinmon check --probe --json", "commit": "391018e",
        "commit_from": "committed", "note": "bash bench/h200_batch.sh OUTDIR check"},
    "cpu_breakdown_h100.json": {
        "ran_on": H100, "note": "per thread of the app at 1 Hz, 160x48 (main: Textual's drawing and the views;"
                                " the poll worker; Textual's input thread) and per part of a snapshot"},
    "cpu_breakdown_threads_h100.json": {
        "ran_on": H100, "command": "python3 bench/cpu_breakdown.py OUT.json --seconds 20 --parts threads",
        "note": "per thread, in the scheduler's nanoseconds: the app, a bare 1 Hz collect loop and nvitop 1.7.2"
                " at 1 Hz on a 160x48 pty"},
    "cpu_breakdown_h100.json.profile.txt": {
        "ran_on": H100, "command": "python3 bench/cpu_breakdown.py OUT.json --parts profile", "commit": "f87ca5a",
        "commit_from": "measured", "note": "the app's main thread under cProfile from start-up, 25 s"},
    "cpu_breakdown_h200.json": {
        "ran_on": H200, "command": "python3 bench/cpu_breakdown.py OUT.json --seconds 30 --parts threads,parts"},
    "cpu_breakdown_h200.json.profile.txt": {
        "ran_on": H200, "command": "python3 bench/cpu_breakdown.py OUT.json --parts profile",
        "commit": "6d55647", "commit_from": "measured",
        "note": "the app's main thread under cProfile from start-up, 30 s"},
    "cpu_breakdown_h200.json.snapshot_profile.txt": {
        "ran_on": H200, "command": "python3 bench/cpu_breakdown.py OUT.json --snapshots 100 --parts snapprofile",
        "commit": "6d55647", "commit_from": "measured", "note": "100 live snapshots under cProfile"},
    "cupti_facts_h200/": {
        "ran_on": H200, "command": "python3 bench/research/cupti_facts.py OUTDIR",
        "note": "what CUPTI's records hold per library, coexistence with torch.profiler, cupti-python 13.4 "
                "on R580 (docs/cupti.md); its overhead part measured cupti-python's record objects, which "
                "the tracer does not use (trace_h200/cupti_record_cost_h200.json)"},
    "env_h100.txt": {"ran_on": H100, "command": "bash bench/gpu_batch.sh OUTDIR env",
                     "commit": "057a85b", "commit_from": "measured",
                     "note": "GPU, driver, link, kernel, Python, CuPy, gcc, libcuda, CPUs, RAM of the H100 machine"},
    "env_h200.txt": {
        "ran_on": H200, "command": "bash bench/h200_batch.sh OUTDIR env", "commit": "9ff95e2",
        "commit_from": "committed", "note": "GPU, driver, link, Python, CuPy, CPUs, RAM of the H200 machine"},
    "export_scrape_h200/": {
        "ran_on": H200, "command": "python3 bench/export_scrape.py OUTDIR", "commit": "391018e",
        "commit_from": "committed"},
    "export_request_flood.json": {"ran_on": CPU_BOX},
    "export_server_attacks.json": {"ran_on": CPU_BOX},
    "gpm_facts_h200.json": {"ran_on": H200, "command": "python3 bench/gpm_facts.py OUT.json"},
    "gpm_intervals_h200.json": {
        "ran_on": H200, "command": "python3 bench/gpm_intervals.py OUT.json", "commit": "61520a1",
        "commit_from": "committed"},
    "gpu_tests_h200.txt": {"ran_on": H200, "note": "every test in tests/gpu (bash bench/h200_batch.sh OUTDIR gputests)"},
    "gpu_tests_attach_register_h100.txt": {
        "ran_on": H100, "note": "attach on real CuPy processes (CLI and the app's key), and cudaHostRegister"
                                " counted as registered under CUPTI 12, CUPTI 13 and the hooks (bash"
                                " bench/gpu_batch.sh OUTDIR gpusel, with the CUDA 12 wheels in .whl12)"},
    "gpu_tests_attach_app_h100.txt": {
        "ran_on": H100, "note": "the app's attach key on a real CuPy process's row, as root"},
    "kernel_pins_h200.json": {"ran_on": H200, "command": "python3 bench/kernel_pins_h200.py OUT.json"},
    "nvml_facts_h200.json": {
        "ran_on": H200, "command": "python3 bench/research/nvml_facts.py OUT.json", "commit": "84132b1",
        "commit_from": "committed", "note": "every NVML_FI_DEV_PCIE_* field answers (docs/measurement.md)"},
    "overhead_h200.json": {
        "ran_on": H200, "command": "python3 bench/overhead.py --out OUTDIR --seconds 60 "
                                   "--parts collect,collect_counters,tui,export,nvitop,dmon",
        "commit": "61520a1", "commit_from": "committed",
        "superseded_by": {"tui": "overhead_h200_tui.json", "nvitop": "overhead_h200_tui.json"}},
    "overhead_h200_accuracy.json": {
        "ran_on": H200, "command": "python3 bench/overhead.py --out OUTDIR --parts tui,nvitop,accuracy",
        "commit": "61520a1", "commit_from": "committed",
        "superseded_by": {"tui": "overhead_h200_tui.json", "nvitop": "overhead_h200_tui.json"}},
    "overhead_h200_tui.json": {
        "ran_on": H200, "command": "python3 bench/overhead.py --out OUTDIR --seconds 90 --parts tui,nvitop,tui_stock"},
    "overhead_h200_tui_reverse.json": {
        "ran_on": H200, "command": "python3 bench/overhead.py --out OUTDIR --seconds 90 --parts nvitop,tui"},
    "overhead_scale_cpu.json": {
        "ran_on": CPU_BOX, "command": "python3 bench/overhead.py --out OUTDIR --parts scale", "commit": "c99ba06",
        "commit_from": "committed", "note": "fake NVML and a fake /proc"},
    "probe_sweep_modes_h200.json": {
        "ran_on": H200, "command": "python3 -m pinmon probe --sweep --modes --json", "commit": "391018e",
        "commit_from": "committed"},
    "probe_vs_torch_h200.json": {
        "ran_on": H200, "command": "python3 bench/probe_vs_torch.py OUT.json", "commit": "391018e",
        "commit_from": "committed"},
    "soak.json": {
        "ran_on": CPU_BOX, "command": "python3 bench/soak.py --out OUT.json --tui-snapshots 1000",
        "commit": "eb1a41e", "commit_from": "committed", "note": "the two cores shared with a test run"},
    "trace_gpu_h200/": {
        "ran_on": H200,
        "command": "PINMON_RESULTS_DIR=OUTDIR python3 -m pytest -q -m gpu tests/gpu/test_trace_gpu.py",
        "commit": "c8ee739", "commit_from": "committed",
        "note": "per example program its tracer report and pinmon check --json (OUTDIR/trace_gpu/)"},
    "trace_h200/cupti_knobs_h200.json": {
        "ran_on": H200, "command": "python3 bench/cupti_record_cost.py OUT.json --copies 4000 --knobs"},
    "trace_h200/cupti_record_cost_h200.json": {
        "ran_on": H200, "command": "python3 bench/cupti_record_cost.py OUT.json --copies 4000"},
    "trace_h200/trace_coverage_h200.json": {
        "ran_on": H200, "command": "python3 bench/trace_coverage.py OUT.json --seconds 8"},
    "trace_h200/trace_cupti12_h200.json": {"ran_on": H200, "note": "cupti-python 12.8 on the R580 driver"},
    "trace_h200/trace_overhead_cupti_h200.json": {
        "ran_on": H200, "command": "python3 bench/trace_overhead.py OUT.json --engine cupti --rounds 90"},
    "trace_h200/trace_overhead_hooks_h200.json": {
        "ran_on": H200, "command": "python3 bench/trace_overhead.py OUT.json --engine hooks --rounds 30"},
    "trace_h200/trace_paced_h200.json": {"ran_on": H200},
    "trace_overhead_fake_cpu.json": {
        "ran_on": CPU_BOX, "command": "python3 bench/trace_overhead.py OUT.json --fake --rounds 9",
        "commit": "654a4c4", "commit_from": "committed", "note": "the CuPy stand-in of tests/trace"},
    "trace_per_op_h200.json": {
        "ran_on": H200, "command": "python3 bench/trace_per_op.py OUT.json", "commit": "4da698a",
        "commit_from": "committed"},
    "tui_cpu_demo_cpu.json": {"ran_on": CPU_BOX, "note": "the app on the bundled recording, A/B against the tree"
                                                          " before the tui branch (a8ffae9), one ABBA round"},
    "tui_first_frame_h100.json": {"ran_on": H100, "note": "80x24 pty, pinmon --no-probe against nvitop 1.7.2, ten"
                                                           " runs each, ABBA, bytecode compiled first: the outline"
                                                           " before Textual (first_frame_s) and Textual's frame"},
    "tui_cpu_abba_h100.json": {"ran_on": H100, "note": "the app's CPU at 1 Hz, 160x48, against nvitop 1.7.2's, three"
                                                        " ABBA rounds of 25 s a leg, each run's CPU from a cgroup of"
                                                        " its own (bash bench/gpu_batch.sh OUTDIR abba, ABBA_S=25)"},
    "tui_cpu_abba_20s_h100.json": {"ran_on": H100, "note": "as tui_cpu_abba_h100.json with 20 s legs, the run before"
                                                            " it on the same box (ABBA_S=20)"},
    "tui_cpu_abba_15s_h100.json": {"ran_on": H100, "note": "as tui_cpu_abba_h100.json with 15 s legs, on another"
                                                            " H100 box, the test changes after 3d7423a added"
                                                            " (ABBA_S=15)"},
    "tui_cpu_abba_boot_h100.json": {"ran_on": H100, "note": "as tui_cpu_abba_20s_h100.json, the first run on that box,"
                                                             " started as it booted: two of the app's six runs far"
                                                             " over the others (0.88%, 1.13% against 0.59-0.66%),"
                                                             " cause not found"},
    "tui_cpu_abba_h200.json": {"ran_on": H200, "note": "as tui_cpu_abba_h100.json, on an H200 box (bash"
                                                        " bench/gpu_batch.sh OUTDIR abba, ABBA_S=25)"},
    "tui_first_frame_cpu.json": {"ran_on": CPU_BOX, "note": "no GPU: no NVML start; A/B against the tree before the"
                                                            " tui branch (a8ffae9), ABBA"},
    "tui_frame_h200.json": {"ran_on": H200, "command": "python3 bench/tui_frame.py OUT.json"},
    "tui_overhead_h200.json": {
        "ran_on": H200,
        "command": "python3 bench/tui_overhead.py --seconds 30 --only demo,live,live_no_probe,nvitop --out OUT.json",
        "commit": "391018e", "commit_from": "committed",
        "note": "current for the time to first frame; the CPU figures of its runs are overhead_h200_tui.json's",
        "superseded_by": {"live_cpu_vs_nvitop": "overhead_h200_tui.json",
                          "live_no_probe_cpu_vs_nvitop": "overhead_h200_tui.json",
                          "demo_cpu_vs_nvitop": "overhead_h200_tui.json"}},
}

_ROW_KEYS = {"ran_on", "command", "commit", "commit_from", "note", "superseded_by"}
_OWN_VERSION_KEYS = ("python", "cupy", "torch", "cuda_runtime", "cuda_driver")


def _cuda(value) -> str:
    """A CUDA version as NVML and the runtime give it (13020) in the dotted form (13.2)."""
    return f"{value // 1000}.{value % 1000 // 10}" if isinstance(value, int) else str(value)


def _from_json(doc) -> dict:
    """What a JSON result says of itself: argv, commit, versions, gpus (keys absent where it is silent)."""
    if not isinstance(doc, dict):
        return {}
    out: dict = {}
    prov = doc.get("provenance")
    if isinstance(prov, dict):
        if prov.get("commit"):
            out["commit"], out["commit_from"] = prov["commit"], "provenance"
        if prov.get("argv"):
            out["argv"] = prov["argv"]
        versions = {k: str(v) for k, v in (prov.get("versions") or {}).items()}
        for key in ("python", "driver", "cuda_driver", "kernel"):
            if prov.get(key):
                versions[key] = str(prov[key])
        out["versions"] = versions
        if prov.get("gpus"):
            out["gpus"] = list(prov["gpus"])
    argv = doc.get("argv")
    if ("argv" not in out and isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)
            and argv[0].startswith("bench/")):  # a bench script's own; a tracer report's is its program's
        out["argv"] = argv
    if "commit" not in out and isinstance(doc.get("commit"), str):
        out["commit"] = doc["commit"]
    if "versions" not in out:
        versions = {}
        own = doc.get("versions")
        if isinstance(own, dict):  # research/cupti_facts.py: packages, python, nvidia-smi's line
            versions.update({k: str(v) for k, v in (own.get("packages") or {}).items()})
            if own.get("python"):
                versions["python"] = str(own["python"])
            smi = str(own.get("nvidia_smi") or "").split(", ")
            if len(smi) >= 2:
                versions["driver"] = smi[0]
                out["gpus"] = [smi[1]]
        for key in _OWN_VERSION_KEYS:
            value = doc.get(key)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and key not in versions:
                versions[key] = _cuda(value) if key.startswith("cuda") else str(value)
        out["versions"] = versions
    return out


def _from_header(line: str) -> dict:
    """``# COMMAND, commit C, GPU NAME, driver D, NAME VERSION, ...``: the first line of a text result."""
    if not line.startswith("# "):
        return {}
    command, *items = line[2:].strip().split(", ")
    out: dict = {"command": command, "versions": {}}
    for item in items:
        name, _, value = item.partition(" ")
        if name == "commit":
            out["commit"] = value
        elif name == "GPU":
            out.setdefault("gpus", []).append(value)
        elif value and value[0].isdigit() and " " not in value:
            out["versions"][name] = value
        else:
            out.setdefault("gpus", []).append(item)  # a bare GPU name ("NVIDIA H200")
    return out


def _read(path: str) -> dict:
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            return _from_json(json.load(f))
    with open(path, encoding="utf-8", errors="replace") as f:
        return _from_header(f.readline())


def script_of(command: str) -> str | None:
    """The repository path a command runs: the bench/ script or the tests/ file or folder it names,
    or ``pinmon`` for ``python3 -m pinmon ...``."""
    words = shlex.split(command)
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words) and words[i + 1] == "pinmon":
            return "pinmon"
        if word.startswith(("bench/", "tests/")) and (word.endswith((".py", ".sh")) or "." not in word):
            return word.rstrip("/")
    return None


def _command(argv: list[str]) -> str:
    return ("python3 " if argv[0].endswith(".py") else "") + shlex.join(argv)


def result_files(results: str = RESULTS) -> list[str]:
    out = []
    for base, dirs, files in os.walk(results):
        dirs.sort()
        for name in files:
            rel = os.path.relpath(os.path.join(base, name), results).replace(os.sep, "/")
            if rel != MANIFEST:
                out.append(rel)
    return sorted(out)


def _row(rel: str, sources: dict) -> str | None:
    if rel in sources:
        return rel
    dirs = [k for k in sources if k.endswith("/") and rel.startswith(k)]
    return max(dirs, key=len) if dirs else None


def build(results: str = RESULTS, sources: dict | None = None) -> tuple[dict, list[str]]:
    """(the manifest, the errors): every file under ``results`` with what it and ``sources`` say."""
    sources = SOURCES if sources is None else sources
    files, errors, used = {}, [], set()
    for rel in result_files(results):
        key = _row(rel, sources)
        if key is None:
            errors.append(f"{rel}: not in SOURCES (bench/manifest.py): add where it ran and how it was made")
            continue
        used.add(key)
        row = sources[key]
        unknown = set(row) - _ROW_KEYS
        if unknown:
            errors.append(f"SOURCES[{key!r}]: unknown keys {sorted(unknown)}")
        try:
            own = _read(os.path.join(results, rel))
        except (OSError, ValueError) as e:
            errors.append(f"{rel}: unreadable ({type(e).__name__}: {e})")
            continue
        command = _command(own["argv"]) if own.get("argv") else own.get("command") or row.get("command")
        if not command:
            errors.append(f"{rel}: records no command and SOURCES gives none")
            continue
        if own.get("commit"):
            commit, commit_from = own["commit"], own.get("commit_from", "file")
        else:
            commit, commit_from = row.get("commit"), row.get("commit_from")
            if not commit or commit_from not in ("committed", "measured"):
                errors.append(f"{rel}: records no commit; SOURCES must give one with commit_from "
                              "'committed' or 'measured'")
        entry = {"command": command, "script": script_of(command), "ran_on": row.get("ran_on"),
                 "commit": commit, "commit_from": commit_from, "versions": own.get("versions", {})}
        if own.get("gpus"):
            entry["gpus"] = own["gpus"]
        entry["superseded_by"] = row.get("superseded_by")
        if row.get("note"):
            entry["note"] = row["note"]
        files[rel] = entry
    errors += [f"SOURCES[{k!r}] matches no file under bench/results" for k in sources if k not in used]
    return {"schema": SCHEMA, "written_by": "python3 bench/manifest.py", "files": files}, errors


def problems(manifest: dict, results: str = RESULTS) -> list[str]:
    """What is wrong with the files ``manifest`` lists, beyond building it: a script that does not
    exist, a wholly superseded file still on disk, a part superseded by a file that is not there or
    that the result does not have."""
    out = []
    for rel, entry in manifest["files"].items():
        if not entry["script"] or not os.path.exists(os.path.join(ROOT, entry["script"])):
            out.append(f"{rel}: its command runs no script of this repository: {entry['command']}")
        sup = entry.get("superseded_by")
        if isinstance(sup, str):
            out.append(f"{rel}: superseded by {sup} as a whole: delete it")
        elif isinstance(sup, dict):
            for part, by in sup.items():
                if by not in manifest["files"]:
                    out.append(f"{rel}: part {part} superseded by {by}, which is not in bench/results")
                if rel.endswith(".json"):
                    with open(os.path.join(results, rel), encoding="utf-8") as f:
                        if part not in json.load(f):
                            out.append(f"{rel}: has no part {part} (superseded_by)")
    return out


def text(manifest: dict) -> str:
    return json.dumps(manifest, indent=1, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/manifest.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with MANIFEST.json instead of writing it")
    ap.add_argument("--results", default=RESULTS, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    manifest, errors = build(a.results)
    errors += problems(manifest, a.results)
    path = os.path.join(a.results, MANIFEST)
    if a.check:
        try:
            with open(path, encoding="utf-8") as f:
                current = f.read()
        except OSError:
            current = ""
        if current != text(manifest):
            errors.append(f"{os.path.relpath(path, ROOT)} is not what the files give: run python3 bench/manifest.py")
    for e in errors:
        print(f"manifest: {e}", file=sys.stderr)
    if errors:
        return 1
    if not a.check:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text(manifest))
        print(f"manifest: {len(manifest['files'])} files -> {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
