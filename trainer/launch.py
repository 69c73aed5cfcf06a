"""The container's launcher: torchrun's elastic agent, in process, with one exit status that
Kubernetes can act on. Run as ``python -m trainer.launch [torchrun options] -m trainer [flags]``.

torchrun alone turns every worker failure into its own exit status 1, so a preemption, a
configuration error and a crash all look alike to the job's failure rules. This launcher runs
the same agent (``torch.distributed.run``'s parser and ``elastic_launch``) and maps the outcome
to the statuses in ``trainer.exit_codes``:

- every worker exited 0: 0;
- a worker exited CONFIG_ERROR or FABRIC_ERROR: that status (fail the job at once);
- a worker exited NODE_LEFT_OUT (the fabric gate tainted a bad node): that status (restart
  the gang elsewhere, not counted);
- the launcher got SIGTERM (the kubelet's stop: preemption, drain, eviction; also when torch
  raised another exception while handling it, see `_stop_signal`), or every failed
  worker stopped with RESUME, was stopped by SIGTERM, or was ended by the NCCL watchdog
  (SIGABRT: the agent reports -6, a shell in between 134): RESUME. On GPUs a peer that
  vanished is usually reported by the watchdog, which tears the process down after the process
  group's timeout (TORCH_NCCL_ASYNC_ERROR_HANDLING=3, trainer/distributed.py), not by a Python
  exception; a Python-side NCCL error (DistBackendError, "remote process exited or there was a
  network error") already exits RESUME in the worker (trainer/peers.py);
- the same abort when STARTS_WITHOUT_PROGRESS generations in a row started from the same
  checkpoint (trainer/restarts.py): 1, counted, so a program that aborts by itself (a real bug)
  uses up the retry budget instead of restarting for ever;
- a rendezvous that was closed, lost its store, or timed out: RESUME. A timeout means the
  gang's pods did not all arrive within the join timeout (workloads/command.py): a peer pod is
  not running, e.g. it waits for spot capacity. That is not the trainer's fault, so it never
  uses the retry budget; how long a gang may wait for capacity is the scheduler's bound (gang
  admission), not a crash count;
- anything else (a worker's exception, a segfault, the OOM killer): 1, a crash the job counts.

On SIGTERM the agent forwards it to the workers and waits ``--shutdown_timeout`` seconds (the
workflow layer derives it from the cloud's notice) before it kills them.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Iterable, Sequence
from typing import Optional

from trainer.exit_codes import NODE_LEFT_OUT, NO_RETRY, RESUME
from trainer.privileges import raise_locked_memory_and_drop
from trainer.restarts import STARTS_WITHOUT_PROGRESS, starts_without_progress

log = logging.getLogger("trainer.launch")
CRASH = 1
_STOPPED_BY_SIGTERM = -signal.SIGTERM  # how the agent reports a worker that died of SIGTERM
# The NCCL watchdog's teardown: std::abort, i.e. SIGABRT; the agent reports -6, a shell 134.
ABORTED = frozenset({-signal.SIGABRT, 128 + signal.SIGABRT})


def status_of_worker_failures(exit_codes: Iterable[int], starts_from_same_checkpoint: int = 0
                              ) -> int:
    """The pod's status from the failed workers' exit codes (negative = killed by signal) and,
    for an abort, how many generations in a row started from the same checkpoint."""
    codes = set(exit_codes)
    for no_retry in NO_RETRY:
        if no_retry in codes:
            return no_retry
    if NODE_LEFT_OUT in codes:  # the gate left a node out: restart elsewhere, not counted
        return NODE_LEFT_OUT
    if codes and codes <= {RESUME, _STOPPED_BY_SIGTERM, *ABORTED}:
        if codes & ABORTED and starts_from_same_checkpoint >= STARTS_WITHOUT_PROGRESS:
            return CRASH
        return RESUME
    return CRASH


def _stop_signal(error: BaseException, signal_exception: type) -> Optional[BaseException]:
    """The agent's SignalException behind `error`, if any. torch's metrics wrapper
    (torch/distributed/elastic/metrics/api.py `prof`, torch 2.13) reads `start` in a `finally`:
    a SIGTERM whose handler raises before `start = time.time()` is assigned leaves an
    UnboundLocalError in its place, with the SignalException as its context (observed: a
    drained pod's launcher exited 1, a counted crash, instead of resuming)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, signal_exception):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def checkpoint_dir_of(trainer_args: Sequence[str]) -> Optional[str]:
    """--checkpoint_dir among the trainer's flags (the last one wins, as in its own parser)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--checkpoint_dir")
    return parser.parse_known_args(list(trainer_args))[0].checkpoint_dir


def launch(argv: Sequence[str]) -> int:
    """Run torchrun's agent with ``argv`` (torchrun's own syntax) and return the pod's status."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousError, RendezvousTimeoutError
    from torch.distributed.launcher.api import elastic_launch
    from torch.distributed.run import config_from_args, parse_args

    args = parse_args(list(argv))
    config, entrypoint, entrypoint_args = config_from_args(args)
    try:
        elastic_launch(config=config, entrypoint=entrypoint)(*entrypoint_args)
    except SignalException as stop:
        log.warning("launcher: %s received; workers were asked to save and stop: exit %d "
                    "(resume)", signal.Signals(stop.sigval).name, RESUME)
        return RESUME
    except ChildFailedError as failed:
        codes = {failure.exitcode for failure in failed.failures.values()}
        starts = starts_without_progress(checkpoint_dir_of(entrypoint_args)) \
            if codes & ABORTED else 0
        status = status_of_worker_failures(codes, starts)
        why = (f" (aborted after {starts} generations in a row started from the same "
               "checkpoint: counted as a crash)" if codes & ABORTED and status == CRASH else "")
        log.warning("launcher: worker exit codes %s: exit %d%s", sorted(codes), status, why)
        return status
    except RendezvousTimeoutError as late:
        log.warning("launcher: the gang did not form in time, a peer pod is not running (%s): "
                    "exit %d (resume, not counted)", late, RESUME)
        return RESUME
    except RendezvousError as lost:
        log.warning("launcher: rendezvous failed (%s: %s): exit %d (resume)",
                    type(lost).__name__, lost, RESUME)
        return RESUME
    except Exception as other:
        stop = _stop_signal(other, SignalException)
        if stop is None:
            raise
        log.warning("launcher: %s received (torch's agent then raised %s: %s); workers were "
                    "asked to save and stop: exit %d (resume)",
                    signal.Signals(stop.sigval).name, type(other).__name__, other, RESUME)
        return RESUME
    return 0


def main() -> None:
    raise_locked_memory_and_drop()  # before anything else: RDMA pods start as root for this
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(launch(sys.argv[1:]))


if __name__ == "__main__":
    main()
