"""Entry point: ``python -m trainer`` or ``torchrun ... -m trainer``. Parse, build, run,
always clean up.

Exit status (trainer/exit_codes.py): 0 only when training reached its end; RESUME after a stop
for preemption (SIGTERM on any rank, in a training step, an evaluation, a checkpoint write or a
data wait: every rank agrees to stop, saves if the deadline allows) or a lost peer (a collective
failed because another rank or node went away); CONFIG_ERROR for bad flags (at parse time, or
a ConfigError once they meet the run: a checkpoint's global batch that this world size does not
divide); FABRIC_ERROR when the fabric gate (trainer/fabric_gate.py) enforces and fails, or NODE_LEFT_OUT when it failed one
node's checks and left that node out; anything else is a crash. A worker the NCCL watchdog
aborts (SIGABRT) exits no status of its own: the launcher (trainer/launch.py) maps the abort."""

import logging
import os
import sys
import warnings

from trainer.config import ConfigError, parse_config
from trainer.exit_codes import CONFIG_ERROR, RESUME
from trainer.peers import is_lost_peer


def main() -> int:
    cfg = parse_config()  # bad flags exit here (CONFIG_ERROR), before torch is even imported
    import torch
    import torch.distributed as dist

    from trainer.data.prefetch import share_the_gil_finely
    from trainer.distributed import init_distributed
    from trainer.fabric_gate import prepare_nccl_logging, run_fabric_gate
    from trainer.telemetry import final_upload_seconds, start_mirror
    from trainer.train import StopFlag, Trainer

    share_the_gil_finely()  # batches are built on a thread beside the training loop

    if cfg.fabric_gate != "off" and torch.cuda.is_available():
        prepare_nccl_logging()  # NCCL reads its logging settings once, when the first comm starts

    stop = StopFlag()
    stop.install()  # from here on a SIGTERM (spot notice) means: stop together, save, resume later
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Library deprecation chatter (torchrec/fbgemm internals, not our calls) hides the metrics.
    for module in ("torchrec", "fbgemm_gpu", "torch.distributed"):
        warnings.filterwarnings("ignore", category=FutureWarning, module=module)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=module)
    logging.getLogger("torch.fx._symbolic_trace").setLevel(logging.ERROR)
    logging.getLogger("torchrec.distributed.planner.storage_reservations").setLevel(logging.ERROR)
    ctx = init_distributed()
    # Rank 0's metrics and TensorBoard files copied to the bucket (or None): on a background
    # thread, and once more on the way out below, whatever the way out.
    mirror = start_mirror(cfg.telemetry_dir, cfg.metrics_file, cfg.tensorboard_dir,
                          cfg.telemetry_every_seconds, ctx.rank)
    try:
        if cfg.fabric_gate != "off":
            gate = run_fabric_gate(cfg, ctx)
            if not gate.passed:  # every rank decided alike from the same figures
                return gate.exit_status  # FABRIC_ERROR, or NODE_LEFT_OUT: a bad node tainted
        summary = Trainer(cfg, ctx, stop, telemetry=mirror).run()
        if not summary["preempted"]:
            dist.barrier()  # no rank tears its group down while a peer still talks to it
    except ConfigError as err:  # a flag that cannot work with this run (every rank alike)
        logging.getLogger("trainer").error("config error: %s", err)
        return CONFIG_ERROR
    except Exception as err:
        if not is_lost_peer(err):
            raise  # a crash: the job counts it
        # Another rank or node is gone (SIGKILL, node loss). The newest complete checkpoint
        # is the resume point; the gang restarts as a whole.
        first_line = (str(err).splitlines() or [""])[0][:300]
        logging.getLogger("trainer").warning("lost a peer (%s: %s): exit %d (resume)",
                                             type(err).__name__, first_line, RESUME)
        return RESUME
    finally:
        if mirror is not None and not mirror.close(
                final_upload_seconds(stop.seconds_left(cfg.save_deadline_seconds))):
            logging.getLogger("trainer").warning("telemetry: the last copy to %s did not finish "
                                                 "in time", cfg.telemetry_dir)
    # A preempted rank leaves at once: its peers may already be gone, so no final barrier.
    return RESUME if summary["preempted"] else 0


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
