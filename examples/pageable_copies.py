"""Anti-pattern: bulk host<->device copies from ordinary (pageable) memory (pinmon rule
pageable-bulk-copies): each goes through the driver's bounce buffer at a fraction of the link."""
import numpy as np

from _common import for_seconds, parser, run

SIZE = 64 << 20


def main():
    args = parser(__doc__.splitlines()[0], torch_variant=True).parse_args()
    host = np.ones(SIZE, dtype=np.uint8)  # pageable
    if args.torch:
        import torch

        t = torch.from_numpy(host)
        for _ in for_seconds(args.seconds, per_s=20):
            d = t.to("cuda")
            d.cpu()
        return
    import cupy

    for _ in for_seconds(args.seconds, per_s=20):
        d = cupy.asarray(host)
        d.get()


if __name__ == "__main__":
    run(main)
