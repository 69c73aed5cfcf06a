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
- the launcher got SIGTERM (the kubelet's stop: preemption, drain, eviction), or every failed
  worker stopped with RESUME or was stopped by SIGTERM: RESUME;
- a rendezvous that was closed or lost its store (a peer node gone): RESUME;
- a rendezvous that timed out (the gang's nodes did not all arrive within the join timeout,
  e.g. no spot capacity): 1, counted, so a job that cannot get its nodes ends instead of
  restarting forever;
- anything else (a worker's exception, a segfault, the OOM killer): 1, a crash the job counts.

On SIGTERM the agent forwards it to the workers and waits ``--shutdown_timeout`` seconds (the
workflow layer derives it from the cloud's notice) before it kills them.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Iterable, Sequence

from trainer.exit_codes import NODE_LEFT_OUT, NO_RETRY, RESUME
from trainer.privileges import raise_locked_memory_and_drop

log = logging.getLogger("trainer.launch")
CRASH = 1
_STOPPED_BY_SIGTERM = -signal.SIGTERM  # how the agent reports a worker that died of SIGTERM


def status_of_worker_failures(exit_codes: Iterable[int]) -> int:
    """The pod's status from the failed workers' exit codes (negative = killed by signal)."""
    codes = set(exit_codes)
    for no_retry in NO_RETRY:
        if no_retry in codes:
            return no_retry
    if NODE_LEFT_OUT in codes:  # the gate left a node out: restart elsewhere, not counted
        return NODE_LEFT_OUT
    if codes and codes <= {RESUME, _STOPPED_BY_SIGTERM}:
        return RESUME
    return CRASH


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
        status = status_of_worker_failures(codes)
        log.warning("launcher: worker exit codes %s: exit %d", sorted(codes), status)
        return status
    except RendezvousTimeoutError as late:
        log.warning("launcher: the gang did not form in time (%s): exit %d (counted)", late, CRASH)
        return CRASH
    except RendezvousError as lost:
        log.warning("launcher: rendezvous failed (%s: %s): exit %d (resume)",
                    type(lost).__name__, lost, RESUME)
        return RESUME
    return 0


def main() -> None:
    raise_locked_memory_and_drop()  # before anything else: RDMA pods start as root for this
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(launch(sys.argv[1:]))


if __name__ == "__main__":
    main()
