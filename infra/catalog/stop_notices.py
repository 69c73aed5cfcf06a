"""What a node is told before it stops, per cloud and capacity type: the one source of every
notice (infra/preemption.py derives the pod's grace and the save deadline from it)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from infra.catalog.cloud import Cloud
from infra.kubernetes_versions import version_key, version_reaches


class Capacity(str, Enum):
    """How a pool buys its machines."""

    ON_DEMAND = "onDemand"
    SPOT = "spot"


@dataclass(frozen=True)
class StopNotice:
    """What a node of one cloud and capacity type is told before it stops, and how much of that
    reaches the training pod as the time between its SIGTERM and its SIGKILL.

    ``pod_seconds`` is None where nothing forces a stop at a fixed time (on-demand: upgrades and
    maintenance drain nodes and honour the pod's own grace, ``job.terminationGraceSeconds``).
    infra/preemption.py derives the pod's grace, torchrun's shutdown timeout and the trainer's
    save deadline from it; nothing else may hard-code a notice.
    """

    cloud: Cloud
    capacity: Capacity
    notice_seconds: int | None  # notice to the VM; None: no forced stop
    pod_seconds: int | None  # what the pod gets of it after the delivery path
    path: str  # how the notice becomes the pod's SIGTERM
    source: str  # where the numbers come from
    # The version from which this entry applies: a minor ("1.35") or a GKE build
    # ("1.35.0-gke.1171000"), compared by `version_reaches`; None: every version.
    min_kubernetes: str | None = None


STOP_NOTICES: tuple[StopNotice, ...] = (
    StopNotice(
        Cloud.AWS, Capacity.SPOT, notice_seconds=120, pod_seconds=105,
        path="EC2 Spot Instance Interruption Warning -> EventBridge -> SQS -> AWS Node "
             "Termination Handler (queue mode) cordons and drains the node; the eviction "
             "sends SIGTERM. 15 s are kept for EventBridge delivery, the handler's SQS poll and "
             "the eviction call.",
        source="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html; "
               "https://github.com/aws/aws-node-termination-handler#queue-processor",
    ),
    StopNotice(
        Cloud.AZURE, Capacity.SPOT, notice_seconds=30, pod_seconds=15,
        path="Scheduled Events 'Preempt' (at least 30 s before eviction) -> the node problem "
             "detector polls it and sets a node condition -> AKS node auto-drain cordons and "
             "drains the node (best effort). Observed notices can be 'materially shorter' than "
             "30 s (Azure/karpenter-provider-azure, pkg/controllers/node/interruption), so the "
             "pod is budgeted 15 s, like GKE's.",
        source="https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events; "
               "https://learn.microsoft.com/azure/aks/node-auto-drain; "
               "https://github.com/Azure/karpenter-provider-azure",
    ),
    StopNotice(
        Cloud.GCP, Capacity.SPOT, notice_seconds=30, pod_seconds=15,
        path="Compute Engine preemption (ACPI G2 soft off, 30 s before the VM stops) -> kubelet "
             "graceful node shutdown: non-system pods get the first 15 s, system pods the rest.",
        source="https://cloud.google.com/compute/docs/instances/spot#preemption-process; "
               "https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms",
    ),
    # From GKE 1.35.0-gke.1171000 a Standard spot pool may extend graceful shutdown to 120 s
    # (kubelet shutdownGracePeriodSeconds in {0, 30, 120}); infra/gcp sets it, keeping GKE's
    # 15 s for system-critical pods (networking, the metadata server a checkpoint upload needs).
    StopNotice(
        Cloud.GCP, Capacity.SPOT, notice_seconds=120, pod_seconds=105,
        path="Compute Engine preemption -> kubelet graceful node shutdown extended to 120 s on "
             "the spot pool: non-system pods get the first 105 s, system pods the last 15 s.",
        source="https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms; "
               "https://cloud.google.com/kubernetes-engine/docs/how-to/node-system-config",
        min_kubernetes="1.35.0-gke.1171000",
    ),
    *(
        StopNotice(
            cloud, Capacity.ON_DEMAND, notice_seconds=None, pod_seconds=None,
            path="no forced stop: upgrades and host maintenance drain the node, and a drain "
                 "honours the pod's terminationGracePeriodSeconds",
            source=source,
        )
        for cloud, source in (
            (Cloud.AWS, "https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html"),
            (Cloud.AZURE, "https://learn.microsoft.com/azure/aks/upgrade-cluster"),
            (Cloud.GCP, "https://cloud.google.com/kubernetes-engine/docs/concepts/node-pool-upgrade-strategies"),
        )
    ),
)


def stop_notice(cloud: Cloud | str, capacity: Capacity | str,
                kubernetes_version: str | None = None) -> StopNotice:
    """The notice a node of ``cloud`` bought as ``capacity`` gets on ``kubernetes_version``
    (the newest entry whose min_kubernetes it reaches; without a version, the base entry)."""
    fits = [n for n in STOP_NOTICES if n.cloud == Cloud(cloud)
            and n.capacity == Capacity(capacity)
            and (n.min_kubernetes is None or (kubernetes_version is not None
                                              and version_reaches(kubernetes_version,
                                                                  n.min_kubernetes)))]
    if not fits:
        raise KeyError(f"no stop notice for {Cloud(cloud).value} {Capacity(capacity).value}")
    return max(fits, key=lambda n: version_key(n.min_kubernetes) if n.min_kubernetes else (0,))
