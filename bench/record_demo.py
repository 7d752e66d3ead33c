"""Record the bundled demo on a real GPU, showing what pinmon shows today.

Usage (GPU machine, as root): python3 bench/record_demo.py OUT.jsonl.gz [--hog-fraction 0.55]
    [--hog-step-s 0.5] [--engine auto|cupti|hooks] [--probe-every 30]
Then: python3 bench/check_demo.py OUT.jsonl.gz CHECK.json   (what the recording shows, and what it lacks)

The plan, in seconds from the start (each workload its own process, reaped as soon as it exits: an
exited child left unreaped is a zombie, and a recording should show a program only while it runs):

- 0-8 idle; 8: pinned host-to-device traffic (bench/transfer_load.py) for 18 s;
- 20: traced ``examples/small_pinned_allocs.py`` (pinned-small-allocs);
- 30: pageable traffic, and traced ``examples/pageable_copies.py`` (pageable-bulk-copies: its pop-up
  shows the copy table and the rate the finding quotes);
- 50: device-to-host traffic, a write-combined buffer held (wc-cpu-readback, info) and traced
  ``examples/wc_readback.py`` (wc-cpu-readback, warning);
- 66: traced ``examples/rounding_waste.py`` with PyTorch (pinned-rounding-waste);
- 84: 4 GiB of ordinary memory ``cudaHostRegister``ed for 40 s: in the kernel's pinned count, in no
  process's maps (the memory panel's unattributed line, pinned-unattributed);
- 130: a process that pins 1 GiB every ``--hog-step-s`` up to ``--hog-fraction`` of effective RAM
  and holds it 25 s (pinned-ram-share warning then critical, and pinned-growth: a leak that fills RAM
  in about a minute);
- quick probes: one at the start, then every ``--probe-every`` seconds.

Some workloads run in cgroups laid out as a node's runtimes lay them out, each with a memory limit, so
the recording shows groups (``--no-groups``: none): ``small_pinned_allocs.py`` in a Kubernetes pod's
container (``kubepods.slice/.../cri-containerd-<id>.scope``, the pod slice limited to 8 GiB; its
names from a kubelet-style ``/var/log/containers/<pod>_<namespace>_<container>-<id>.log`` link, as
pinmon reads them: the link's name only), the registered-memory holder in a Docker container
(``/docker/<id>``, 16 GiB), the hog in a Slurm job step (``slurmstepd.scope/job_4711/step_0``, the
job limited so the hog holds 70% of it: ``pinned-cgroup-share`` critical) and, at 100 s, a process in a
2 GiB Docker container that pins 256 MiB at a time until the OOM killer ends it (``cgroup-oom-kills``).

The traced examples run under ``python3 -m pinmon trace`` (the documented form, not ``-m
pinmon.trace``) with ``--engine``; their reports go to the default report directory, which the
collector reads. Every figure in the recording is what pinmon measured live; nothing is synthesised.

Each snapshot goes through ``demo_filter.BoxFilter`` before it is written: the recording box's own
agent (``--box-process``, default ``process_api``), its cgroup (``--box-cgroup``, default
``/process_api``) and the checkout's absolute path in command lines are not the demo's to show
(``--unfiltered``: write what pinmon sees). What the filter drops and why: bench/demo_filter.py.
"""
import argparse
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from demo_filter import BOX_CGROUP_PREFIXES, BOX_PROCESSES, BoxFilter

from pinmon.collect.live import LiveCollector
from pinmon.probe import run_probe
from pinmon.recording import Recorder

HOG = r"""
import sys, time, cupy as cp
target = int(sys.argv[1]); hold = float(sys.argv[2]); step_s = float(sys.argv[3]); step = 1 << 30
ptrs = []
try:
    while len(ptrs) * step < target:
        ptrs.append(cp.cuda.runtime.hostAlloc(step, 0))
        time.sleep(step_s)
    time.sleep(hold)
finally:
    for p in ptrs:
        cp.cuda.runtime.freeHost(p)
"""

WC = r"""
import sys, time, cupy as cp
p = cp.cuda.runtime.hostAlloc(256 << 20, cp.cuda.runtime.hostAllocWriteCombined)
time.sleep(float(sys.argv[1])); cp.cuda.runtime.freeHost(p)
"""

# Ordinary memory pinned in place: the kernel counts its pages (FOLL_PIN); /proc/PID/maps shows an
# ordinary anonymous mapping, so no process row explains it.
REGISTER = r"""
import sys, time, numpy as np, cupy as cp
size = int(sys.argv[1]); hold = float(sys.argv[2])
buf = np.ones(size, dtype=np.uint8)  # touched: resident before it is pinned
cp.cuda.runtime.hostRegister(buf.ctypes.data, size, 0)
try:
    time.sleep(hold)
finally:
    cp.cuda.runtime.hostUnregister(buf.ctypes.data)
"""

REGISTER_BYTES = 4 << 30

# Pins 256 MiB at a time until its group's limit ends it.
OOM = r"""
import time, cupy as cp
ptrs = []
while True:
    ptrs.append(cp.cuda.runtime.hostAlloc(256 << 20, 0))
    time.sleep(0.5)
"""

CGROUP_ROOT = "/sys/fs/cgroup"
POD_UID = "5e1c7a2b-9d3f-4e6a-8b1c-2f4d6e8a0b1c"
POD_CONTAINER = "7d3a" * 16
DOCKER_REGISTER = "c0ffee" * 10 + "c0ff"
DOCKER_OOM = "dead" * 16
POD_SLICE = ("kubepods.slice", "kubepods-burstable.slice",
             f"kubepods-burstable-pod{POD_UID.replace('-', '_')}.slice")
GROUPS = {  # name -> (path components, which component holds the limit, limit in bytes or None for the job's)
    "pod": (POD_SLICE + (f"cri-containerd-{POD_CONTAINER}.scope",), 2, 8 << 30),
    "register": (("docker", DOCKER_REGISTER), 1, 16 << 30),
    "oom": (("docker", DOCKER_OOM), 1, 2 << 30),
    "job": (("slurmstepd.scope", "job_4711", "step_0"), 1, None),
}
KUBELET_LOG = f"/var/log/containers/trainer-7f9c_ml_worker-{POD_CONTAINER}.log"


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def make_groups(job_limit: int) -> dict[str, str]:
    """The demo's cgroups (v2), each with its limit; {name: directory}. Made under the root."""
    made = {}
    for name, (parts, limit_at, limit) in GROUPS.items():
        d = CGROUP_ROOT
        for i, part in enumerate(parts):
            try:
                _write(os.path.join(d, "cgroup.subtree_control"), "+memory")
            except OSError:
                pass
            d = os.path.join(d, part)
            os.makedirs(d, exist_ok=True)
            if i == limit_at:
                _write(os.path.join(d, "memory.max"), str(limit if limit is not None else job_limit))
                if os.path.exists(os.path.join(d, "memory.swap.max")):
                    _write(os.path.join(d, "memory.swap.max"), "0")
        made[name] = d
    os.makedirs(os.path.dirname(KUBELET_LOG), exist_ok=True)
    if not os.path.lexists(KUBELET_LOG):
        os.symlink("/dev/null", KUBELET_LOG)  # a kubelet's link: pinmon reads its name, never follows it
    return made


def remove_groups() -> None:
    for parts, _, _ in GROUPS.values():
        for i in range(len(parts), 0, -1):
            try:
                os.rmdir(os.path.join(CGROUP_ROOT, *parts[:i]))
            except OSError:
                pass
    try:
        os.unlink(KUBELET_LOG)
    except OSError:
        pass


def in_group(directory: str):
    """A preexec_fn that moves the child into ``directory`` before it runs anything."""
    def move() -> None:
        _write(os.path.join(directory, "cgroup.procs"), str(os.getpid()))
    return move


def plan(py: str, engine: str, hog_bytes: int, hog_step_s: float) -> list[tuple[float, list[str], str | None]]:
    """(start s, argv, the name of its group or None) of each workload, relative to the start."""
    load = os.path.join(HERE, "transfer_load.py")
    examples = os.path.join(ROOT, "examples")

    def traced(name, *args):  # an example under the tracer: its row reads "traced", its figures exact
        return [py, "-m", "pinmon", "trace", "--engine", engine, "--", py, os.path.join(examples, name), *args]

    return [
        (8, [py, load, "18"], None),
        (20, traced("small_pinned_allocs.py", "--seconds", "25"), "pod"),
        (30, [py, load, "18", "--pageable"], None),
        (30, traced("pageable_copies.py", "--seconds", "15"), None),
        (50, [py, load, "10", "--d2h"], None),
        (50, [py, "-c", WC, "40"], None),
        (50, traced("wc_readback.py", "--seconds", "14"), None),
        (66, traced("rounding_waste.py", "--seconds", "15"), None),
        (84, [py, "-c", REGISTER, str(REGISTER_BYTES), "40"], "register"),
        (100, [py, "-c", OOM], "oom"),
        (130, [py, "-c", HOG, str(hog_bytes), "25", str(hog_step_s)], "job"),
    ]


def duration_s(hog_bytes: int, hog_step_s: float) -> float:
    """The hog's start, its growth (1 GiB a step, each step's allocation ~0.2 s), its hold, a tail."""
    return 130 + (hog_bytes / (1 << 30)) * (hog_step_s + 0.2) + 25 + 10


def box_filter(unfiltered: bool, processes: list[str] | None, prefixes: list[str] | None) -> BoxFilter | None:
    """The filter each snapshot goes through before it is written (None: written as pinmon sees it):
    the recording box's agents and cgroups (its own values unless given), this checkout's path."""
    if unfiltered:
        return None
    return BoxFilter(processes=processes or BOX_PROCESSES, cgroup_prefixes=prefixes or BOX_CGROUP_PREFIXES,
                     checkout=ROOT)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--hog-fraction", type=float, default=0.55)
    ap.add_argument("--hog-step-s", type=float, default=0.5)
    ap.add_argument("--engine", choices=("auto", "cupti", "hooks"), default="auto")
    ap.add_argument("--probe-every", type=float, default=30.0)
    ap.add_argument("--no-groups", action="store_true", help="run every workload in this process's own cgroup")
    ap.add_argument("--box-process", action="append", metavar="NAME",
                    help=f"the recording box's agent, left out of the demo (default {', '.join(BOX_PROCESSES)})")
    ap.add_argument("--box-cgroup", action="append", metavar="PATH",
                    help=f"the agent's cgroup path prefix (default {', '.join(BOX_CGROUP_PREFIXES)})")
    ap.add_argument("--unfiltered", action="store_true", help="write the snapshots as pinmon sees them")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("record_demo: run as root, so the demo shows every process as pinmon run by root does",
              file=sys.stderr)
        return 2
    py = sys.executable
    col = LiveCollector(interval_s=1.0)
    first = col.snapshot()
    if first.host.kernel_pinned_bytes is None:
        print("record_demo: this kernel has no pinned-page count (FOLL_PIN in /proc/vmstat): the demo"
              " would lack the kernel and unattributed lines", file=sys.stderr)
        return 2
    total = first.host.effective_mem_limit_bytes or first.host.mem_total_bytes
    hog_bytes = int(total * a.hog_fraction)
    pending = sorted(plan(py, a.engine, hog_bytes, a.hog_step_s), key=lambda p: p[0])
    groups = {} if a.no_groups else make_groups(int(hog_bytes / 0.7))
    end = duration_s(hog_bytes, a.hog_step_s)
    box = box_filter(a.unfiltered, a.box_process, a.box_cgroup)
    rec = Recorder(a.out)
    procs = []
    probe_lock = threading.Lock()
    last_probe = [None]

    def probe():
        with probe_lock:
            snap = col.snapshot()
            link = snap.gpus[0].link.theoretical_bytes_per_s if snap.gpus else None
            r = run_probe("quick", gpu_index=0, link_theoretical_bytes_per_s=link)
            col.set_probe(r)
            last_probe[0] = time.time()

    t0 = time.time()
    threading.Thread(target=probe, daemon=True).start()
    next_t = t0 + 1.0
    try:
        while time.time() - t0 < end:
            now = time.time() - t0
            while pending and pending[0][0] <= now:
                _, argv, group = pending.pop(0)
                move = in_group(groups[group]) if group in groups else None
                procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                              cwd=ROOT, preexec_fn=move))
            procs = [p for p in procs if p.poll() is None]  # reap the workloads that ended
            if last_probe[0] and time.time() - last_probe[0] > a.probe_every and not probe_lock.locked():
                threading.Thread(target=probe, daemon=True).start()
            time.sleep(max(0.0, next_t - time.time()))
            next_t += 1.0
            s = col.snapshot()
            if box is not None:
                s = box(s)
            rec.write(s)
            h = s.host
            print(f"{time.time() - t0:6.1f}s kernel={(h.kernel_pinned_bytes or 0) / 2**30:6.2f}GiB"
                  f" unattributed={(h.unattributed_pinned_bytes or 0) / 2**30:6.2f}GiB"
                  f" rx={[round((g.pcie.rx_bytes_per_s or 0) / 1e9, 1) for g in s.gpus]}"
                  f" traced={[p.pid for p in s.processes if p.source == 'traced']}", flush=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
        rec.close()
        col.close()
        if groups:
            time.sleep(1.0)  # the killed workloads' exits are reaped before their cgroups go
            remove_groups()
    print("wrote", a.out, rec.count, "snapshots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
