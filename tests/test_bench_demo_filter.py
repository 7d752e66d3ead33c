"""bench/demo_filter.py: the recording box's agent, its cgroup and the checkout's absolute path are taken
out of demo snapshots, with every total kept consistent with the rows left; the bundled demo has
none of them, and is the filter's own output."""
from __future__ import annotations

import dataclasses
import gzip
import json

import pytest

from pinmon.cli.commands.demo import demo_path
from pinmon.collect.processes.scan import ScanResult, scan_notice
from pinmon.model import GpuProcess, Snapshot
from tests.bench_scripts import load_bench
from tests.factories import GIB, MIB, box_kernel_snapshot, cgroup, gpu, moved, oom_kill, process, snapshot

mod = load_bench("demo_filter")
check = load_bench("check_demo")

AGENT = (1, "process_api")
WHY_ROOT = 0
BOX_GROUP = "cgroup//process_api/1a81521973ec6187569fc5597e4fed58"


# --- the scan's notice ------------------------------------------------------------------------------

@pytest.mark.parametrize("result", [
    ScanResult(denied=1, denied_pids=[AGENT]),
    ScanResult(denied=2, denied_pids=[AGENT, (77, "firecracker")]),
    ScanResult(denied=2, denied_pids=[(77, "firecracker"), AGENT], vanished=3),
    ScanResult(denied=1, denied_pids=[AGENT], vanished=2),
    ScanResult(denied=1, denied_pids=[AGENT], capped=[853]),
    ScanResult(denied=1, denied_pids=[AGENT], vanished=1, capped=[853, 752]),
    ScanResult(denied=3, denied_pids=[AGENT, (77, "firecracker"), (78, "sshd")]),
])
@pytest.mark.parametrize("euid", [0, 1000])
def test_a_notice_without_the_agent_reads_as_the_scan_writes_it_without_the_agent(result, euid):
    without = dataclasses.replace(result, denied=result.denied - 1,
                                  denied_pids=[p for p in result.denied_pids if p != AGENT])
    assert mod.notice_without(scan_notice(result, euid), ["process_api"]) == scan_notice(without, euid)


def test_a_notice_with_more_denied_than_named_keeps_the_count_of_the_rest():
    result = ScanResult(denied=9, denied_pids=[AGENT, (2, "a"), (3, "b"), (4, "c"), (5, "d")])
    text = mod.notice_without(scan_notice(result, 0), ["process_api"])
    assert text.startswith("process scan: skipped 8 denied access: pid 2 (a), pid 3 (b), pid 4 (c), pid 5 (d)"
                           " and 4 more (even as root")
    only = ScanResult(denied=3, denied_pids=[AGENT])  # the agent named, two more unnamed
    assert mod.notice_without(scan_notice(only, 0), ["process_api"]) == scan_notice(
        ScanResult(denied=2), 0)


@pytest.mark.parametrize("text", [
    "process scan: skipped 1 denied access: pid 77 (firecracker) (even as root: pinmon lacks CAP_SYS_PTRACE)",
    "process scan: skipped 2 denied access (run as root to see every process)",
    "pinned: the kernel's count is host-wide (process_api)",
    "process scan: skipped 1 denied access: pid 1 (process_api) (something else)",  # not the scan's words
])
def test_other_notices_are_kept_as_they_are(text):
    assert mod.notice_without(text, ["process_api"]) == text


# --- command lines ----------------------------------------------------------------------------------

@pytest.mark.parametrize("cmdline, want", [
    ("/opt/venv/bin/python3 /work/main/bench/transfer_load.py 18", "/opt/venv/bin/python3 bench/transfer_load.py 18"),
    ("python3 /work/main/examples/wc_readback.py --seconds 14", "python3 examples/wc_readback.py --seconds 14"),
    ("python3 /work/mainline/x.py /srv/work/main/y.py --out=/work/main/z", None),  # not the checkout's arguments
    ("python3 -c \nimport x\n /work/main/examples/a.py", "python3 -c \nimport x\n examples/a.py"),
    (None, None),
])
def test_arguments_in_the_checkout_become_relative_to_it(cmdline, want):
    assert mod.relative(cmdline, "/work/main/") == (cmdline if want is None else want)
    assert mod.relative(cmdline, None) == cmdline


def test_key_and_group_paths():
    assert mod.key_path(BOX_GROUP) == "/process_api/1a81521973ec6187569fc5597e4fed58"
    assert mod.key_path("user/1000/cgroup//user.slice/x") == "/user.slice/x"
    assert mod.key_path("docker/" + "ab" * 32 + "@/docker/" + "ab" * 32) == "/docker/" + "ab" * 32
    assert mod.key_path("slurm/4711/0") is None and mod.key_path("docker/" + "ab" * 32) is None
    assert mod.under("/process_api", ["/process_api/"]) and mod.under("/process_api/x", ["/process_api"])
    assert not mod.under("/process_apix/y", ["/process_api"]) and not mod.under(None, ["/process_api"])
    shown_tail = cgroup(BOX_GROUP, "cgroup", "/process_api/…", path="…c5597e4fed58")
    assert mod.group_path(shown_tail) == "/process_api/1a81521973ec6187569fc5597e4fed58"


# --- snapshots --------------------------------------------------------------------------------------

def box_snapshot(agent_group: str = "docker/agent", t: float = 0.0) -> Snapshot:
    """A one-node host: the agent (pid 1) in a group it shares with a workload (pid 20), a recorder and
    a workload in the agent's own cgroup, a job; the kernel counts what the rows hold and 1 GiB more."""
    agent = process(1, "process_api", cmdline="/usr/bin/process_api", cgroup=agent_group, pinned_bytes=64 * MIB,
                    write_combined_bytes=16 * MIB, vm_pinned_bytes=32 * MIB, gpu_indices=(0,))
    shared = process(20, "python3", cmdline="python3 /work/main/examples/a.py", cgroup=agent_group,
                     pinned_bytes=128 * MIB, write_combined_bytes=0)
    recorder = process(30, "python3", cmdline="python3 bench/record_demo.py out.jsonl.gz", cgroup=BOX_GROUP,
                       pinned_bytes=8 * MIB, call_sites={"alloc": "/work/main/examples/a.py:3"})
    job = process(40, "python3", cmdline="/opt/py /work/main/bench/transfer_load.py 18", cgroup="slurm/1/0",
                  pinned_bytes=2 * GIB)
    rows = (agent, shared, recorder, job)
    explained = sum((p.held.pinned_bytes or 0) + (p.held.vm_pinned_bytes or 0) for p in rows)
    kernel, wc = explained + GIB, 16 * MIB
    groups = (cgroup(agent_group, "docker", "docker agent", path="/docker/agent", current_bytes=4 * GIB,
                     pinned_bytes=192 * MIB, write_combined_bytes=16 * MIB, vm_pinned_bytes=32 * MIB, processes=2),
              cgroup(BOX_GROUP, "cgroup", "/process_api/1a81521973ec6187569fc5597e4fed58",
                     path="/process_api/1a81521973ec6187569fc5597e4fed58", limit_path="/process_api",
                     pinned_bytes=8 * MIB, processes=1),
              cgroup("slurm/1/0", "slurm", "job 1.0", path="/slurmstepd.scope/job_1/step_0", job="1", step="0",
                     pinned_bytes=2 * GIB, processes=1))
    return snapshot(
        time=t, processes=rows, cgroups=groups,
        gpus=[gpu(0, processes=(GpuProcess(1, 512 * MIB), GpuProcess(20, 512 * MIB)))],
        notices=(scan_notice(ScanResult(denied=1, denied_pids=[AGENT], capped=[20]), 0),),
        oom_kills=(oom_kill(process="process_api", pid=1), oom_kill(key=BOX_GROUP, path="/process_api/1a81",
                                                                     pid=9), oom_kill(pid=5)),
        pinned_bytes_est=sum(p.held.pinned_bytes or 0 for p in rows), write_combined_bytes_est=wc,
        kernel_pinned_bytes=kernel, kernel_pinned_bytes_by_node={"0": kernel}, pinned_bytes_total=kernel + wc,
        pinned_bytes_source="kernel", unattributed_pinned_bytes=GIB, numa_nodes=(0,))


def test_the_agent_its_cgroup_and_the_checkout_path_leave_a_snapshot():
    before = box_snapshot()
    after = mod.BoxFilter()(before)
    assert [p.pid for p in after.processes] == [20, 30, 40]
    assert [g.key for g in after.cgroups] == ["docker/agent", "slurm/1/0"]
    rows = {p.pid: p for p in after.processes}
    assert rows[30].identity.cgroup is None  # a workload in the agent's cgroup: in no group
    assert rows[20].identity.cgroup == "docker/agent" and rows[40].identity.cgroup == "slurm/1/0"
    assert rows[20].identity.cmdline == "python3 examples/a.py"
    assert rows[40].identity.cmdline == "/opt/py bench/transfer_load.py 18"
    assert rows[30].call_sites == {"alloc": "examples/a.py:3"}
    assert [gp.pid for gp in after.gpus[0].processes] == [20]
    assert after.notices == ("process scan: pinned estimate of pid 20 capped to what is resident (its"
                             " pinned-looking mappings are larger than that)",)
    assert [k.pid for k in after.oom_kills] == [5]
    assert "process_api" not in json.dumps(after.to_dict()) and "/work/" not in json.dumps(after.to_dict())


def test_a_dropped_row_leaves_the_sums_it_was_in_and_adds_nothing_unattributed():
    before = box_snapshot()
    after = mod.BoxFilter()(before)
    h0, h = before.host, after.host
    assert h.pinned_bytes_est == h0.pinned_bytes_est - 64 * MIB
    assert h.write_combined_bytes_est == 0
    assert h.unattributed_pinned_bytes == h0.unattributed_pinned_bytes == GIB
    # The pages the agent's row explained (pinned and VmPin) leave the kernel's count, per node too.
    assert h.kernel_pinned_bytes == h0.kernel_pinned_bytes - 96 * MIB
    assert h.kernel_pinned_bytes_by_node == {"0": h.kernel_pinned_bytes}
    assert h.pinned_bytes_total == h.kernel_pinned_bytes + h.write_combined_bytes_est
    rows_explain = sum((p.held.pinned_bytes or 0) + (p.held.vm_pinned_bytes or 0) for p in after.processes)
    assert h.kernel_pinned_bytes - h.unattributed_pinned_bytes == rows_explain
    # The shared group: the workload's bytes alone, one process.
    g = next(g for g in after.cgroups if g.key == "docker/agent")
    assert (g.held.pinned_bytes, g.held.write_combined_bytes, g.held.vm_pinned_bytes, g.processes) == \
        (128 * MIB, 0, None, 1)
    assert g.limit.current_bytes == 4 * GIB  # the kernel's figure of the group is kept


def test_the_kernel_count_never_goes_below_what_the_rows_left_explain():
    # The rows claim more than the kernel counts (estimates over shared or plain mappings): the agent's
    # share is at most what the rows explained, and nothing turns unattributed.
    s = box_snapshot()
    s = dataclasses.replace(s, host=dataclasses.replace(s.host, kernel_pinned_bytes=64 * MIB,
                                                        kernel_pinned_bytes_by_node={"0": 64 * MIB},
                                                        unattributed_pinned_bytes=0))
    h = mod.BoxFilter()(s).host
    assert h.kernel_pinned_bytes == 0 and h.unattributed_pinned_bytes == 0
    assert h.kernel_pinned_bytes_by_node == {"0": 0}


def test_on_two_nodes_the_agents_pages_leave_the_nodes_they_were_on():
    s = box_snapshot()
    rows = tuple(moved(p, pinned_bytes_by_node={"1": 64 * MIB}) if p.pid == 1 else p for p in s.processes)
    k = s.host.kernel_pinned_bytes
    host = dataclasses.replace(s.host, kernel_pinned_bytes_by_node={"0": k - GIB, "1": GIB}, numa_nodes=(0, 1))
    h = mod.BoxFilter()(dataclasses.replace(s, processes=rows, host=host)).host
    assert h.kernel_pinned_bytes_by_node == {"0": k - GIB, "1": GIB - 96 * MIB}


def test_without_the_kernels_count_the_estimates_make_the_total():
    s = box_snapshot()
    host = dataclasses.replace(s.host, kernel_pinned_bytes=None, kernel_pinned_bytes_by_node=None,
                               unattributed_pinned_bytes=None, pinned_bytes_source="est.",
                               pinned_bytes_total=s.host.pinned_bytes_est + s.host.write_combined_bytes_est)
    h = mod.BoxFilter()(dataclasses.replace(s, host=host)).host
    assert h.pinned_bytes_total == h.pinned_bytes_est == s.host.pinned_bytes_est - 64 * MIB
    assert h.kernel_pinned_bytes is None and h.unattributed_pinned_bytes is None


def test_a_group_only_the_agent_had_stays_out_after_its_rows_are_gone():
    box = mod.BoxFilter()
    first = box_snapshot()
    alone = dataclasses.replace(first, processes=tuple(p for p in first.processes if p.pid != 20))
    assert "docker/agent" not in [g.key for g in box(alone).cgroups]
    gone = dataclasses.replace(first, processes=tuple(p for p in first.processes if p.pid not in (1, 20)))
    assert "docker/agent" not in [g.key for g in box(gone).cgroups]
    # A fresh filter that never saw the agent in it keeps a gone group: it may be a workload's.
    assert "docker/agent" in [g.key for g in mod.BoxFilter()(gone).cgroups]


def test_the_rule_is_what_its_arguments_say():
    s = box_snapshot()
    nothing = mod.BoxFilter(processes=(), cgroup_prefixes=(), checkout=None)(s)
    assert nothing == s
    other = mod.BoxFilter(processes=("agentd",), cgroup_prefixes=("/slurmstepd.scope",), checkout="/opt")(s)
    assert [p.pid for p in other.processes] == [1, 20, 30, 40]
    assert [g.key for g in other.cgroups] == ["docker/agent", BOX_GROUP]
    assert {p.pid: p.identity.cmdline for p in other.processes}[40] == "py /work/main/bench/transfer_load.py 18"


def test_a_snapshot_of_a_box_without_the_agent_is_unchanged():
    s = box_kernel_snapshot(0)
    assert mod.BoxFilter()(s) == s


def test_record_demo_writes_through_the_filter_with_the_boxs_values_and_its_own_checkout():
    rec = load_bench("record_demo")
    box = rec.box_filter(False, None, None)
    assert (box.processes, box.cgroup_prefixes, box.checkout) == (("process_api",), ("/process_api",), rec.ROOT)
    other = rec.box_filter(False, ["agentd"], ["/agent.slice"])
    assert (other.processes, other.cgroup_prefixes) == (("agentd",), ("/agent.slice",))
    assert rec.box_filter(True, None, None) is None
    s = dataclasses.replace(box_snapshot(), processes=(process(5, "python3", cmdline=f"python3 {rec.ROOT}/examples/a.py"),))
    assert box(s).processes[0].identity.cmdline == "python3 examples/a.py"


def test_check_demo_names_the_recording_boxs_noise():
    lacking = check.missing(check.survey([box_snapshot()]))
    assert any("names the recording box's agent" in m for m in lacking)
    assert any("pid 1 (process_api)" in m and "own" in m for m in lacking)
    assert any("group /process_api/" in m for m in lacking)
    assert any("checkout path /work/main/examples/a.py" in m for m in lacking)
    assert any("checkout path /work/main/bench/transfer_load.py" in m for m in lacking)
    found = check.survey([mod.BoxFilter()(box_snapshot())])
    assert found["recording_box"] == {} and not any("recording box" in m for m in check.missing(found))


# --- the file: deterministic, and the bundled demo ---------------------------------------------------

def test_the_script_filters_a_v1_recording_into_v2_lines_deterministically(tmp_path):
    v1 = {"schema": "pinmon.snapshot/1", "time": 1.0, "host": {"hostname": "vm"},
          "notices": [scan_notice(ScanResult(denied=1, denied_pids=[AGENT]), 0)],
          "processes": [{"pid": 5, "name": "python3", "cmdline": "python3 /work/main/bench/transfer_load.py 8",
                         "cgroup": BOX_GROUP, "pinned_bytes": 4096}],
          "cgroups": [{"key": BOX_GROUP, "kind": "cgroup", "name": "/process_api/1a81",
                       "path": "/process_api/1a81", "processes": 1}]}
    src = tmp_path / "in.jsonl.gz"
    with gzip.open(src, "wt") as f:
        f.write(json.dumps(v1) + "\n")
    out = tmp_path / "out.jsonl.gz"
    assert mod.main([str(src), str(out)]) == 0
    first = out.read_bytes()
    (line,) = mod.read_lines(str(out))
    snap = json.loads(line)
    assert snap["schema"] == "pinmon.snapshot/2" and snap["notices"] == [] and snap["cgroups"] == []
    assert snap["processes"][0]["identity"]["cmdline"] == "python3 bench/transfer_load.py 8"
    assert mod.main([str(src), str(out) + ".2"]) == 0 and (tmp_path / "out.jsonl.gz.2").read_bytes() == first
    assert mod.main([str(out)]) == 0 and out.read_bytes() == first  # its own output: nothing to filter


def demo_text() -> str:
    with gzip.open(demo_path(), "rt", encoding="utf-8") as f:
        return f.read()


def test_the_bundled_demo_shows_nothing_of_the_recording_box():
    text = demo_text()
    assert "process_api" not in text and "/work/" not in text
    snaps = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert snaps and {s["schema"] for s in snaps} == {"pinmon.snapshot/2"}
    denied = [n for s in snaps for n in s["notices"] if "denied access" in n]
    assert not [n for n in denied if "pid 1 " in n]
    # The workloads are named by their place in the checkout.
    commands = {p["identity"]["cmdline"] for s in snaps for p in s["processes"]}
    assert any(" bench/transfer_load.py " in c for c in commands)
    assert any(" examples/wc_readback.py " in c for c in commands)


def test_the_bundled_demo_is_the_filters_own_output():
    lines = mod.read_lines(demo_path())
    assert mod.filter_lines(lines, mod.BoxFilter()) == lines
