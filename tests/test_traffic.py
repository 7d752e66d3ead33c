"""model/traffic.py: how much of each GPU's link the measured copies explain, and where a copy's GPU
cannot be known; and the lines check and attach print of it."""
from pinmon.model import GpuProcess
from pinmon.model.traffic import explain_traffic
from pinmon.outputs.text import format_check, traffic_lines
from tests.factories import copies, gpu, process, snapshot, stat


def attached(pid, *stats, **kw):
    return process(pid, source="attached", copies=copies("uprobes", stats), **kw)


def test_each_gpus_rx_and_tx_with_the_copies_on_it():
    snap = snapshot(gpus=[gpu(0, rx=40e9, tx=2e9, processes=(GpuProcess(123), GpuProcess(456))),
                          gpu(1, rx=5e9, tx=0.0)],
                    processes=[attached(123, stat("h2d", "pinned", 32e9), stat("d2h", "pinned", 1e9), gpu_indices=(0,)),
                               attached(456, stat("h2d", "pageable", 6e9), gpu_indices=(0,)),
                               attached(789, stat("h2d", "pinned", 3e9), gpu_indices=(0, 1)),
                               process(999, pinned_bytes=1 << 30)])
    t = explain_traffic(snap)
    rx0 = next(x for x in t.links if (x.gpu_index, x.direction) == (0, "h2d"))
    assert [(s.pid, s.memory, s.bytes_per_s) for s in rx0.shares] == [(123, "pinned", 32e9), (456, "pageable", 6e9)]
    assert rx0.explained_bytes_per_s == 38e9 and rx0.explained_share == 38e9 / 40e9 and rx0.word == "RX"
    tx0 = next(x for x in t.links if (x.gpu_index, x.direction) == (0, "d2h"))
    assert tx0.explained_bytes_per_s == 1e9
    rx1 = next(x for x in t.links if (x.gpu_index, x.direction) == (1, "h2d"))
    assert rx1.shares == () and rx1.explained_share == 0.0
    assert [(s.pid, s.direction) for s in t.unplaced] == [(789, "h2d")]        # on two GPUs: not guessed
    text = "\n".join(traffic_lines(t))
    assert "GPU 0 RX 40.0 GB/s (link bytes): 32.0 GB/s pid 123 (python), pinned; 6.0 GB/s pid 456 (python)," \
           " pageable = 95% explained" in text
    assert "GPU not known" in text and "pid 789" in text
    assert "Link traffic the measured copies explain" in format_check(snap, [])
    assert t.to_dict()["links"][0]["shares"][0]["pid"] == 123


def test_one_gpu_takes_every_copy_and_no_copies_explain_nothing():
    snap = snapshot(gpus=[gpu(0, rx=None, tx=None)], processes=[attached(1, stat("h2d", "pinned", 1e9))])
    t = explain_traffic(snap)
    assert t.links[0].shares[0].pid == 1 and t.links[0].explained_share is None and not t.unplaced
    assert not explain_traffic(snapshot(gpus=[gpu(0)], processes=[process(1)])).measured
    assert "Link traffic" not in format_check(snapshot(gpus=[gpu(0)], processes=[process(1)]), [])
    no_gpu = explain_traffic(snapshot(processes=[attached(1, stat("h2d", "pinned", 1e9))]))
    assert no_gpu.links == () and no_gpu.unplaced and "no GPU monitored" in traffic_lines(no_gpu)[0]
