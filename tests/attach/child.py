"""The tests' CUDA-like process: loads a (stand-in) libcuda.so.1 and calls it on command.

Reads one JSON command a line on stdin, answers one JSON line on stdout. A command names a function,
its arguments, how many calls and at what rate (calls a second, on a deadline schedule), and
whether to make them from a new thread. An argument
is a number, or an object:

- ``{"buf": NAME, "off": N}``: the address of a named buffer (plus N). ``pinned`` is a shared anonymous
  mapping (``/dev/zero (deleted)`` in the maps, like CUDA's pinned buffers), ``pageable`` a private
  one, and each ``{"out": NAME}`` of an earlier call names the pointer that call returned;
- ``{"out": NAME}``: the address of a pointer-sized slot the call writes (an allocation's result);
- ``{"u64s": [...]}``: the address of an array of 64-bit values (a batch's pointers and sizes);
- ``{"desc": "2d" | "3d" | "2d_v1" | "3d_v1", "fields": {offset: [type, value]}}``: the address of a
  zeroed descriptor with those fields set (values may be ``{"buf": ...}`` too).

Usage: python child.py LIBCUDA_PATH
"""
import ctypes
import json
import mmap
import sys
import threading
import time

BUF_BYTES = 64 << 20


def main() -> int:
    lib = ctypes.CDLL(sys.argv[1])
    pinned = mmap.mmap(-1, BUF_BYTES, flags=mmap.MAP_SHARED)
    pageable = mmap.mmap(-1, BUF_BYTES, flags=mmap.MAP_PRIVATE)
    keep = [pinned, pageable]
    names = {"pinned": ctypes.addressof(ctypes.c_char.from_buffer(pinned)),
             "pageable": ctypes.addressof(ctypes.c_char.from_buffer(pageable))}
    for b in keep:  # touch every page: the kernel then shows the mappings as they are used
        b[:: mmap.PAGESIZE] = b"\1" * (BUF_BYTES // mmap.PAGESIZE)
    print(json.dumps({"ready": True, "buffers": names}), flush=True)
    slots = {}

    def value(a):
        if isinstance(a, int):
            return a
        if "buf" in a:
            base = names[a["buf"]] if a["buf"] in names else slots[a["buf"]].value
            return base + a.get("off", 0)
        if "out" in a:
            slot = slots.setdefault(a["out"], ctypes.c_void_p(0))
            return ctypes.addressof(slot)
        if "u64s" in a:
            arr = (ctypes.c_uint64 * len(a["u64s"]))(*[value(v) for v in a["u64s"]])
            keep.append(arr)
            return ctypes.addressof(arr)
        if "desc" in a:
            raw = ctypes.create_string_buffer(256)
            keep.append(raw)
            for off, (typ, v) in a["fields"].items():
                ctype = {"u32": ctypes.c_uint32, "u64": ctypes.c_uint64}[typ]
                ctype.from_buffer(raw, int(off)).value = value(v)
            return ctypes.addressof(raw)
        raise ValueError(a)

    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("quit"):
            break
        fn = getattr(lib, cmd["fn"])
        fn.restype = ctypes.c_int
        args = [ctypes.c_uint64(value(a)) for a in cmd.get("args", [])]
        n, rate = cmd.get("n", 1), cmd.get("rate")
        t0 = time.monotonic()
        rets = set()

        def calls():
            for i in range(n):
                if rate:
                    due = t0 + i / rate
                    now = time.monotonic()
                    if due > now:
                        time.sleep(due - now)  # not a wait: paces the calls at the rate asked
                rets.add(fn(*args))
        if cmd.get("thread"):  # from a thread started now, after the attach
            t = threading.Thread(target=calls)
            t.start()
            t.join()
        else:
            calls()
        out = {name: slot.value for name, slot in slots.items()}
        for name, slot in slots.items():
            names.setdefault(name, slot.value)
        print(json.dumps({"rets": sorted(rets), "slots": out, "elapsed_s": time.monotonic() - t0}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
