"""The link traffic joined to a probe result, and the verdict on a link shared with other traffic."""
import dataclasses

import pytest

from pinmon.model import Gpu, Link, Pcie, ProbeMeasurement, ProbeResult, Snapshot
from pinmon.tui.view.shared_link import (
    SHARED_MIN_BYTES_PER_S,
    join_link,
    link_join_due,
    other_traffic,
    probe_own_bytes,
    shared_directions,
)

from .fakes import GEN5_X16, MIB, T0, make_snapshot


def reading(t: float, rx: float, tx: float, method: str = "counters", gpu_index: int = 0,
            interval_s: float = 1.0) -> Snapshot:
    """A snapshot at ``t`` whose GPU ``gpu_index`` moved ``rx``/``tx`` bytes/s over the last interval."""
    s = make_snapshot(0, interval_s=interval_s)
    gpu = Gpu(index=gpu_index, name="NVIDIA H200",
              link=Link(gen=5, gen_max=5, width=16, width_max=16, theoretical_bytes_per_s=GEN5_X16),
              pcie=Pcie(rx_bytes_per_s=rx, tx_bytes_per_s=tx, method=method,
                        interval_s=interval_s if method != "sampled" else None))
    return dataclasses.replace(s, time=t, gpus=(gpu,))


def probe(t: float = T0, duration_s: float = 1.5, size: int = 64 * MIB, repeats: int = 5) -> ProbeResult:
    """A quick probe: pinned and pageable copies each way, 29.5 GB/s pinned H2D as on a shared link."""
    ms = tuple(ProbeMeasurement("copy", mem, size, d, rate, repeats=repeats)
               for mem, d, rate in (("pinned", "h2d", 29.5e9), ("pageable", "h2d", 6e9),
                                    ("pinned", "d2h", 54e9), ("pageable", "d2h", 11e9)))
    return ProbeResult(time=t, gpu_index=0, duration_s=duration_s, link_theoretical_bytes_per_s=GEN5_X16,
                       measurements=ms + (ProbeMeasurement("alloc", "pinned", size, seconds=0.01, repeats=3),))


def test_the_readings_whose_intervals_overlap_the_probe_are_averaged():
    # The probe runs T0 .. T0+1.5; the reading at T0 covers T0-1 .. T0 (before it) and the one at
    # T0+3 covers T0+2 .. T0+3 (after it): only T0+1 and T0+2 count.
    snaps = [reading(T0, 1e9, 0), reading(T0 + 1, 60e9, 1e9), reading(T0 + 2, 58e9, 3e9), reading(T0 + 3, 9e9, 9e9)]
    joined = join_link(probe(), snaps, 1.0)
    assert joined.link_rx_bytes_per_s == pytest.approx(59e9)
    assert joined.link_tx_bytes_per_s == pytest.approx(2e9)
    assert joined.link_window_s == pytest.approx(2.0)
    assert joined.link_method == "counters"
    assert joined.measurements == probe().measurements  # nothing else changes


def test_readings_of_other_gpus_or_without_rates_are_left_out():
    snaps = [reading(T0 + 1, 60e9, 0, gpu_index=1), reading(T0 + 1, None, None)]
    joined = join_link(probe(), snaps, 1.0)
    assert joined.link_window_s == 0.0  # joined, and nothing read
    assert joined.link_rx_bytes_per_s is None and joined.link_tx_bytes_per_s is None
    assert other_traffic(joined) is None and shared_directions(joined) == {}


def test_the_join_is_due_once_a_reading_covers_the_probes_end():
    p = probe()
    assert not link_join_due(p, reading(T0 + 1, 0, 0))
    assert link_join_due(p, reading(T0 + 2, 0, 0))
    assert not link_join_due(dataclasses.replace(p, duration_s=None), reading(T0 + 2, 0, 0))


def test_the_probes_own_bytes_count_every_copy_and_its_warm_up():
    rx, tx = probe_own_bytes(probe(size=64 * MIB, repeats=5))
    assert rx == tx == 2 * 6 * 64 * MIB  # pinned and pageable, 5 repeats and a warm-up each


def test_other_traffic_on_the_link_is_flagged_per_direction():
    # 59 GB/s RX from another job while the probe ran: its H2D figures are what was left.
    joined = join_link(probe(), [reading(T0 + 1, 60e9, 1e9), reading(T0 + 2, 58e9, 1e9)], 1.0)
    own_rx, _ = probe_own_bytes(joined)
    assert other_traffic(joined)[0] == pytest.approx(59e9 - own_rx / 2.0)
    assert set(shared_directions(joined)) == {"h2d"}


def test_a_link_that_carried_only_the_probe_is_not_flagged():
    own_rx, own_tx = probe_own_bytes(probe())
    # Link bytes = the probe's own plus 8% protocol overhead, spread over the 2 s of readings.
    snaps = [reading(T0 + k, own_rx * 1.08 / 2, own_tx * 1.08 / 2) for k in (1, 2)]
    joined = join_link(probe(), snaps, 1.0)
    assert joined.link_rx_bytes_per_s > 0
    assert all(rate < SHARED_MIN_BYTES_PER_S for rate in other_traffic(joined))
    assert shared_directions(joined) == {}


def test_sampled_readings_give_figures_but_no_verdict():
    # A 20 ms sample each second may or may not land on the probe's copies: no telling its share.
    joined = join_link(probe(), [reading(T0 + 1, 60e9, 0, "sampled"), reading(T0 + 2, 60e9, 0, "sampled")], 1.0)
    assert joined.link_rx_bytes_per_s == pytest.approx(60e9) and joined.link_method == "sampled"
    assert other_traffic(joined) is None and shared_directions(joined) == {}


def test_mixed_methods_are_as_exact_as_the_worst_reading():
    joined = join_link(probe(), [reading(T0 + 1, 60e9, 0, "counters"), reading(T0 + 2, 60e9, 0, "sampled")], 1.0)
    assert joined.link_method == "sampled"


def test_the_link_fields_survive_json():
    joined = join_link(probe(), [reading(T0 + 1, 60e9, 1e9), reading(T0 + 2, 58e9, 3e9)], 1.0)
    again = ProbeResult.from_dict(joined.to_dict())
    assert again == joined
    assert ProbeResult.from_dict(probe().to_dict()).link_window_s is None  # older results read as before
