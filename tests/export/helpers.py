"""Hand-made snapshots and a parser of the exporter's text for the export tests."""
from prometheus_client.parser import text_string_to_metric_families

from pinmon.export import ExportState, build_registry, metrics_text
from pinmon.model import (Finding, Gpu, HostMemory, Link, Pcie, ProbeMeasurement, ProbeResult, ProcessPinned,
                          Snapshot)

GIB = 1 << 30
MIB = 1 << 20
UUID0 = "GPU-00000000-0000-0000-0000-000000000000"
UUID1 = "GPU-11111111-1111-1111-1111-111111111111"


def gpu(index=0, uuid=UUID0, rx=1000, tx=500, interval=1.0, method="counters", lost=False, **link):
    link = {"gen": 5, "gen_max": 5, "width": 16, "width_max": 16, "theoretical_bytes_per_s": 63.0e9,
            "max_theoretical_bytes_per_s": 63.0e9, **link}
    pcie = Pcie(rx_bytes_per_s=None if rx is None else rx / interval,
                tx_bytes_per_s=None if tx is None else tx / interval, method=method,
                rx_bytes=rx if method == "counters" else None, tx_bytes=tx if method == "counters" else None,
                interval_s=interval, replay_delta=3, recovery_delta=7, error_delta=2,
                counter_deltas={"replay": 3, "l0_to_recovery": 7, "bad_tlp": 2, "lane_error": None})
    return Gpu(index=index, name="NVIDIA H200", uuid=uuid, pci_bus_id=f"00000000:{index:02X}:00.0",
               link=Link(**link), pcie=pcie, memory_total_bytes=141 * GIB, memory_used_bytes=GIB, lost=lost)


def probe(time=990.0):
    rows = [ProbeMeasurement(kind="copy", memory=m, size_bytes=64 * MIB, direction=d, bytes_per_s=r, seconds=0.01, repeats=8)
            for m, d, r in [("pinned", "h2d", 55e9), ("pageable", "h2d", 8.8e9),
                            ("pinned", "d2h", 55.1e9), ("pageable", "d2h", 15.5e9)]]
    rows.append(ProbeMeasurement(kind="copy", memory="pinned", size_bytes=4096, direction="h2d", bytes_per_s=1e9))
    return ProbeResult(time=time, gpu_index=0, kind="quick", link_theoretical_bytes_per_s=63.0e9, duration_s=0.8,
                       max_pinned_bytes=256 * MIB, measurements=tuple(rows))


def procs(n):
    return tuple(ProcessPinned(pid=100 + i, name=f"job{i}", user="alice", pinned_bytes=(i + 1) * MIB,
                               write_combined_bytes=i, source="traced" if i == 0 else "est.") for i in range(n))


def snapshot(time=1000.0, gpus=None, processes=None, with_probe=True, **host):
    h = {"hostname": "box", "mem_total_bytes": 128 * GIB, "mem_available_bytes": 100 * GIB,
         "effective_mem_limit_bytes": 96 * GIB, "cgroup_limit_bytes": 96 * GIB, "swap_used_bytes": 0,
         "shmem_bytes": 5 * MIB, "mlocked_bytes": 0, "pinned_bytes_est": 10 * GIB,
         "write_combined_bytes_est": MIB, "memlock_limit_bytes": 8 * MIB, "memlock_unlimited": False,
         "kernel_pinned_bytes": 12 * GIB, "kernel_pinned_bytes_by_node": {"0": 5 * GIB, "1": 7 * GIB},
         "pinned_bytes_total": 12 * GIB + MIB, "pinned_bytes_source": "kernel", "unattributed_pinned_bytes": 2 * GIB,
         "numa_nodes": (0, 1), **host}
    return Snapshot(time=time, host=HostMemory(**h), gpus=(gpu(),) if gpus is None else tuple(gpus),
                    processes=procs(3) if processes is None else tuple(processes),
                    probe=probe() if with_probe else None, interval_s=1.0)


def finding(rule="pinned-ram-share", severity="critical", subject="host"):
    return Finding(rule=rule, severity=severity, subject=subject, message="m", advice="a")


def render(snapshots=(), findings=(), top=10, state=None):
    state = state or ExportState()
    for s in snapshots:
        state.add_snapshot(s)
    state.set_findings(findings)
    return metrics_text(build_registry(state, top))


def samples(text):
    """{(sample name, frozenset of labels): value} and the set of metric (family) names."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"duplicate series {key}"
            out[key] = s.value
    return out


def value(text, metric, **labels):
    found = [v for (n, labs), v in samples(text).items()
             if n == metric and all(dict(labs).get(k) == str(w) for k, w in labels.items())]
    assert len(found) <= 1, (metric, labels, found)
    return found[0] if found else None


def names(text):
    return {n for n, _ in samples(text)}


def write_recording(path, snaps):
    """A recording as ``pinmon record`` writes it (JSON lines; gzip for .gz)."""
    from pinmon.recording import Recorder

    with Recorder(str(path)) as rec:
        for s in snaps:
            rec.write(s)
    return str(path)


def recording_snapshots(n=3):
    """Three 1 s snapshots with growing traffic, a critical pinned share on the last one."""
    out = []
    for i in range(n):
        pinned = (10 + 25 * i) * GIB
        out.append(snapshot(time=2000.0 + i, gpus=[gpu(rx=(i + 1) * 10 ** 9, tx=(i + 1) * 10 ** 8)],
                            pinned_bytes_est=pinned,
                            processes=procs(2) + (procs(1)[0].__class__(pid=7, name="hog", user="bob",
                                                                        pinned_bytes=pinned),)))
    return out
