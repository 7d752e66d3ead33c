"""The check report's GPU lines (link labels, traffic and its share of the link) and its processes
by group (container, pod, job) with each group's limit and pinned share."""
from pinmon.model import Gpu, Link, Pcie
from pinmon.outputs.text import gpu_line
from tests import factories as make
from tests.factories import MIB

GEN5_X16 = 63.0e9


def gpu(rx, tx, gen=5, width=16):
    return Gpu(index=0, name="H200", link=Link(gen=gen, gen_max=5, width=width, width_max=16,
                                               theoretical_bytes_per_s=GEN5_X16),
               pcie=Pcie(rx_bytes_per_s=rx, tx_bytes_per_s=tx, method="gpm"))


def test_traffic_and_its_share_of_the_link():
    line = gpu_line(gpu(12.6e9, 6.3e9)).splitlines()[1]
    assert line == ("    link Gen5 x16 (max Gen5 x16, 63.0 GB/s now)  RX 12.6 GB/s  TX 6.3 GB/s"
                    " (link bytes, GPM; 30% of link)")


def test_share_of_the_link_counts_the_direction_that_has_a_reading():
    assert "RX n/a  TX 6.3 GB/s (link bytes, GPM; 10% of link)" in gpu_line(gpu(None, 6.3e9))
    assert "RX n/a  TX n/a (link bytes, GPM; n/a of link)" in gpu_line(gpu(None, None))


def test_unknown_link_figures():
    assert "link Gen? x? " not in gpu_line(gpu(0.0, 0.0, gen=None, width=None))
    assert "link n/a (max Gen5 x16," in gpu_line(gpu(0.0, 0.0, gen=None, width=None))
    assert "link Gen4 x? (max Gen5 x16," in gpu_line(gpu(0.0, 0.0, gen=4, width=None))


def test_odd_node_keys_from_a_snapshot_file_print():
    """A recording's node key made of digits that are not ASCII is a name: the report prints it."""
    from pinmon.model import HostMemory, Snapshot
    from pinmon.outputs.text import format_check

    by_node = {"\u00b2": 5 << 30, "0": 3 << 30}
    snap = Snapshot.from_dict(Snapshot(
        time=1000.0, host=HostMemory(hostname="h", kernel_pinned_bytes=8 << 30, unattributed_pinned_bytes=0,
                                     kernel_pinned_bytes_by_node=by_node, numa_nodes=(0, 1)),
        processes=(make.process(1, "python", pinned_bytes=8 << 30, pinned_bytes_by_node=by_node),)).to_dict())
    text = format_check(snap, [])
    assert "by node: node0 3.0 GiB, node\u00b2 5.0 GiB" in text and "\u00b2 (62%)" in text


# --- processes by group -------------------------------------------------------------------------------

def test_check_groups_processes_by_container_pod_and_job_with_each_limit():
    from pinmon.outputs.text import format_check

    text = format_check(make.box_groups_snapshot(), [])
    lines = text.splitlines()
    pod = lines.index(next(ln for ln in lines if "pod ml/trainer-7f9c/worker" in ln))
    job = lines.index(next(ln for ln in lines if ln.startswith("  Slurm job 4711 step 0: ")))
    loose = lines.index(next(ln for ln in lines if ln.strip() == "no group"))
    assert "limit 512.0 GiB, pinned 401.0 GiB = 78% of it" in lines[pod]
    assert "limit 64.0 GiB, pinned 21.0 GiB = 33% of it" in lines[job]
    assert pod < job < loose
    assert "Processes holding pinned memory by container, pod or job (pinned from" in text  # no stray comma
    pids = {int(ln.split()[0]): i for i, ln in enumerate(lines) if ln[:12].strip().isdigit()}
    assert pod < pids[4242] < job and pod < pids[5151] < job and job < pids[6060] < loose < pids[7070]


def test_a_group_is_named_once_by_its_kind():
    """"Docker container 1a2b...", "pod ns/pod/container", "Slurm job 4711 step 0": the kind's word is
    not repeated by the collector's name ("docker 1a2b...", "pod 5e1c...", "job 4711.0")."""
    from pinmon.outputs.text import group_head

    docker = make.cgroup("docker/" + "b8" * 32, "docker", "docker b8b8b8b8b8b8", container_id="b8" * 32)
    unnamed_pod = make.cgroup("pod/7e3c", "pod", "pod 7e3c1234/abcdef012345")
    job = make.cgroup("slurm/4711/0", "slurm", "job 4711.0", job="4711", step="0")
    assert docker.subject == "Docker container b8b8b8b8b8b8" and docker.short == "docker b8b8b8b8b8b8"
    assert unnamed_pod.subject == "pod 7e3c1234/abcdef012345"
    assert job.subject == "Slurm job 4711 step 0" and job.short == "job 4711.0"
    assert group_head(docker).startswith("Docker container b8b8b8b8b8b8: ")
    for g in (docker, unnamed_pod, job):
        head = group_head(g).lower()
        assert "docker docker" not in head and "pod pod" not in head and "job step job" not in head


def test_a_group_says_its_oom_kills_and_its_hostile_name_is_printable():
    from pinmon.outputs.text import group_head

    g = make.cgroup(name="evil\x1b]0;PWNED\x07", limit_bytes=None, pinned_bytes=make.GIB,
                    oom_kills=3, oom_kills_at_start=1)
    head = group_head(g)
    assert "\x1b" not in head and "\\x1b" in head and "no limit, pinned 1.0 GiB" in head
    assert "2 OOM kill(s) since start" in head
    # no rise since start: the kernel's lifetime count, from before pinmon started
    assert group_head(make.moved(g, oom_kills=1)).endswith(", 1 OOM kill(s) before pinmon started")
    assert "OOM" not in group_head(make.moved(g, oom_kills=0, oom_kills_at_start=0))
    capped = make.moved(g, limit_bytes=4 * make.GIB, capped=True)
    assert "pinned 1.0 GiB (held to its memory in use) = 25% of it" in group_head(capped)


def test_a_vmpin_only_process_shows_and_sorts_by_what_it_holds():
    """An io_uring user pinning 640 MiB (VmPin only) is the largest holder: its PINNED is its held
    bytes, not n/a, and it comes before rows holding less; a write-combined holder counts its WC."""
    from pinmon.outputs.text import process_table

    rows = [make.process(1, "zero", pinned_bytes=0), make.process(2, "uring", vm_pinned_bytes=640 * MIB),
            make.process(3, "small", pinned_bytes=80 * MIB, write_combined_bytes=100 * MIB),
            make.process(4, "mid", pinned_bytes=160 * MIB)]
    lines = process_table(rows)
    assert lines[0].split()[:5] == ["PID", "USER", "PINNED", "VMPIN", "WC"]
    assert [ln.split()[0] for ln in lines[1:]] == ["2", "3", "4", "1"]
    assert lines[1].split()[2:6] == ["640.0", "MiB", "640.0", "MiB"]  # PINNED, then its VMPIN part
    assert "180.0 MiB" in lines[2]  # 80 MiB pinned + 100 MiB write-combined


def test_oom_kills_from_the_kernels_log_have_their_own_section():
    from pinmon.advise import advise
    from pinmon.outputs.text import format_check, oom_kill_lines

    kills = tuple(make.oom_kill(time=100.0 + i, pid=i + 1) for i in range(12)) + (
        make.oom_kill(time=500.0, pid=99, process="\x1b]0;pwn\x07", name="user 1500: \x1b[2Jpodman x", kind="podman",
                      key="user/1500/podman/x@/u", job=None, step=None,
                      memory_limit_bytes=None, shmem_rss_bytes=None),)
    snap = make.snapshot(oom_kills=kills)
    text = format_check(snap, advise([snap]))
    assert "Memory cgroup OOM kills in the kernel's log (the groups may be gone)" in text
    assert "slurm job 4711.0: python3 pid 12 uid 1001, limit 64.0 GiB, shmem 48.0 GiB of 60.0 GiB resident (80%)" in text
    assert "... and 3 more" in text and "\x1b" not in text and "\x07" not in text
    lines = oom_kill_lines(kills)
    assert "pid 99" in lines[0] and "limit n/a" in lines[0] and "shmem" not in lines[0]  # newest first
    assert "oom-killed [Slurm job 4711 step 0]" in text


def test_a_group_says_its_kills_before_pinmon_started():
    from pinmon.outputs.text import group_head

    g = make.cgroup(oom_kills=2, oom_kills_at_start=2, limit_bytes=1 << 30)
    assert group_head(g).endswith(", 2 OOM kill(s) before pinmon started")
