"""PCIe link arithmetic: lane rates, line encodings, payload bandwidth, unknown input, link names."""
import pytest

from pinmon.model.link import encoding_efficiency, lane_rate_gt_s, link_name, theoretical_bytes_per_s


@pytest.mark.parametrize("gen, gt_s", [(1, 2.5), (2, 5.0), (3, 8.0), (4, 16.0), (5, 32.0), (6, 64.0)])
def test_lane_rate(gen, gt_s):
    assert lane_rate_gt_s(gen) == gt_s


@pytest.mark.parametrize("gen, eff", [(1, 0.8), (2, 0.8), (3, 128 / 130), (4, 128 / 130), (5, 128 / 130),
                                      (6, 242 / 256)])
def test_encoding_efficiency(gen, eff):
    assert encoding_efficiency(gen) == pytest.approx(eff, rel=1e-12)


@pytest.mark.parametrize("gen, width, bytes_per_s", [
    (5, 16, 32e9 * 16 * 128 / 130 / 8),  # 63.0 GB/s: the H200 box's link
    (4, 16, 16e9 * 16 * 128 / 130 / 8),  # 31.5 GB/s
    (3, 16, 8e9 * 16 * 128 / 130 / 8),   # 15.75 GB/s
    (2, 8, 4.0e9),                       # 5 GT/s x 8 x 0.8 / 8
    (1, 1, 0.25e9),
    (6, 16, 64e9 * 16 * 242 / 256 / 8),  # 121 GB/s
])
def test_theoretical_bytes_per_s(gen, width, bytes_per_s):
    assert theoretical_bytes_per_s(gen, width) == pytest.approx(bytes_per_s, rel=1e-12)


def test_gen5_x16_is_63_gb_per_s():
    assert theoretical_bytes_per_s(5, 16) == pytest.approx(63.0e9, rel=1e-3)


def test_a_downtrained_link_is_a_fraction_of_the_slot():
    assert theoretical_bytes_per_s(4, 8) == pytest.approx(theoretical_bytes_per_s(5, 16) / 4)


@pytest.mark.parametrize("gen, width", [(None, 16), (5, None), (0, 16), (5, 0), (-1, 16), (5, -4),
                                        (99, 16), (True, 16), (5, True), ("5", 16), (5.0, 16)])
def test_unknown_input_is_none(gen, width):
    assert theoretical_bytes_per_s(gen, width) is None


@pytest.mark.parametrize("gen", [None, 0, 99, True, "3"])
def test_unknown_generation(gen):
    assert lane_rate_gt_s(gen) is None
    assert encoding_efficiency(gen) is None


def test_link_names():
    assert link_name(63.015e9) == "Gen5 x16"
    assert link_name(15.75e9) in ("Gen3 x16", "Gen4 x8")  # the same payload rate
    assert link_name(None) == "link" and link_name(1.234e9) == "link"
