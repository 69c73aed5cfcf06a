"""The container's command: check the trainer's flags once, then hand over to torchrun.

torchrun turns any worker failure into its own exit status 1, so a typo in `trainerArgs` would
look like a crash and be retried `backoffLimit` times on every GPU node. Parsing the flags first
(trainer.config.parse_config exits 2 on a bad flag, and checks the dataset path exists) lets the
Job's podFailurePolicy fail the whole job at once on exit code 2.
"""

from __future__ import annotations

import shlex

from infra.settings.model import Job
from workloads.names import JobNames

CONFIG_ERROR_EXIT_CODE = 2
_CHECK_FLAGS = (
    "python -c 'import sys; from trainer.config import parse_config; "
    "parse_config(sys.argv[1:])' \"$@\" || exit " + str(CONFIG_ERROR_EXIT_CODE)
)


def torchrun_options(job: Job, names: JobNames) -> list[str]:
    """Static c10d rendezvous on pod 0 of the Indexed Job, found through the headless service."""
    return [
        f"--nnodes={job.nodes}",
        f"--nproc_per_node={job.processes_per_node}",
        "--rdzv_backend=c10d",
        f"--rdzv_endpoint={names.rendezvous_endpoint}",
        f"--rdzv_id={names.job}",
        # A worker that dies (or a peer replaced after preemption) re-rendezvouses in place.
        f"--max_restarts={job.backoff_limit}",
    ]


def shell_command(options: list[str]) -> list[str]:
    """`sh -c SCRIPT trainer`: the trainer flags follow as the container's args ("$@")."""
    torchrun = " ".join(["exec torchrun", *map(shlex.quote, options), "-m trainer \"$@\""])
    return ["/bin/sh", "-c", f"{_CHECK_FLAGS}\n{torchrun}", "trainer"]


def job_command(job: Job, names: JobNames) -> list[str]:
    return shell_command(torchrun_options(job, names))


def pytorchjob_command() -> list[str]:
    """The training operator sets PET_NNODES, PET_RDZV_* and PET_NPROC_PER_NODE, which torchrun
    reads as its defaults, so the command carries no rendezvous options."""
    return shell_command([])
