"""`torchrec-cloud plan ...`: the sharding advisor (its flags: `torchrec-cloud plan -h`)."""

from __future__ import annotations

import argparse
from typing import Sequence


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The advisor parses its own flags (run_argv)."""


def run_argv(argv: Sequence[str]) -> int:
    from trainer.plan import main  # delegates for now (the advisor's own module may move)

    return main(list(argv))
