"""A CUDA process OOM-killed by its own pinned memory in a container-sized cgroup, under pinmon.

For the GPU box, as root, on cgroup v2: makes a cgroup with ``memory.max`` 4 GiB (no swap), and in it a
CuPy process that pins 2.5 GiB with ``cudaHostAlloc`` (256 MiB at a time) on a host with far more RAM.
While ``pinmon record`` records the host, ``pinmon check --json`` is taken: ``pinned-cgroup-share``
must be critical for the group while the host's pinned share stays low. Then the process pins 256 MiB
more at a time until the OOM killer ends it; the recording, replayed (``pinmon replay --json``), must
show ``cgroup-oom-kills``. Writes OUT.json (the check document, the replay's last findings, the
group's own ``memory.events``, the child's exit status) and keeps the recording and check output
beside it.

Usage: python3 bench/cgroup_evidence.py OUT.json [--limit 4G] [--hold 2.5G]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import portable_argv, portable_text, provenance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CGROUP_ROOT = "/sys/fs/cgroup"
CHUNK = 256 << 20

CHILD = r"""
import os, sys
cg = sys.argv[1]
with open(os.path.join(cg, "cgroup.procs"), "w") as f:   # into the group before CUDA starts
    f.write(str(os.getpid()))
import cupy
rt = cupy.cuda.runtime
hold, chunk = int(sys.argv[2]), int(sys.argv[3])
ptrs = []
while len(ptrs) * chunk < hold:
    ptrs.append(rt.hostAlloc(chunk, 0))
print("held", len(ptrs) * chunk, flush=True)
sys.stdin.readline()
while True:                                                # more until the OOM killer acts
    ptrs.append(rt.hostAlloc(chunk, 0))
    print("held", len(ptrs) * chunk, flush=True)
"""


def size(text: str) -> int:
    units = {"G": 1 << 30, "M": 1 << 20}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def portable(text: str) -> str:
    """Text with no directory of the machine it ran on: the interpreter by its name, the output
    directory's files by theirs, other paths as provenance.portable_text gives them."""
    return portable_text(text.replace(sys.executable, os.path.basename(sys.executable)))


def pinmon(*args, **kw):
    return subprocess.run([sys.executable, "-m", "pinmon", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, **kw)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--limit", default="4G")
    ap.add_argument("--hold", default="2.5G")
    args = ap.parse_args()
    limit, hold = size(args.limit), size(args.hold)
    outdir = os.path.dirname(os.path.abspath(args.out))
    cg = os.path.join(CGROUP_ROOT, f"pinmon-evidence-{os.getpid()}")
    with open(os.path.join(CGROUP_ROOT, "cgroup.subtree_control"), "a") as f:
        f.write("+memory")
    os.mkdir(cg)
    doc: dict = {"provenance": provenance(), "argv": portable_argv(sys.argv), "limit_bytes": limit, "hold_bytes": hold}
    rec_path = os.path.join(outdir, "cgroup_evidence_recording.jsonl")
    recorder = child = None
    try:
        with open(os.path.join(cg, "memory.max"), "w") as f:
            f.write(str(limit))
        if os.path.exists(os.path.join(cg, "memory.swap.max")):
            with open(os.path.join(cg, "memory.swap.max"), "w") as f:
                f.write("0")
        if os.path.exists(rec_path):
            os.unlink(rec_path)
        recorder = subprocess.Popen([sys.executable, "-m", "pinmon", "record", "-o", rec_path, "--interval", "0.5"],
                                    cwd=ROOT, stderr=subprocess.PIPE, text=True)
        child = subprocess.Popen([sys.executable, "-c", CHILD, cg, str(hold), str(CHUNK)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        said = child.stdout.readline().split()
        doc["child_held_bytes"] = int(said[1]) if len(said) == 2 else None
        time.sleep(2.5)  # the VmPin and group reads settle; the recording has several snapshots
        check = pinmon("check", "--json", "--window", "1")
        with open(os.path.join(outdir, "cgroup_evidence_check.json"), "w") as f:
            f.write(portable(check.stdout))
        cdoc = json.loads(check.stdout)
        doc["check"] = {"returncode": check.returncode, "status": cdoc["status"],
                        "findings": [{k: f[k] for k in ("rule", "severity", "subject", "message")} for f in cdoc["findings"]],
                        "host": {k: cdoc["snapshot"]["host"].get(k) for k in (
                            "mem_total_bytes", "kernel_pinned_bytes", "pinned_bytes_total", "unattributed_pinned_bytes",
                            "effective_mem_limit_bytes")},
                        "group": next((g for g in cdoc["snapshot"]["cgroups"] if (g.get("limit") or {}).get("limit_bytes") == limit), None)}
        child.stdin.write("more\n")
        child.stdin.flush()
        for line in child.stdout:
            doc["child_last_line"] = line.strip()
        doc["child_exit"] = child.wait(120)
        time.sleep(7.0)  # limits and OOM counts are read again every 5 s
        recorder.send_signal(signal.SIGTERM)
        doc["recorder_stderr"] = portable(recorder.communicate(timeout=60)[1].strip()[-300:])
        with open(os.path.join(cg, "memory.events")) as f:
            doc["memory_events"] = dict(line.split() for line in f if line.strip())
        replay = pinmon("replay", rec_path, "--json")
        lines = replay.stdout.splitlines()
        doc["replay"] = {"returncode": replay.returncode, "snapshots": len(lines)}
        if lines:
            last = json.loads(lines[-1])
            doc["replay"]["last_findings"] = [{k: f[k] for k in ("rule", "severity", "subject", "message")}
                                              for f in last["findings"]]
        rules = {f["rule"]: f["severity"] for f in doc["check"]["findings"]}
        doc["goal"] = {"cgroup_share_critical": rules.get("pinned-cgroup-share") == "critical",
                       "host_share_silent": "pinned-ram-share" not in rules,
                       "oom_killed": doc["child_exit"] == -9,
                       "oom_kills_finding": any(f["rule"] == "cgroup-oom-kills" and f["severity"] == "critical"
                                                for f in doc["replay"].get("last_findings", []))}
    finally:
        for p in (child, recorder):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(30)
        for _ in range(50):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.2)
    with open(args.out, "w") as f:
        f.write(portable(json.dumps(doc, indent=1).replace(outdir + os.sep, "")))
    print(json.dumps(doc.get("goal"), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
