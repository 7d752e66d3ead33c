"""CPU per snapshot of container/pod/job ownership and cgroup limits: 50 groups x 10 processes.

Each process's owner comes from /proc/PID/cgroup (``proc_owner.OwnerCache``), each group's limit,
usage and OOM count from its cgroup (``limits.CgroupMemoryReader``). Measured, CPU of this thread
(``time.thread_time``) per snapshot:

- ``cold``: nothing kept: every process's cgroup file read (each distinct text parsed once), every
  group's limit walk, usage and OOM count read (the first snapshot, the most any snapshot costs);
- ``steady``: the caches a live collector keeps, over ``--snapshots`` snapshots one simulated
  second apart (the caches' clock is advanced by 1 s a snapshot, so their recheck cycles, 30 s for
  owners and 5 s for limits and OOM counts, are covered without waiting): the added cost per snapshot
  of a 1 Hz monitor;
- ``vmpin_scan``: reading and parsing every process's /proc/PID/status for ``VmPin``;
- ``baseline``: one ``LiveCollector.snapshot()`` (NVML where there is a GPU) on this machine,
  steady, as pinmon does today, for the ratio ``steady / baseline`` (goal: under 0.25).

``--real`` (root) makes the 50 cgroups for real, under this process's v1 memory cgroup or the v2
root, in a Kubernetes layout (``kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope``), with
10 ``sleep`` processes each, and removes them after; otherwise the tree is a fake one in a temporary
directory (the same files, on an ordinary file system, read through a root prefix).

    python3 bench/cgroup_cost.py OUT.json [--real] [--groups 50] [--per-group 10] [--snapshots 120]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pinmon.collect.cgroups.limits import CgroupMemoryReader
from pinmon.collect.cgroups.mounts import read_mounts, to_dir
from pinmon.collect.cgroups.ownership import parse_proc_cgroup
from pinmon.collect.cgroups.proc_owner import OwnerCache
from pinmon.collect.cgroups.vmpin import parse_vmpin
from provenance import portable_argv, provenance

MIB = 1 << 20


class SimClock:
    """The caches' clock: one simulated second a snapshot."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _ids(i: int) -> tuple[str, str]:
    cid = hashlib.sha256(f"bench container {i}".encode()).hexdigest()
    return str(uuid.UUID(hashlib.md5(f"bench pod {i}".encode()).hexdigest())), cid


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def fake_tree(base: str, groups: int, per_group: int) -> tuple[str, str, list[int]]:
    """(root, proc root, pids) of a fake v2 node with ``groups`` pod containers."""
    _write(os.path.join(base, "proc/self/mountinfo"),
           "26 23 0:25 / /sys/fs/cgroup rw,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n")
    cg = os.path.join(base, "sys/fs/cgroup")

    def files(d: str, limit: str, current: int) -> None:
        _write(os.path.join(d, "memory.max"), limit + "\n")
        _write(os.path.join(d, "memory.current"), f"{current}\n")
        _write(os.path.join(d, "memory.events"), "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")

    files(os.path.join(cg, "kubepods.slice"), "max", 0)
    files(os.path.join(cg, "kubepods.slice/kubepods-burstable.slice"), "max", 0)
    pids, pid = [], 1000
    status = open("/proc/self/status").read()
    for i in range(groups):
        uid, cid = _ids(i)
        pod = f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid.replace('-', '_')}.slice"
        files(os.path.join(cg, pod), str(4 << 30), 2 << 30)
        files(os.path.join(cg, pod, f"cri-containerd-{cid}.scope"), "max", 2 << 30)
        for _ in range(per_group):
            _write(os.path.join(base, "proc", str(pid), "cgroup"), f"0::/{pod}/cri-containerd-{cid}.scope\n")
            _write(os.path.join(base, "proc", str(pid), "status"), status)
            pids.append(pid)
            pid += 1
    return base, os.path.join(base, "proc"), pids


class RealTree:
    """``groups`` real cgroups in a pod layout with ``per_group`` sleeping processes each."""

    def __init__(self, groups: int, per_group: int):
        mounts, why = read_mounts("/")
        with open("/proc/self/cgroup") as f:
            _v2, v1_mem, _ = parse_proc_cgroup(f.read())
        if mounts.v1_memory is not None:
            self.version, self.mount = 1, mounts.v1_memory
            parent, _ = to_dir(self.mount, v1_mem or "/")
        elif mounts.v2 is not None:
            self.version, self.mount = 2, mounts.v2
            parent = self.mount.mount_point  # the root delegates memory to its children
        else:
            raise SystemExit(f"no memory cgroup hierarchy: {why}")
        self.top = os.path.join(parent, f"pinmon-bench-{os.getpid()}")
        self.procs: list[subprocess.Popen] = []
        os.mkdir(self.top)
        self._enable(self.top)
        for i in range(groups):
            uid, cid = _ids(i)
            pod = os.path.join(self.top, f"kubepods-burstable-pod{uid.replace('-', '_')}.slice")
            os.mkdir(pod)
            self._enable(pod)
            self._write(pod, "memory.max" if self.version == 2 else "memory.limit_in_bytes", str(4 << 30))
            scope = os.path.join(pod, f"cri-containerd-{cid}.scope")
            os.mkdir(scope)
            for _ in range(per_group):
                p = subprocess.Popen(["sleep", "3600"])
                self.procs.append(p)
                self._write(scope, "cgroup.procs", str(p.pid))
        self.pids = [p.pid for p in self.procs]

    @staticmethod
    def _write(d: str, name: str, text: str) -> None:
        with open(os.path.join(d, name), "w") as f:
            f.write(text)

    def _enable(self, d: str) -> None:
        if self.version == 2:
            self._write(d, "cgroup.subtree_control", "+memory")

    def close(self) -> None:
        for p in self.procs:
            p.send_signal(signal.SIGKILL)
        for p in self.procs:
            p.wait()
        for d, _dirs, _files in sorted(os.walk(self.top), key=lambda x: -len(x[0])):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.1)


def _per_snapshot_ms(fn, n: int) -> float:
    fn()  # warm the interpreter's own caches (imports, regexes), not pinmon's
    c0 = time.thread_time()
    for _ in range(n):
        fn()
    return (time.thread_time() - c0) / n * 1000


def measure(root: str, proc_root: str, pids: list[int], snapshots: int, repeats: int) -> dict:
    def owners_cold():
        return OwnerCache(proc_root).owners(pids)

    groups = [o.cgroup for o in owners_cold().values() if o is not None]

    def limits_cold():
        with CgroupMemoryReader(root) as reader:
            reader.read(groups)

    def vmpin_scan():
        for pid in pids:
            try:
                with open(os.path.join(proc_root, str(pid), "status"), "rb") as f:
                    parse_vmpin(f.read())
            except OSError:
                pass

    clock = SimClock()
    cache = OwnerCache(proc_root, clock=clock)
    reader = CgroupMemoryReader(root, clock=clock)
    open_files = 0
    owner_s = limit_s = 0.0
    files0 = reader.files_read
    for _ in range(snapshots):
        clock.t += 1.0
        c0 = time.thread_time()
        owners = list(cache.owners(pids).values())
        c1 = time.thread_time()
        reader.read([o.cgroup for o in owners if o is not None])
        c2 = time.thread_time()
        owner_s += c1 - c0
        limit_s += c2 - c1
    open_files = reader.open_files
    reader.close()
    # What the live collector runs: every row's group, each group's figures, names and sums.
    from pinmon.collect.cgroups.groups import GroupCollector
    from pinmon.model import HeldMemory, ProcessIdentity, ProcessPinned

    rows = [ProcessPinned(pid=pid, identity=ProcessIdentity(name="sleep"), held=HeldMemory(pinned_bytes=1 << 20))
            for pid in pids]
    gclock = SimClock()
    collector = GroupCollector(proc_root, host_root=root, clock=gclock)
    annotate_s = 0.0
    for _ in range(snapshots):
        gclock.t += 1.0
        c0 = time.thread_time()
        _, made = collector.annotate(rows)
        annotate_s += time.thread_time() - c0
    collector.close()
    return {
        "processes": len(pids),
        "groups": len(set(groups)),
        "cold": {"owners_cpu_ms": _per_snapshot_ms(owners_cold, repeats),
                 "limits_cpu_ms": _per_snapshot_ms(limits_cold, repeats)},
        "steady": {"snapshots": snapshots,
                   "owners_cpu_ms": owner_s / snapshots * 1000,
                   "limits_cpu_ms": limit_s / snapshots * 1000,
                   "cpu_ms": (owner_s + limit_s) / snapshots * 1000,
                   "owner_files_read_per_snapshot": cache.reads / snapshots,
                   "cgroup_files_read_per_snapshot": (reader.files_read - files0) / snapshots,
                   "cgroup_files_kept_open": open_files,
                   "collector_annotate_cpu_ms": annotate_s / snapshots * 1000,
                   "collector_groups": len(made)},
        "vmpin_scan_cpu_ms": _per_snapshot_ms(vmpin_scan, repeats),
    }


def baseline(snapshots: int) -> dict:
    """Today's live snapshot on this machine, steady (after a warm-up), CPU ms per call."""
    from pinmon.collect.live import LiveCollector

    col = LiveCollector(interval_s=1.0)
    try:
        time.sleep(2.0)
        for _ in range(3):
            col.snapshot()
        c0 = time.thread_time()
        for _ in range(snapshots):
            snap = col.snapshot()
            time.sleep(0.02)  # spread out, as a 1 Hz loop would
        return {"snapshot_cpu_ms": (time.thread_time() - c0) / snapshots * 1000,
                "gpus": len(snap.gpus), "nvml_error": snap.nvml_error}
    finally:
        col.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--real", action="store_true", help="real cgroups and processes (root)")
    ap.add_argument("--groups", type=int, default=50)
    ap.add_argument("--per-group", type=int, default=10)
    ap.add_argument("--snapshots", type=int, default=120)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--no-baseline", action="store_true")
    args = ap.parse_args(argv)
    tmp = real = None
    try:
        if args.real:
            real = RealTree(args.groups, args.per_group)
            root, proc_root, pids, kind = "/", "/proc", real.pids, f"real cgroup v{real.version}"
        else:
            tmp = tempfile.mkdtemp(prefix="cgroup-cost-")
            root, proc_root, pids = fake_tree(tmp, args.groups, args.per_group)
            kind = "fake tree (regular files)"
        result = measure(root, proc_root, pids, args.snapshots, args.repeats)
        if not args.no_baseline:
            result["baseline"] = baseline(30)
    finally:
        if real is not None:
            real.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    result["tree"] = kind
    base = result.get("baseline", {}).get("snapshot_cpu_ms")
    result["ratio_steady_over_baseline"] = result["steady"]["cpu_ms"] / base if base else None
    result["ratio_collector_over_baseline"] = (result["steady"]["collector_annotate_cpu_ms"] / base) if base else None
    doc = {"schema": "pinmon.bench.cgroup_cost/1", "argv": portable_argv(sys.argv), "time": time.time(),
           "provenance": provenance(), **result}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    s, c = result["steady"], result["cold"]
    print(f"{kind}: {result['groups']} groups, {result['processes']} processes")
    print(f"  cold   owners {c['owners_cpu_ms']:.2f} ms + limits {c['limits_cpu_ms']:.2f} ms per snapshot")
    print(f"  steady owners {s['owners_cpu_ms']:.3f} ms + limits {s['limits_cpu_ms']:.3f} ms"
          f" = {s['cpu_ms']:.3f} ms per snapshot ({s['owner_files_read_per_snapshot']:.1f} cgroup files of"
          f" processes, {s['cgroup_files_read_per_snapshot']:.1f} cgroup files read)")
    print(f"  the live collector's groups (owners, figures, names, sums): {s['collector_annotate_cpu_ms']:.3f} ms"
          f" per snapshot for {s['collector_groups']} groups")
    print(f"  VmPin scan of every process: {result['vmpin_scan_cpu_ms']:.2f} ms")
    if base:
        print(f"  baseline snapshot {base:.2f} ms: steady/baseline = {result['ratio_steady_over_baseline']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
