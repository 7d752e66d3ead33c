"""``pinmon demo``: ``pinmon replay`` of the bundled recording made on an NVIDIA H200 (pinmon/data/)."""
from __future__ import annotations

import argparse
import os

from ..common import UsageError, speed_arg
from ..options import Settings, shared
from ..parser import Commands
from . import replay


def add_parser(sub: Commands) -> None:
    d = sub.add_parser("demo", parents=shared("config"), help="play the bundled recording made on an NVIDIA H200",
                       description="Play the bundled recording made on an NVIDIA H200 (PCIe Gen5 x16) in the"
                                   " terminal app. When stdout is not a terminal, print the check report of"
                                   " its last snapshot instead.")
    d.add_argument("--speed", type=speed_arg, default=1.0, metavar="X",
                   help="playback speed factor: 2 plays twice as fast (default 1)")


def demo_path() -> str:
    """Where the bundled demo recording is installed."""
    from importlib import resources

    return str(resources.files("pinmon").joinpath("data/demo.jsonl.gz"))


def run(args: argparse.Namespace, settings: Settings) -> int:
    path = demo_path()
    if not os.path.exists(path):
        raise UsageError("the bundled demo recording is missing from this installation")
    return replay.run(args, settings, path)
