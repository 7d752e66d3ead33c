"""The pinned estimator against real /proc/PID/maps captured on an H200 with known allocations."""
import glob
import json
import os

import pytest

from pinmon.collect.processes.procmaps import churn, estimate_pinned, parse_maps

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "maps")
MIB = 1 << 20
SCENARIOS = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(FIXTURES, "*.maps")))


def load(name):
    with open(os.path.join(FIXTURES, name + ".maps")) as f:
        maps = f.read()
    with open(os.path.join(FIXTURES, name + ".json")) as f:
        return maps, json.load(f)


def test_fixture_set_is_complete():
    assert {"context_only", "default_256m", "mapped_portable", "write_combined_128m", "small_4k_x1000",
            "pinned_pool", "host_register_64m", "torch_pin_memory", "mixed",
            "non_cuda_shared_anon"} <= set(SCENARIOS)


@pytest.mark.parametrize("name", SCENARIOS)
def test_estimate_within_10_mib_of_known_allocations(name):
    maps, known = load(name)
    est = estimate_pinned(maps)
    assert est.is_cuda == known["cuda"]
    if not known["cuda"]:
        assert est.pinned_bytes == 0 and est.write_combined_bytes == 0
        return
    # Allocators that round up (PyTorch's power-of-two blocks, CuPy's pool) really pin the rounded size.
    expected_pinned = known.get("allocated_pinned_bytes", known["pinned_bytes"])
    assert abs(est.pinned_bytes - expected_pinned) <= 10 * MIB, (est.pinned_bytes / MIB, expected_pinned / MIB)
    assert abs(est.write_combined_bytes - known["write_combined_bytes"]) <= 10 * MIB


def test_context_nvidiactl_is_not_write_combined():
    maps, _ = load("context_only")
    # The context maps ~70 MiB of /dev/nvidiactl of its own; none of it is a user buffer.
    total_ctl = sum(m.size for m in parse_maps(maps) if m.path == "/dev/nvidiactl")
    assert total_ctl > 60 * MIB
    assert estimate_pinned(maps).write_combined_bytes == 0


def test_host_register_is_invisible_known_limit():
    maps, known = load("host_register_64m")
    ctx, _ = load("context_only")
    assert known["registered_bytes"] == 64 * MIB
    assert estimate_pinned(maps).pinned_bytes == estimate_pinned(ctx).pinned_bytes


def test_vmlck_is_zero_for_cuda_pinned_memory():
    _, known = load("default_256m")
    assert all(line.split()[1] == "0" for line in known["vmlck_line"])


def test_parse_maps_skips_malformed_lines():
    text = "\n".join([
        "garbage",
        "zz-10 rw-s 0 00:01 1 /dev/zero (deleted)",
        "20-10 rw-s 0 00:01 1 /dev/zero (deleted)",
        "1000-3000 rw-s 00000000 00:01 4102    /dev/zero (deleted)",
        "1000-2000 rwxsx 0 0 0",
        "",
    ])
    maps = parse_maps(text)
    assert len(maps) == 1 and maps[0].size == 0x2000 and maps[0].path == "/dev/zero (deleted)"


def test_path_with_spaces_and_no_path():
    maps = parse_maps("7f00-7f10 r--p 0 fe:00 1 /opt/my dir/lib x.so\n7f10-7f20 rw-p 0 00:00 0\n")
    assert maps[0].path == "/opt/my dir/lib x.so" and maps[1].path == ""


def test_private_dev_zero_is_not_pinned():
    text = ("200000-400000 rw-s 0 00:06 143 /dev/nvidia0\n"
            "7f0000000000-7f0000200000 rw-p 0 00:01 1 /dev/zero (deleted)\n")
    assert estimate_pinned(text).pinned_bytes == 0


def test_churn_counts_appeared_and_vanished():
    a = frozenset({(1, 2), (3, 4)})
    b = frozenset({(3, 4), (5, 6), (7, 8)})
    assert churn(None, b) is None
    assert churn(a, b) == 3
    assert churn(b, b) == 0


def test_addresses_longer_than_64_bits_are_skipped():
    # A forged file with a 5,000-digit address would make a size no float (or JSON writer) can take.
    text = ("7f3a00000000-7f3a00200000 rw-s 00000000 00:05 78 /dev/nvidia0\n"
            f"7f3a40000000-{'f' * 5000} rw-s 00000000 00:01 1234 /dev/zero (deleted)\n"
            f"{'0' * 17}-7f3a40000000 rw-s 00000000 00:01 1234 /dev/zero (deleted)\n"
            "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n")
    maps = parse_maps(text)
    assert [m.path for m in maps] == ["/dev/nvidia0", "[vsyscall]"]
    assert estimate_pinned(text).pinned_bytes == 0
