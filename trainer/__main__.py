"""Entry point: ``python -m trainer`` or ``torchrun ... -m trainer``. Parse, build, run,
always clean up. Exit code 0 also after a SIGTERM (the state is saved first)."""

import logging
import os
import sys
import warnings

from trainer.config import parse_config


def main() -> int:
    cfg = parse_config()  # bad flags exit here (status 2), before torch is even imported
    import torch.distributed as dist

    from trainer.distributed import init_distributed
    from trainer.train import StopFlag, Trainer

    stop = StopFlag()
    stop.install()  # from here on a SIGTERM (spot notice) means: save at the next step, exit 0
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Library deprecation chatter (torchrec/fbgemm internals, not our calls) hides the metrics.
    for module in ("torchrec", "fbgemm_gpu", "torch.distributed"):
        warnings.filterwarnings("ignore", category=FutureWarning, module=module)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=module)
    logging.getLogger("torch.fx._symbolic_trace").setLevel(logging.ERROR)
    logging.getLogger("torchrec.distributed.planner.storage_reservations").setLevel(logging.ERROR)
    ctx = init_distributed()
    try:
        Trainer(cfg, ctx, stop).run()
        dist.barrier()  # no rank tears its group down while a peer still talks to it
    except BaseException:
        dist.destroy_process_group()
        raise
    return 0


def exit_without_teardown(code: int) -> None:
    """Leave at once once every rank passed the final barrier and all output is written.

    Tearing down gloo/TorchRec state at interpreter exit intermittently aborts a worker
    ("terminate called without an active exception", SIGABRT) after a fully successful run,
    which torchrun would report as a failure; everything worth keeping (checkpoint, metrics)
    is already durable here, so skipping C++ static destructors loses nothing.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    exit_without_teardown(main())
