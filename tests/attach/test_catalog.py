"""The catalog: its descriptor offsets against gcc's layout of the stand-in's declarations, the
stand-in exporting every function, and each probe rendered for x86-64 and aarch64."""
import re
import shutil
import subprocess

import pytest

from pinmon.attach import catalog as c
from pinmon.attach.arch import UnsupportedArch, arg_register
from pinmon.attach.probes import NAME_RE, Probe, definition, event_name, plan
from tests.attach.standin import SOURCE

FIELDS = {"st": "srcMemoryType", "sh": "srcHost", "sd": "srcDevice", "dt": "dstMemoryType", "dh": "dstHost",
          "dd": "dstDevice", "w": "WidthInBytes", "h": "Height", "d": "Depth"}
STRUCTS = {"CUDA_MEMCPY2D": c.MEMCPY2D, "CUDA_MEMCPY3D": c.MEMCPY3D, "CUDA_MEMCPY3D_PEER": c.MEMCPY3D,
           "CUDA_MEMCPY2D_v1": c.MEMCPY2D_V1, "CUDA_MEMCPY3D_v1": c.MEMCPY3D_V1}


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_descriptor_offsets_and_sizes_are_gccs(tmp_path):
    src = open(SOURCE).read()
    decls = src[: src.index("#define API")]
    lines = []
    for struct, layout in STRUCTS.items():
        for short in layout:
            lines.append(f'printf("{struct} {short} %zu %zu\\n", offsetof({struct}, {FIELDS[short]}), '
                         f'sizeof((({struct} *)0)->{FIELDS[short]}));')
    prog = tmp_path / "offsets.c"
    prog.write_text(decls + "#include <stdio.h>\nint main(void) {\n" + "\n".join(lines) + "\nreturn 0; }\n")
    exe = tmp_path / "offsets"
    subprocess.run(["gcc", "-o", str(exe), str(prog)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        struct, short, off, size = line.split()
        want_off, want_type = STRUCTS[struct][short]
        assert (int(off), int(size)) == (want_off, {"u32": 4, "u64": 8}[want_type]), line


def test_the_stand_in_declares_every_catalog_function():
    src = open(SOURCE).read()
    declared = set(re.findall(r"API CUresult (\w+)\(", src))
    assert declared == set(c.CATALOG)


def test_every_function_is_named_and_rendered_for_each_architecture():
    offsets = {name: 0x1000 + i * 16 for i, name in enumerate(sorted(c.CATALOG))}
    probes = plan(offsets, 7)
    assert len(probes) == len(c.CATALOG) + sum(e.returns for e in c.CATALOG.values())
    for arch in ("x86_64", "aarch64"):
        for p in probes:
            line = definition("pinmon_1", p, "/proc/1/fd/3", arch)
            assert NAME_RE.match(p.event)
            head, rest = line.split(" ", 1)
            assert head == f"{'r' if p.returns else 'p'}:pinmon_1/{p.event}"
            assert rest.startswith(f"/proc/1/fd/3:0x{p.offset:x}")
    h2d = c.CATALOG["cuMemcpyHtoD_v2"]
    assert definition("g", Probe("e", h2d, 0x2a), "/l", "x86_64") == "p:g/e /l:0x2a host=%si:u64 size=%dx:u64"
    assert definition("g", Probe("e", h2d, 0x2a), "/l", "aarch64") == "p:g/e /l:0x2a host=%x1:u64 size=%x2:u64"
    d3 = definition("g", Probe("e", c.CATALOG["cuMemcpy3D_v2"], 1), "/l", "aarch64")
    assert "w=+176(%x0):u64" in d3 and "st=+32(%x0):u32" in d3
    batch = definition("g", Probe("e", c.CATALOG["cuMemcpyBatchAsync_v2"], 1), "/l", "x86_64")
    assert "n=%cx:u64" in batch and "sizes=+0(%dx):u64[8]" in batch
    legacy = definition("g", Probe("e", c.CATALOG["cuMemcpyHtoD"], 1), "/l", "x86_64")
    assert legacy.endswith("size=%dx:u32")
    assert definition("g", Probe("e_ret", c.CATALOG["cuMemHostAlloc"], 1, True), "/l", "x86_64") == \
        "r:g/e_ret /l:0x1 rc=$retval:s32"


def test_a_peer_copy_reads_its_fifth_argument():
    assert c.CATALOG["cuMemcpyPeerAsync_ptsz"].fields == (("size", c.Fetch(4)),)
    assert arg_register("x86_64", 4) == "%r8" and arg_register("aarch64", 7) == "%x7"
    with pytest.raises(UnsupportedArch):
        arg_register("x86_64", 6)
    with pytest.raises(UnsupportedArch):
        arg_register("riscv64", 0)


def test_event_names_stay_valid_tracefs_identifiers():
    longest = max(c.CATALOG, key=len)
    assert NAME_RE.match(event_name(longest, 999, True))
    with pytest.raises(ValueError):
        event_name("bad-name", 0)


def test_flag_names():
    assert c.flag_names(0, c.HOST_ALLOC_FLAGS) == ("default",)
    assert c.flag_names(0x5, c.HOST_ALLOC_FLAGS) == ("portable", "writecombined")
    assert c.flag_names(0x21, c.HOST_REGISTER_FLAGS) == ("portable", "0x20")

