"""Another training job on a running stack's cluster (`torchrec-cloud submit`), as plain objects.

The stack's own JobSet, as `pulumi up` rendered it (workloads/pod.py pod_template, read back
from the cluster), is the base: its pod template carries the stack's image, identity, volumes,
fabric and security settings. What belongs to one job is rendered again here by the functions
the stack's own job uses: the JobSet's spec (jobset.jobset_spec), the launcher's command
(command.job_command), the user's flags (flags.user_flags), the stack's per-job flags for its
name, nodes and pool (flags.stack_flags: store, folders, cadence, write share, stop budget), the
run folders (pod.job_folders) and the gate's per-size flags (flags.gang_gate_flags). Its own headless service and
network policy are rendered by workloads/service.py and workloads/network_policy.py, as the
stack's are; it lands in the base JobSet's namespace, where the stack's Kueue queue is.

A submitted job is not a Pulumi resource: `pulumi up` neither sees nor deletes it. Its labels
say so (`app.kubernetes.io/managed-by: torchrec-cloud`, SUBMITTED_LABEL).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.catalog.machines import Machine
from infra.preemption import SaveEstimate, StopBudget
from infra.settings.model.checkpoints import Checkpoints
from infra.settings.model.dataset import Dataset
from infra.settings.model.job import JOBSET_REPLICATED_JOB, Job, PoolChoice
from workloads.command import job_command
from workloads.flags import (PER_JOB_FLAGS, STACK_OWNED, gang_gate_flag_names, gang_gate_flags,
                             stack_flags, user_flags)
from workloads.jobset import API_VERSION, jobset_spec
from workloads.kueue import PRIORITY_LABEL, queue_label
from workloads.names import TRAINER_CONTAINER, JobNames
from workloads.network_policy import same_job_only_manifest
from workloads.pod import FOLDER_PREPARER, job_folders, preparer_script
from workloads.service import service_manifest
from workloads.spend import spend_env

SUBMITTED_LABEL = "torchrec-cloud/submitted"  # "true" on every object `submit` creates
STACK_LABEL = "torchrec-cloud/stack"
MANAGED_BY = "torchrec-cloud"  # the stack's own objects say "pulumi"


class BaseJobError(ValueError):
    """The stack's own JobSet cannot serve as the base (another kind, or not rendered by us)."""


@dataclass(frozen=True)
class Submission:
    """What differs from the stack's own job: a validated Job (name, nodes, pool and trainer
    flags already judged by the settings' rules), where its store lies, what it costs."""

    job: Job
    stack: str
    queue: str  # the stack's LocalQueue (named after the stack's job)
    bucket_root: str  # the checkpoint URI's parent: <scheme>://<bucket>
    budget: StopBudget  # of the pool it runs on
    machine: Machine
    checkpoints: Checkpoints  # the cadence in effect for this job (infra/cadence.py)
    dataset: Dataset
    save_estimate: SaveEstimate | None  # one save of this job (infra/preemption.py)
    mount: str  # the shared file system's mount path
    priority: str | None = None

    @property
    def spot(self) -> bool:
        return self.job.pool == PoolChoice.SPOT

    @property
    def names(self) -> JobNames:
        return JobNames.of(self.job)

    @property
    def store(self) -> str:
        return f"{self.bucket_root}/{self.job.name}"

    @property
    def usd_per_node_hour(self) -> float:
        return self.machine.spot_usd_per_hour if self.spot else self.machine.on_demand_usd_per_hour


def labels(s: Submission) -> dict[str, str]:
    return {**s.names.common_labels, "app.kubernetes.io/managed-by": MANAGED_BY,
            SUBMITTED_LABEL: "true", STACK_LABEL: s.stack}


def _flag_name(arg: str) -> str:
    return arg[2:].split("=", 1)[0] if arg.startswith("--") else ""


def trainer_args(base_args: Sequence[str], s: Submission) -> list[str]:
    """As the stack's own job orders them: the user's flags, the stack's per-job flags for this
    job (flags.stack_flags, the one path), then the stack's cluster-wide flags as the base has
    them (planner, fabric gate) with the gate's per-size flags anew for this job's nodes
    (argparse keeps the last value of a repeated flag)."""
    own = stack_flags(s.job, s.store, s.mount, s.machine.cloud, s.checkpoints, s.dataset,
                      s.budget, s.save_estimate)
    assert all(isinstance(flag, str) for flag in own)  # plain values in, plain flags out
    gate_mode = next((a.split("=", 1)[1] for a in base_args if _flag_name(a) == "fabric_gate"), "")
    gate = gang_gate_flags(s.machine, s.job.nodes, enforced=gate_mode == "enforce")
    per_size = gang_gate_flag_names()
    cluster_wide: list[str] = []
    for arg in base_args:
        name = _flag_name(arg)
        if name not in STACK_OWNED or name in PER_JOB_FLAGS:
            continue
        if name in per_size:  # those anew for this size, where the stack's first one was
            cluster_wide += gate
            gate = []
            continue
        cluster_wide.append(arg)
    return [*user_flags(s.job.trainer_args), *map(str, own), *cluster_wide]


def pod_template(base_template: Mapping[str, Any], s: Submission) -> dict[str, Any]:
    """The stack's pod template, with this job's labels, command, flags, folders, grace and
    spend record (workloads/spend.py)."""
    template = copy.deepcopy(dict(base_template))
    names = s.names
    meta = template.setdefault("metadata", {})
    meta["labels"] = {**{k: v for k, v in (meta.get("labels") or {}).items()
                         if k not in names.common_labels}, **labels(s)}
    meta["labels"] = {k: v for k, v in meta["labels"].items() if not k.startswith("kueue.x-k8s.io/")}
    spec = template["spec"]
    # Kueue writes the admitted flavor's nodeSelector into a running JobSet's template (and
    # takes it back on suspension); the stack renders none (pod.node_affinity picks the pools),
    # so a copy of a running base drops it and Kueue chooses this job's flavor itself.
    spec.pop("nodeSelector", None)
    spec["terminationGracePeriodSeconds"] = s.budget.pod_grace_seconds
    for init in spec.get("initContainers") or []:
        if init.get("name") == FOLDER_PREPARER:
            init["command"] = ["/bin/sh", "-c", preparer_script(job_folders(s.mount, s.job.name))]
    trainers = [c for c in spec.get("containers", []) if c.get("name") == TRAINER_CONTAINER]
    if not trainers:
        raise BaseJobError(f"the stack's JobSet has no container {TRAINER_CONTAINER!r}")
    trainer = trainers[0]
    trainer["command"] = job_command(s.job, names, s.budget)
    trainer["args"] = trainer_args(trainer.get("args") or [], s)
    spend = spend_env(s.job.name, s.job.nodes, "spot" if s.spot else "on-demand",
                      s.usd_per_node_hour, s.machine.gpu_count)
    env = [e for e in trainer.get("env") or [] if e.get("name") not in spend]
    trainer["env"] = sorted([*env, *({"name": k, "value": v} for k, v in spend.items())],
                            key=lambda e: e["name"])
    return template


def base_template(base: Mapping[str, Any]) -> dict[str, Any]:
    """The pod template of the stack's own JobSet."""
    if base.get("kind") != "JobSet":
        raise BaseJobError(f"the stack's job is a {base.get('kind')}: `submit` queues JobSets "
                           "(job.kind: jobset)")
    for replicated in base.get("spec", {}).get("replicatedJobs", []):
        if replicated.get("name") == JOBSET_REPLICATED_JOB:
            return replicated["template"]["spec"]["template"]
    raise BaseJobError(f"the stack's JobSet has no replicated job {JOBSET_REPLICATED_JOB!r}")


def job_set(base: Mapping[str, Any], s: Submission) -> dict[str, Any]:
    names = s.names
    template = pod_template(base_template(base), s)
    meta_labels = {**labels(s), **queue_label(s.queue, False)}
    if s.priority:
        meta_labels[PRIORITY_LABEL] = s.priority
    return {
        "apiVersion": API_VERSION, "kind": "JobSet",
        "metadata": {"name": names.job, "namespace": names.namespace, "labels": meta_labels},
        "spec": jobset_spec(s.job.nodes, s.job.backoff_limit, False, names.service, labels(s),
                            TRAINER_CONTAINER, template),
    }


def headless_service(s: Submission) -> dict[str, Any]:
    """Pod 0's stable name for the rendezvous: workloads/service.py's, as the stack's job has it."""
    return service_manifest(s.names, labels(s))


def network_policy(s: Submission) -> dict[str, Any]:
    """Only the job's own pods may connect: workloads/network_policy.py's, as the stack's job."""
    return same_job_only_manifest(s.names, labels(s))


def objects(base: Mapping[str, Any], s: Submission) -> list[dict[str, Any]]:
    """Everything `submit` creates, in creation order (the JobSet last)."""
    return [headless_service(s), network_policy(s), job_set(base, s)]
