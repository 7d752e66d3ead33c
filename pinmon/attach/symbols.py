"""A library's exported functions and where each starts in the file, read with pyelftools.

A uprobe is placed at a file offset. An exported function's symbol gives its virtual address; the
``PT_LOAD`` segment holding that address maps file bytes ``[p_offset, p_offset + p_filesz)`` at
``p_vaddr``, so the offset is ``st_value - p_vaddr + p_offset``. Only ``.dynsym`` counts: it is what
the dynamic linker (and so every caller) binds to, and it survives ``strip``.

The file comes as a descriptor the caller opened and checked (a regular file, reached without
following a link out of a container: ``targets.py``); it is read through ``os.pread`` and never
reopened by name. A malformed ELF, which a container may ship as its ``libcuda.so.1``, is a
``SymbolError`` with a short reason, never another exception.
"""
from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from .arch import arch_of_elf_machine

# A real libcuda exports under a thousand functions; a file with far more is not one worth reading.
MAX_DYNAMIC_SYMBOLS = 200_000
MAX_ELF_BYTES = 1 << 31


class SymbolError(Exception):
    """The file is not an ELF shared object pinmon can read exported functions from."""


@dataclass(frozen=True)
class LibrarySymbols:
    machine: str                     # the ELF header's e_machine, as pyelftools names it
    arch: str | None              # arch.py's row for it, None where there is none
    offsets: dict[str, int]          # exported function -> file offset of its first instruction
    dev: int = 0
    ino: int = 0


class _FdReader(io.RawIOBase):
    """A read-only, seekable view of an open file through ``pread``: pyelftools seeks and reads, and
    the descriptor's own position is left alone."""

    def __init__(self, fd: int, size: int) -> None:
        self._fd, self._size, self._pos = fd, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, b) -> int:
        data = os.pread(self._fd, len(b), self._pos)
        b[: len(data)] = data
        self._pos += len(data)
        return len(data)


def file_offset(value: int, segments: Iterable[tuple[int, int, int]]) -> int | None:
    """The file offset of virtual address ``value`` given ``(p_vaddr, p_filesz, p_offset)`` of the
    PT_LOAD segments; None where no segment's file bytes hold it."""
    for vaddr, filesz, offset in segments:
        if vaddr <= value < vaddr + filesz:
            return value - vaddr + offset
    return None


def read_symbols(fd: int, wanted: Iterable[str] | None = None) -> LibrarySymbols:
    """The exported, defined functions of the ELF file open at ``fd`` (only ``wanted`` ones when
    given), with their file offsets."""
    try:
        st = os.fstat(fd)
    except OSError as e:
        raise SymbolError(f"cannot stat: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise SymbolError("not a regular file")
    if st.st_size > MAX_ELF_BYTES:
        raise SymbolError("larger than 2 GiB")
    want = None if wanted is None else frozenset(wanted)
    try:
        from elftools.common.exceptions import ELFError
        from elftools.elf.elffile import ELFFile
        from elftools.elf.sections import SymbolTableSection
    except ImportError:
        raise SymbolError("pyelftools is not installed") from None
    try:
        elf = ELFFile(io.BufferedReader(_FdReader(fd, st.st_size)))
        machine = str(elf.header["e_machine"])
        segments = [(seg["p_vaddr"], seg["p_filesz"], seg["p_offset"]) for seg in elf.iter_segments()
                    if seg["p_type"] == "PT_LOAD"]
        dynsym = elf.get_section_by_name(".dynsym")
        if not isinstance(dynsym, SymbolTableSection):
            raise SymbolError("no .dynsym section")
        if dynsym.num_symbols() > MAX_DYNAMIC_SYMBOLS:
            raise SymbolError("too many dynamic symbols")
        offsets: dict[str, int] = {}
        for sym in dynsym.iter_symbols():
            if sym["st_info"]["type"] != "STT_FUNC" or sym["st_shndx"] == "SHN_UNDEF" or not sym["st_value"]:
                continue
            name = sym.name
            if want is not None and name not in want:
                continue
            off = file_offset(sym["st_value"], segments)
            if off is not None:
                offsets[name] = off
    except SymbolError:
        raise
    except (ELFError, Exception) as e:  # a cut or forged file: pyelftools' and construct's errors
        raise SymbolError(f"not a readable ELF file ({type(e).__name__})") from None
    return LibrarySymbols(machine, arch_of_elf_machine(machine), offsets, st.st_dev, st.st_ino)
