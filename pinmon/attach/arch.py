"""Where a probed function's arguments are, per CPU architecture: one table.

A uprobe fires at a function's first instruction, before the function has touched its arguments, so
the calling convention says where each one is: the first integer or pointer arguments sit in
registers. tracefs names those registers in fetch-args (``%di``); the row of an architecture is what
its kernel's ``regs_query_register_offset`` accepts.

- x86-64 (System V): rdi, rsi, rdx, rcx, r8, r9.
- aarch64 (AAPCS64, Grace): x0..x7.

A 32-bit argument (the legacy ``unsigned int`` sizes) is read as ``u32``: the ABI leaves the upper
half of its register undefined.
"""
from __future__ import annotations

ARG_REGISTERS: dict[str, tuple[str, ...]] = {
    "x86_64": ("%di", "%si", "%dx", "%cx", "%r8", "%r9"),
    "aarch64": ("%x0", "%x1", "%x2", "%x3", "%x4", "%x5", "%x6", "%x7"),
}

# pyelftools' name of an ELF header's e_machine -> the row above.
ELF_MACHINES: dict[str, str] = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}

# os.uname().machine -> the row above (the kernel's name for the CPU pinmon runs on).
KERNEL_MACHINES: dict[str, str] = {"x86_64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


class UnsupportedArch(ValueError):
    """An architecture without a row, or an argument past the registers of its row."""


def arch_of_elf_machine(e_machine: str) -> str | None:
    """The table's row for an ELF header's machine, None for one without a row."""
    return ELF_MACHINES.get(e_machine)


def arch_of_kernel(machine: str) -> str | None:
    """The table's row for ``os.uname().machine``, None for one without a row."""
    return KERNEL_MACHINES.get(machine)


def arg_register(arch: str, index: int) -> str:
    """The register that holds argument ``index`` (0-based) at a function's entry."""
    regs = ARG_REGISTERS.get(arch)
    if regs is None:
        raise UnsupportedArch(f"no argument registers known for {arch!r}")
    if not 0 <= index < len(regs):
        raise UnsupportedArch(f"argument {index} is not in a register on {arch}")
    return regs[index]
