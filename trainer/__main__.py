"""Entry point: ``python -m trainer`` or ``torchrun ... -m trainer``. Parse, build, run,
always clean up. Exit code 0 also after a SIGTERM (the state is saved first)."""

import logging
import sys

import torch.distributed as dist

from trainer.config import parse_config
from trainer.distributed import init_distributed
from trainer.train import Trainer


def main() -> int:
    cfg = parse_config()  # bad flags exit here, before any process group exists
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    ctx = init_distributed()
    try:
        Trainer(cfg, ctx).run()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
