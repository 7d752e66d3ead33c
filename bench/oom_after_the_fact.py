"""A Slurm job OOM-killed by its pinned memory, told after the fact by a one-shot ``pinmon check``.

For the GPU box, as root, on cgroup v2 with the memory controller: makes a job-shaped cgroup as
Slurm's cgroup v2 plugin lays it out, ``/sys/fs/cgroup/system.slice/slurmstepd.scope/job_<N>/step_0``
with ``memory.max`` 4 GiB (no swap), the process in ``step_0/user/task_0`` below it. A CuPy process
there pins 1 GiB at a time (``cudaHostAlloc``) until the OOM killer ends it. Then the job's cgroups
are removed, as slurmd removes them when the job ends, and only then ``pinmon check --json`` runs:
nothing live is left of the job, and the kill must come from the kernel's log, named as the job step
(``job <N>.0``, kind slurm, job N, step 0), with the process (its pid and name), the 4 GiB limit and
the share of its resident memory that was shared memory (CUDA's pinned memory is shared memory).
``pinmon check`` (the text report) runs too, for its OOM section.

Writes OUT.json: the child's exit status and last line, whether the cgroups are gone, the kill as
``check --json`` reports it, the ``oom-killed`` finding, the report's OOM lines, and ``goal`` (each
check true or false), with ``provenance``.

Usage: python3 bench/oom_after_the_fact.py OUT.json [--limit 4G] [--chunk 1G] [--job N]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import portable_argv, portable_text, provenance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CGROUP_ROOT = "/sys/fs/cgroup"

CHILD = r"""
import os, sys
with open(sys.argv[1], "w") as f:                  # into the task's cgroup before CUDA starts
    f.write(str(os.getpid()))
import cupy
rt, chunk = cupy.cuda.runtime, int(sys.argv[2])
ptrs = []
while True:                                        # 1 GiB more at a time until the OOM killer acts
    ptrs.append(rt.hostAlloc(chunk, 0))
    print("held", len(ptrs) * chunk, flush=True)
"""


def size(text: str) -> int:
    units = {"G": 1 << 30, "M": 1 << 20}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def job_cgroups(parent: str, job: int) -> list[str]:
    """The job's cgroup directories, outermost first: slurmstepd.scope (where it is not there yet),
    job_N, step_0, user, task_0."""
    scope = os.path.join(parent, "slurmstepd.scope")
    made = [scope] if not os.path.isdir(scope) else []
    d = os.path.join(scope, f"job_{job}")
    return made + [d, os.path.join(d, "step_0"), os.path.join(d, "step_0", "user"),
                   os.path.join(d, "step_0", "user", "task_0")]


def make(dirs: list[str], parent: str, step: str, limit: int) -> None:
    """Each directory made with the memory controller enabled down to the task; the limit on the step."""
    chain = [CGROUP_ROOT] + ([parent] if parent != CGROUP_ROOT else [])
    for d in chain:
        try:
            write(os.path.join(d, "cgroup.subtree_control"), "+memory")
        except OSError:
            pass
    for d in dirs:
        os.makedirs(d, exist_ok=True)
        if not d.endswith("task_0"):
            write(os.path.join(d, "cgroup.subtree_control"), "+memory")
    write(os.path.join(step, "memory.max"), str(limit))
    if os.path.exists(os.path.join(step, "memory.swap.max")):
        write(os.path.join(step, "memory.swap.max"), "0")


def remove(dirs: list[str]) -> None:
    for d in reversed(dirs):
        for _ in range(50):
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.2)  # a killed task's exit can lag its reaping


def pinmon(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "pinmon", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env=env)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--limit", default="4G")
    ap.add_argument("--chunk", default="1G")
    ap.add_argument("--job", type=int, default=None, help="the job number (default: 90000 + this pid's last 4 digits)")
    args = ap.parse_args()
    if os.geteuid() != 0 or not os.path.exists(os.path.join(CGROUP_ROOT, "cgroup.controllers")):
        print(f"needs root and cgroup v2 mounted at {CGROUP_ROOT}", file=sys.stderr)
        return 2
    limit, chunk = size(args.limit), size(args.chunk)
    job = args.job if args.job is not None else 90000 + os.getpid() % 10000
    system_slice = os.path.join(CGROUP_ROOT, "system.slice")
    parent = system_slice if os.path.isdir(system_slice) else CGROUP_ROOT
    dirs = job_cgroups(parent, job)
    step, task = dirs[-3], dirs[-1]
    doc: dict = {"provenance": provenance(), "argv": portable_argv(sys.argv), "job": job,
                 "limit_bytes": limit, "chunk_bytes": chunk,
                 "step_cgroup": "/" + os.path.relpath(step, CGROUP_ROOT)}
    child = None
    try:
        try:
            make(dirs, parent, step, limit)
        except OSError as e:
            doc["error"] = f"making the job's cgroups: {e}"
            raise
        child = subprocess.Popen([sys.executable, "-c", CHILD, os.path.join(task, "cgroup.procs"), str(chunk)],
                                 stdout=subprocess.PIPE, text=True)
        for line in child.stdout:
            doc["child_last_line"] = line.strip()
        doc["child_exit"] = child.wait(300)
        doc["child_pid"] = child.pid
        with open(os.path.join(step, "memory.events")) as f:
            doc["step_memory_events"] = dict(line.split() for line in f if line.strip())
    except OSError:
        pass  # said in doc["error"]; the cgroups are removed and the check still runs
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(30)
        time.sleep(1.0)
        remove(dirs)
    doc["cgroups_removed"] = not os.path.exists(dirs[0])
    check = pinmon("check", "--json", "--window", "0.5")
    doc["check_returncode"] = check.returncode
    cdoc = json.loads(check.stdout) if check.stdout.strip() else {}
    snap = cdoc.get("snapshot", {})
    kill = next((k for k in snap.get("oom_kills", []) if k.get("pid") == doc.get("child_pid")), None)
    doc["kill"] = kill
    finding = next((f for f in cdoc.get("findings", []) if f.get("rule") == "oom-killed"
                    and f.get("values", {}).get("pid") == doc.get("child_pid")), None)
    doc["finding"] = {k: finding[k] for k in ("rule", "severity", "subject", "message", "values")} if finding else None
    doc["notices"] = [portable_text(n) for n in snap.get("notices", []) if "kernel log" in n]
    text = pinmon("check", "--window", "0.5")
    lines = text.stdout.splitlines()
    doc["report_oom_lines"] = [ln for ln in lines if f"pid {doc.get('child_pid')}" in ln or "OOM kills" in ln][:5]
    rss = None
    if kill and None not in (kill.get("anon_rss_bytes"), kill.get("file_rss_bytes"), kill.get("shmem_rss_bytes")):
        rss = kill["anon_rss_bytes"] + kill["file_rss_bytes"] + kill["shmem_rss_bytes"]
    doc["shmem_fraction"] = kill["shmem_rss_bytes"] / rss if kill and rss else None
    doc["goal"] = {
        "oom_killed": doc.get("child_exit") == -9,
        "cgroups_removed": doc["cgroups_removed"],
        "kill_reported": kill is not None,
        "group_named_as_the_job_step": bool(kill) and kill.get("kind") == "slurm" and kill.get("job") == str(job)
        and kill.get("step") == "0" and kill.get("name") == f"job {job}.0",
        "process_named": bool(kill) and str(kill.get("process", "")).startswith("python"),
        "limit_is_the_steps": bool(kill) and kill.get("memory_limit_bytes") == limit,
        "shmem_share_at_least_half": (doc["shmem_fraction"] or 0) >= 0.5,
        "finding_critical_and_names_the_job_first": bool(finding) and finding["severity"] == "critical"
        and finding["subject"] == f"Slurm job {job} step 0",
        "in_the_text_report": any(f"job {job}.0" in ln for ln in doc["report_oom_lines"]),
    }
    with open(args.out, "w") as f:
        f.write(portable_text(json.dumps(doc, indent=1)))
    print(json.dumps(doc["goal"], indent=1))
    return 0 if all(doc["goal"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
