"""A minimal ELF64 shared object written by hand, for any machine: an ELF header, one PT_LOAD segment
whose virtual address differs from its file offset, and .dynsym/.dynstr/.shstrtab sections. Enough
for ``symbols.read_symbols`` (no code: a uprobe is never placed on it). Used for aarch64 where no
cross compiler is at hand, and for the offset arithmetic a gcc build (vaddr == offset) does not test."""
from __future__ import annotations

import struct

EM_X86_64, EM_AARCH64 = 62, 183
STT_OBJECT, STT_FUNC = 1, 2
STB_GLOBAL = 1


def build_elf(symbols: list[tuple[str, int, int, int]], machine: int = EM_AARCH64, load_vaddr: int = 0x400000,
              load_offset: int = 0x1000, load_size: int = 0x10000) -> bytes:
    """``symbols``: (name, value, type, section index; 0 = undefined). Returns the file's bytes."""
    dynstr = b"\0"
    names = []
    for name, *_ in symbols:
        names.append(len(dynstr))
        dynstr += name.encode() + b"\0"
    dynsym = b"\0" * 24
    for (_name, value, typ, shndx), off in zip(symbols, names):
        dynsym += struct.pack("<IBBHQQ", off, (STB_GLOBAL << 4) | typ, 0, shndx, value, 16)
    shstrtab = b"\0.dynsym\0.dynstr\0.shstrtab\0.text\0"
    sh_names = {".dynsym": 1, ".dynstr": 9, ".shstrtab": 17, ".text": 27}
    ehdr_size, phdr_size, shdr_size = 64, 56, 64
    pos = ehdr_size + phdr_size
    dynsym_off = pos
    pos += len(dynsym)
    dynstr_off = pos
    pos += len(dynstr)
    shstr_off = pos
    pos += len(shstrtab)
    pos = (pos + 7) & ~7
    shoff = pos
    sections = [
        b"\0" * shdr_size,
        # .text: the loaded bytes (index 1: the symbols' section)
        struct.pack("<IIQQQQIIQQ", sh_names[".text"], 1, 6, load_vaddr, load_offset, load_size, 0, 0, 16, 0),
        struct.pack("<IIQQQQIIQQ", sh_names[".dynsym"], 11, 2, 0, dynsym_off, len(dynsym), 3, 1, 8, 24),
        struct.pack("<IIQQQQIIQQ", sh_names[".dynstr"], 3, 2, 0, dynstr_off, len(dynstr), 0, 0, 1, 0),
        struct.pack("<IIQQQQIIQQ", sh_names[".shstrtab"], 3, 0, 0, shstr_off, len(shstrtab), 0, 0, 1, 0),
    ]
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    ehdr = ident + struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, ehdr_size, shoff, 0, ehdr_size, phdr_size, 1,
                               shdr_size, len(sections), 4)
    phdr = struct.pack("<IIQQQQQQ", 1, 5, load_offset, load_vaddr, load_vaddr, load_size, load_size, 0x1000)
    body = ehdr + phdr + dynsym + dynstr + shstrtab
    body += b"\0" * (shoff - len(body))
    return body + b"".join(sections)
