"""The catalog: its descriptor offsets against gcc's layout of the stand-in's declarations, the
stand-in exporting every function, and each probe rendered for x86-64 and aarch64."""
import re
import shutil
import subprocess

import pytest

from pinmon.attach import catalog as c
from pinmon.attach.arch import UnsupportedArch, arg_register
from pinmon.attach.probes import FUNCTION_IDS, NAME_RE, Probe, definition, event_name, plan
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
    assert len(probes) == len(c.CATALOG)
    assert {p.event for p in probes} == {"call_7"}    # one event a file: one grace period to detach it
    for arch in ("x86_64", "aarch64"):
        shapes: dict = {}
        for p in probes:
            line = definition("pinmon_1", p, "/proc/1/fd/3", arch)
            assert NAME_RE.match(p.event)
            head, place, *args = line.split(" ")
            assert head == f"p:pinmon_1/{p.event}"
            assert place == f"/proc/1/fd/3:0x{p.offset:x}"
            assert args[0] == f"fn=\\{FUNCTION_IDS[p.entry.name]}:u16"
            # the kernel puts probes in one event only where their fields have the same names and types
            names_types = [(a.split("=")[0], a.rsplit(":", 1)[1]) for a in args[1:]]
            assert shapes.setdefault(p.event, names_types) == names_types, line
    h2d = c.CATALOG["cuMemcpyHtoD_v2"]
    assert definition("g", Probe("call_0", h2d, 0x2a), "/l", "x86_64") == (
        f"p:g/call_0 /l:0x2a fn=\\{FUNCTION_IDS['cuMemcpyHtoD_v2']}:u16 a0=%di:u64 a1=%si:u64 a2=%dx:u64 a3=%cx:u64 a4=%r8:u64"
        " a5=\\0:u64 a6=\\0:u64 a7=\\0:u64 a8=\\0:u64")
    assert "a4=%x4:u64" in definition("g", Probe("call_0", h2d, 0x2a), "/l", "aarch64")
    d3 = definition("g", Probe("call_0", c.CATALOG["cuMemcpy3D_v2"], 1), "/l", "aarch64")
    assert "a0=+32(%x0):u64" in d3 and "a6=+176(%x0):u64" in d3
    d2 = definition("g", Probe("call_0", c.CATALOG["cuMemcpy2D_v2"], 1), "/l", "x86_64")
    assert d2.endswith("a7=+120(%di):u64 a8=\\1:u64")
    v1 = definition("g", Probe("call_0", c.CATALOG["cuMemcpy3D"], 1), "/l", "x86_64")
    assert v1.endswith("a6=+128(%di):u64 a7=+132(%di):u64 a8=+136(%di):u64")
    batch = definition("g", Probe("call_0", c.CATALOG["cuMemcpyBatchAsync_v2"], 1), "/l", "x86_64")
    assert batch.endswith("a0=%cx:u64 a1=+0(%di):u64 a2=+8(%di):u64 a3=+0(%si):u64 a4=+8(%si):u64"
                          " a5=+0(%dx):u64 a6=+8(%dx):u64 a7=\\0:u64 a8=\\0:u64")


def test_a_peer_copy_reads_its_fifth_argument():
    assert c.CATALOG["cuMemcpyPeerAsync_ptsz"].fields == (("size", c.Fetch(4)),)
    assert arg_register("x86_64", 4) == "%r8" and arg_register("aarch64", 7) == "%x7"
    with pytest.raises(UnsupportedArch):
        arg_register("x86_64", 6)
    with pytest.raises(UnsupportedArch):
        arg_register("riscv64", 0)


def test_event_names_stay_valid_tracefs_identifiers():
    assert NAME_RE.match(event_name("call", 999))
    with pytest.raises(ValueError, match="not a tracefs event name"):
        event_name("bad-name", 0)


def test_flag_names():
    assert c.flag_names(0, c.HOST_ALLOC_FLAGS) == ("default",)
    assert c.flag_names(0x5, c.HOST_ALLOC_FLAGS) == ("portable", "writecombined")
    assert c.flag_names(0x21, c.HOST_REGISTER_FLAGS) == ("portable", "0x20")

