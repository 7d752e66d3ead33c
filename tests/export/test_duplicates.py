"""A recording that lists a GPU or a pid twice: each is exported once (its first entry), so the scrape
stays valid and byte counters are not doubled."""
from tests import factories as make
from tests.factories import MIB, UUID0, UUID1

from .helpers import render, samples, value


def test_repeated_gpus_and_pids_give_one_series_each():
    gpus = [make.full_gpu(0, rx=1000), make.full_gpu(0, rx=5000), make.full_gpu(1, uuid=UUID1, rx=7),
            make.full_gpu(2, uuid=UUID0, rx=9)]
    rows = [make.process(5, "first", pinned_bytes=2 * MIB),
            make.process(5, "second", pinned_bytes=9 * MIB),
            make.process(6, "other", pinned_bytes=MIB)]
    text = render([make.full_snapshot(gpus=gpus, processes=rows)])
    samples(text)  # raises on a duplicate series
    # The first entry of each index / UUID wins; GPU 2 repeats GPU 0's UUID and is dropped.
    assert value(text, "pinmon_gpu_pcie_rx_bytes_total", gpu=0) == 1000
    assert value(text, "pinmon_gpu_pcie_rx_bytes_total", gpu=1) == 7
    assert value(text, "pinmon_gpu_up", gpu=2) is None
    assert value(text, "pinmon_process_pinned_bytes", pid=5) == 2 * MIB
    assert value(text, "pinmon_process_pinned_bytes", pid=5, name="second") is None
    assert value(text, "pinmon_processes") == 2
    assert text.count('pinmon_gpu_info{gpu="0"') == 1
