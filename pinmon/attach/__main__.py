"""``python -m pinmon.attach [PID ...] [--seconds S] [--reader raw|text]``: attach for S seconds and
print the result as JSON (a tool for trying the engine by hand; ``pinmon attach`` is the command)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from ..units import printable
from .session import AttachError, AttachSession, SignalReceived


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pinmon.attach", description=__doc__.splitlines()[0])
    ap.add_argument("pids", nargs="*", type=int, help="processes to attach to (default: every one that maps libcuda)")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--reader", choices=("raw", "text"), default="raw")
    args = ap.parse_args(argv)
    if not 0 < args.seconds <= 3600:
        print("python -m pinmon.attach: --seconds must be in (0, 3600]", file=sys.stderr)
        return 2
    try:
        with AttachSession(args.pids or None, reader=args.reader) as s:
            result = s.run(args.seconds)
        doc = dataclasses.asdict(result)
        doc["detach_s"], doc["cleanup_s"] = s.detach_s, s.cleanup_s
    except AttachError as e:
        print(f"python -m pinmon.attach: {printable(str(e), 300)}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, SignalReceived):
        return 130
    json.dump(doc, sys.stdout, indent=1, default=str)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
