"""`job`: the training job the stack starts, the pool it runs on and what a spot job does when
spot capacity is short."""

from __future__ import annotations

from enum import Enum
from typing import Union

from pydantic import Field

from infra.settings.model.section import Section


class JobKind(str, Enum):
    JOB_SET = "JobSet"
    PYTORCH_JOB = "PyTorchJob"


# The JobSet's one replicated job; its pods are `<job.name>-node-0-<index>` (workloads/jobset.py).
JOBSET_REPLICATED_JOB = "node"
# The preparation Job's logical name is `<job.name>-prepare`; Pulumi names it that plus '-' and 8
# random characters (pulumi-kubernetes provider/pkg/metadata/naming.go AssignNameIfAutonamable ->
# resource.NewUniqueName(..., randlen 0), "if randlen <= 0 { randlen = 8 }"), and a Job's name
# becomes a pod label value, at most 63 characters (workloads/prepare.py).
PREPARE_JOB_SUFFIX = "-prepare"
PULUMI_AUTONAME_SUFFIX = 1 + 8


class PoolChoice(str, Enum):
    ON_DEMAND = "onDemand"
    SPOT = "spot"


class SpotShortagePolicy(str, Enum):
    WAIT = "wait"
    ON_DEMAND = "onDemand"


class SpotShortage(Section):
    """What a spot job does when the spot pool cannot get nodes (Kueue, workloads/kueue.py); waiting never uses job.backoffLimit and never fails the job."""  # noqa: E501 (one line: the docs/settings.md table row)

    policy: SpotShortagePolicy = Field(
        SpotShortagePolicy.WAIT,
        description="wait (for spot nodes, as long as it takes unless maxWaitMinutes is set) "
        "or onDemand (refused on every cloud, with the reason: no autoscaler here reports "
        "spot capacity to Kueue only once the spot nodes exist; use job.pool onDemand).")
    max_wait_minutes: int | None = Field(
        None, ge=15,
        description="Unset (default): Kueue requeues a gang that gets no nodes without end. "
        "Set: turned into a number of PodsReady timeouts, which Kueue counts over the job's "
        "whole life (never reset when the gang runs), after which it holds (deactivates) the "
        "job, never Failed; resume it with `kubectl -n <namespace> patch workload <name> "
        "--type merge -p '{\"spec\":{\"active\":true}}'`.")


TrainerArgValue = Union[str, int, float, bool, list[int], list[str]]


class Job(Section):
    """The training job the stack starts."""

    name: str = Field("dlrm", description="Job name (RFC 1123, at most 63 characters).")
    namespace: str = Field("torchrec", description="Kubernetes namespace (RFC 1123 label).")
    service_account: str = Field("trainer", description="Kubernetes service account name.")
    image: str = Field(
        "", description="Trainer image; empty = build trainer/Dockerfile into the stack's registry."
    )
    kind: JobKind = Field(
        JobKind.JOB_SET,
        description="JobSet (one Indexed Job, restarted as a gang) or PyTorchJob (Kubeflow).")
    pool: PoolChoice = Field(PoolChoice.ON_DEMAND, description="onDemand or spot.")
    spot_shortage: SpotShortage = Field(
        default_factory=lambda: SpotShortage(),
        description="When spot capacity is short (job.pool spot): see the section.")
    nodes: int = Field(2, ge=1, description="Nodes (pods) the job spans.")
    processes_per_node: int = Field(8, ge=1, description="torchrun processes per node.")
    backoff_limit: int = Field(
        3, ge=0, description="Gang restarts after crashes; preemptions never count.")
    termination_grace_seconds: int = Field(
        120, ge=30,
        description="On-demand pools: the pod's time from SIGTERM to SIGKILL on a drain. "
        "Spot pools take it from the cloud's notice (infra/catalog/stop_notices.py).")
    suspend: bool = Field(
        False, description="Create the training job suspended: no pods, so the GPU pools stay "
        "at their minimum, e.g. while dataset.prepare runs for hours; set it back to false and "
        "`pulumi up` to start training. Either change recreates the job: set on a running job, "
        "it deletes it (training resumes from its checkpoint when set back).")
    trainer_args: dict[str, TrainerArgValue] = Field(
        # The dense MLP's last size must equal embedding_dim (trainer/config.py).
        default_factory=lambda: {"batch_size": 2048, "embedding_dim": 128,
                                 "dense_arch_layer_sizes": [512, 256, 128]},
        description="Trainer flags without dashes, e.g. {batch_size: 2048}; checked against "
        "the trainer's own flags (`.venv/bin/python -m trainer --help`).",
    )
    max_hourly_usd: float | None = Field(
        None, gt=0,
        description="Spend ceiling, USD per hour: the stack is refused when what the job may "
        "scale to (each GPU pool the job can use and the system pool at its maxNodes, with the "
        "file system, network and control plane; infra/estimate.py) would cost more. Unset: no "
        "ceiling.")

    @property
    def prepare_service_account(self) -> str:
        """The dataset preparation's own Kubernetes service account: its identity reads the
        source and nothing else (no checkpoint write, no node rights)."""
        return f"{self.service_account}{PREPARE_JOB_SUFFIX}"
