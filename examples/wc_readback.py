"""Anti-pattern: results copied device-to-host into write-combined memory and read by the CPU
(pinmon rule wc-cpu-readback). CPU reads of write-combined memory are uncached."""
import ctypes

import numpy as np

from _common import for_seconds, parser, run

SIZE = 64 << 20


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    import cupy

    rt = cupy.cuda.runtime
    wc = rt.hostAlloc(SIZE, rt.hostAllocWriteCombined)
    try:
        view = np.ctypeslib.as_array((ctypes.c_uint8 * SIZE).from_address(wc))
        dev = cupy.arange(SIZE, dtype=np.uint8)
        total = 0
        for _ in for_seconds(args.seconds, per_s=20):
            rt.memcpy(wc, dev.data.ptr, SIZE, rt.memcpyDeviceToHost)
            total += int(view[:: 4096].sum())  # the CPU reads the write-combined buffer
        print(f"checksum {total}")
    finally:
        rt.freeHost(wc)


if __name__ == "__main__":
    run(main)
