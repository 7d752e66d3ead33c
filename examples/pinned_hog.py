"""A process that pins a large share of RAM and holds it (pinmon rule pinned-ram-share).

Bounded: pins ``--size`` bytes (default 512M) or ``--fraction`` of MemTotal, in 256 MiB
cudaHostAlloc chunks, and refuses when that would leave less than 16 GiB available.
"""
import sys
import time

from _common import for_seconds, parser, run

CHUNK = 256 << 20
RESERVE = 16 << 30


def meminfo(key: str) -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    text = text.strip().upper().rstrip("B").rstrip("I")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def main():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--size", default="512M", help="bytes to pin, e.g. 4G (default 512M)")
    p.add_argument("--fraction", type=float, default=None, help="pin this share of MemTotal instead")
    args = p.parse_args()
    size = int(meminfo("MemTotal") * args.fraction) if args.fraction else parse_size(args.size)
    if size > meminfo("MemAvailable") - RESERVE:
        print(f"refusing to pin {size} bytes: under 16 GiB would stay available", file=sys.stderr)
        return 3
    import cupy

    rt = cupy.cuda.runtime
    ptrs = []
    try:
        left = size
        while left > 0:
            n = min(CHUNK, left)
            ptrs.append(rt.hostAlloc(n, 0))
            left -= n
        print(f"pinned {size} bytes", flush=True)
        for _ in for_seconds(args.seconds, per_s=10):
            time.sleep(0)  # hold it
    finally:
        for ptr in ptrs:
            rt.freeHost(ptr)
    return 0


if __name__ == "__main__":
    run(main)
