"""Anti-pattern: a fresh small pinned buffer for every transfer (pinmon rule pinned-small-allocs).

Each loop pins 64 KiB with cudaHostAlloc, copies it to the GPU and frees it: ~200 pinned
allocations a second. (No PyTorch variant: its caching host allocator hands freed pinned blocks
back out, which is the fix.)
"""
import numpy as np

from _common import for_seconds, parser, run

SIZE = 64 << 10


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    import cupy

    rt = cupy.cuda.runtime
    dev = cupy.empty(SIZE, dtype=np.uint8)
    for _ in for_seconds(args.seconds, per_s=200):
        ptr = rt.hostAlloc(SIZE, 0)
        try:
            rt.memcpy(dev.data.ptr, ptr, SIZE, rt.memcpyHostToDevice)
        finally:
            rt.freeHost(ptr)


if __name__ == "__main__":
    run(main)
