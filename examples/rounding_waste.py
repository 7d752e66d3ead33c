"""PyTorch: pinned tensors just above a power of two (pinmon rule pinned-rounding-waste).

PyTorch's caching host allocator rounds each pinned block up to the next power of two: three
129 MiB tensors hold 768 MiB of pinned memory, 381 MiB of it unused.
"""
from _common import for_seconds, parser, run

SIZE = 129 << 20


def main():
    args = parser(__doc__.splitlines()[0]).parse_args()
    import torch

    pinned = [torch.empty(SIZE, dtype=torch.uint8).pin_memory() for _ in range(3)]
    dev = torch.empty(SIZE, dtype=torch.uint8, device="cuda")
    for i in for_seconds(args.seconds, per_s=10):
        dev.copy_(pinned[i % 3], non_blocking=True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    run(main)
