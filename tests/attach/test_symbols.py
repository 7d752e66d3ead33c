"""symbols.read_symbols: exported functions' file offsets from .dynsym, on a gcc build (checked
against where the dynamic linker put them) and on hand-made ELF files (aarch64, vaddr != offset);
malformed files are a SymbolError, never another exception."""
import ctypes
import os
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinmon.attach.catalog import CATALOG
from pinmon.attach.symbols import SymbolError, file_offset, read_symbols
from tests.attach.elf_fixture import EM_AARCH64, EM_X86_64, STT_FUNC, STT_OBJECT, build_elf
from tests.attach.standin import build


def _read(path, wanted=None):
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_symbols(fd, wanted)
    finally:
        os.close(fd)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the stand-in libcuda")
def test_offsets_of_a_gcc_build_are_where_the_loader_maps_each_function(tmp_path):
    lib = build(str(tmp_path))
    syms = _read(lib, CATALOG)
    assert syms.arch == "x86_64" and syms.machine == "EM_X86_64"
    assert set(syms.offsets) == set(CATALOG)  # the stand-in exports every catalog function
    handle = ctypes.CDLL(lib)
    maps = open("/proc/self/maps").read().splitlines()
    ino = os.stat(lib).st_ino
    segments = []
    for line in maps:
        parts = line.split()
        if len(parts) >= 6 and int(parts[4]) == ino:
            start, end = (int(x, 16) for x in parts[0].split("-"))
            segments.append((start, end, int(parts[2], 16)))
    for name in ("cuMemcpyHtoD_v2", "cuMemHostAlloc", "cuMemcpy3DPeerAsync_ptsz"):
        addr = ctypes.cast(getattr(handle, name), ctypes.c_void_p).value
        start, end, off = next(s for s in segments if s[0] <= addr < s[1])
        assert syms.offsets[name] == addr - start + off


def test_an_aarch64_file_with_a_shifted_segment(tmp_path):
    path = tmp_path / "libcuda.so.1"
    path.write_bytes(build_elf([("cuMemcpyHtoD_v2", 0x400200, STT_FUNC, 1),
                                ("cuMemHostAlloc", 0x400400, STT_FUNC, 1),
                                ("cuMemcpyDtoH_v2", 0, STT_FUNC, 0),          # undefined: imported
                                ("cuMemFreeHost", 0x400600, STT_OBJECT, 1),   # not a function
                                ("cuOther", 0x400800, STT_FUNC, 1)], EM_AARCH64, 0x400000, 0x1000))
    syms = _read(str(path), CATALOG)
    assert syms.machine == "EM_AARCH64" and syms.arch == "aarch64"
    assert syms.offsets == {"cuMemcpyHtoD_v2": 0x1200, "cuMemHostAlloc": 0x1400}
    assert "cuOther" in _read(str(path)).offsets


def test_a_machine_without_a_row_has_no_arch(tmp_path):
    path = tmp_path / "x.so"
    path.write_bytes(build_elf([("cuMemcpy", 0x400010, STT_FUNC, 1)], machine=40))  # EM_ARM
    assert _read(str(path)).arch is None
    path.write_bytes(build_elf([("cuMemcpy", 0x400010, STT_FUNC, 1)], machine=EM_X86_64))
    assert _read(str(path)).arch == "x86_64"


def test_file_offset_outside_every_segment_is_none():
    assert file_offset(0x10, [(0x1000, 0x100, 0)]) is None
    assert file_offset(0x1010, [(0x1000, 0x100, 0x200)]) == 0x210


def test_not_an_elf_and_not_a_regular_file(tmp_path):
    p = tmp_path / "text"
    p.write_text("hello")
    with pytest.raises(SymbolError):
        _read(str(p))
    fd = os.open(str(tmp_path), os.O_RDONLY)
    try:
        with pytest.raises(SymbolError, match="regular"):
            read_symbols(fd)
    finally:
        os.close(fd)


VALID = build_elf([("cuMemcpyHtoD_v2", 0x400200, STT_FUNC, 1), ("cuMemcpy", 0x400300, STT_FUNC, 1)])


@given(st.data())
def test_a_damaged_file_is_a_symbol_error_or_a_result(tmp_path_factory, data):
    raw = bytearray(VALID)
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    path = tmp_path_factory.mktemp("elf") / "libcuda.so.1"
    path.write_bytes(bytes(raw[:cut]))
    try:
        got = _read(str(path))
    except SymbolError:
        return
    assert all(isinstance(v, int) for v in got.offsets.values())
