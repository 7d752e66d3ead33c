"""The parsers of the kernel's pinned count, numa_maps, node lists and VmLck never raise, whatever
the bytes, and never report negative sizes. Examples: the Hypothesis profile's (300 quick, 10,000
under ``--hypothesis-profile full`` in ``.ci/run``)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinmon.collect.host.kernel_pins import parse_pinned_pages
from pinmon.collect.host.numa import parse_node_list, parse_numa_maps
from pinmon.collect.processes.locked import parse_vm_locked

pytestmark = [pytest.mark.hardening, pytest.mark.fuzz]

FUZZ = settings(deadline=None, database=None)  # max_examples: the profile's

# Bytes built from the pieces the real files are made of, so the parsers' inner paths are reached.
PIECES = st.sampled_from([b"nr_foll_pin_acquired ", b"nr_foll_pin_released ", b"VmLck:", b" kB", b"N0=", b"N1=",
                          b"kernelpagesize_kB=", b"file=/dev/zero\\040(deleted) ", b"\n", b" ", b"-", b"=",
                          b"12", b"4096", b"-3", b"x", b"\x00", b"\xff", b"99999999999999999999"])
TEXT = st.one_of(st.binary(max_size=300), st.lists(PIECES, max_size=40).map(b"".join))


@FUZZ
@given(TEXT)
def test_pinned_pages_never_raises(data):
    v = parse_pinned_pages(data)
    assert v is None or v >= 0


@FUZZ
@given(TEXT)
def test_numa_maps_never_raises(data):
    for token in (None, b"file=/dev/zero\\040(deleted)"):
        out = parse_numa_maps(data, token=token)
        assert all(isinstance(k, str) and v > 0 for k, v in out.items())


@FUZZ
@given(TEXT)
def test_vm_locked_never_raises(data):
    v = parse_vm_locked(data)
    assert v is None or v >= 0


@FUZZ
@given(st.text(alphabet="0123456789-, x\n", max_size=40))
def test_node_list_never_raises(text):
    nodes = parse_node_list(text)
    assert nodes is None or (nodes == tuple(sorted(set(nodes))) and all(n >= 0 for n in nodes))
