"""The container's command: check the trainer's flags once, then hand over to the launcher.

`python -m trainer.launch` is torchrun's own agent with one exit status Kubernetes can act on
(trainer/launch.py): 0 only when training finished, RESUME after a preemption, a lost peer
(an NCCL watchdog abort included) or a rendezvous whose peers did not all arrive, CONFIG_ERROR
for bad flags, anything else a crash. Parsing the flags first (parse_config exits
CONFIG_ERROR on a bad flag or a missing dataset) fails the whole job at once on a typo instead
of starting every GPU node's workers.
"""

from __future__ import annotations

import shlex

from infra.preemption import StopBudget
from infra.settings.model.job import Job
from trainer.exit_codes import CONFIG_ERROR
from workloads.names import JobNames

_CHECK_FLAGS = (
    "python -c 'import sys; from trainer.config import parse_config; "
    "parse_config(sys.argv[1:])' \"$@\" || exit " + str(CONFIG_ERROR)
)


def launcher_options(budget: StopBudget) -> list[str]:
    """What both job kinds pass to the agent: no in-place restarts (the gang restarts as a
    whole, by the job's rules) and the shutdown timeout that fits the cloud's notice."""
    return [
        "--max_restarts=0",
        f"--shutdown_timeout={budget.shutdown_timeout_seconds}",
    ]


# GPU nodes scaled up from zero can start many minutes apart (instance start, driver and
# device-plugin start, image pull); torchrun's default of 600 s would restart a gang still
# waiting for capacity. When it runs out (a peer pod is not running: no spot capacity, no
# quota), the launcher exits RESUME, not a crash (trainer/launch.py): the JobSet recreates the
# gang without using maxRestarts, so this bounds one wait, not the job; how long a job may wait
# for capacity in all is the gang admission's bound, not the retry budget. An hour: longer than
# any machine's cold start (infra/catalog/machines.py node_ready_minutes, Kueue's ready timeout), so
# Kueue's eviction, which frees the nodes a partial gang holds, acts before the rendezvous gives up.
RENDEZVOUS_JOIN_TIMEOUT_SECONDS = 3600


def rendezvous_options(job: Job, names: JobNames) -> list[str]:
    """c10d rendezvous hosted by the agent on pod 0, found through the headless service."""
    return [
        f"--nnodes={job.nodes}",
        f"--nproc_per_node={job.processes_per_node}",
        "--rdzv_backend=c10d",
        f"--rdzv_endpoint={names.rendezvous_endpoint}",
        f"--rdzv_id={names.job}",
        f"--rdzv_conf=join_timeout={RENDEZVOUS_JOIN_TIMEOUT_SECONDS}",
    ]


def shell_command(options: list[str]) -> list[str]:
    """`sh -c SCRIPT trainer`: the trainer flags follow as the container's args ("$@")."""
    launch = " ".join(["exec python -m trainer.launch", *map(shlex.quote, options),
                       "-m trainer \"$@\""])
    return ["/bin/sh", "-c", f"{_CHECK_FLAGS}\n{launch}", "trainer"]


def job_command(job: Job, names: JobNames, budget: StopBudget) -> list[str]:
    return shell_command([*rendezvous_options(job, names), *launcher_options(budget)])


def pytorchjob_command(budget: StopBudget) -> list[str]:
    """The training operator sets PET_NNODES, PET_RDZV_* and PET_NPROC_PER_NODE, which the
    agent's parser reads as its defaults, so the command carries no rendezvous options."""
    return shell_command(launcher_options(budget))
