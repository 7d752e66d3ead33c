"""A well-behaved pipeline: pinned staging buffers allocated once and reused, copies both ways
from pinned memory, nothing read back from write-combined memory. pinmon finds nothing to say."""
import numpy as np

from _common import for_seconds, parser, run

SIZE = 32 << 20


def main():
    args = parser(__doc__.splitlines()[0], torch_variant=True).parse_args()
    if args.torch:
        import torch

        up = torch.empty(SIZE, dtype=torch.uint8, pin_memory=True)
        down = torch.empty(SIZE, dtype=torch.uint8, pin_memory=True)
        dev = torch.empty(SIZE, dtype=torch.uint8, device="cuda")
        for i in for_seconds(args.seconds, per_s=20):
            up[:: 4096] = i % 256  # the CPU writes the batch into pinned memory
            dev.copy_(up, non_blocking=True)
            dev.add_(1)
            down.copy_(dev, non_blocking=True)
            torch.cuda.synchronize()
        return
    import cupy
    import cupyx

    up = cupyx.empty_pinned((SIZE,), dtype=np.uint8)
    down = cupyx.empty_pinned((SIZE,), dtype=np.uint8)
    dev = cupy.empty(SIZE, dtype=np.uint8)
    for i in for_seconds(args.seconds, per_s=20):
        up[:: 4096] = i % 256
        dev.set(up)
        dev += 1
        dev.get(out=down)
    print(f"checksum {int(down[:: 4096].sum())}")


if __name__ == "__main__":
    run(main)
