"""Kubernetes objects shaped as the API returns them, for the "why is it waiting" tests.

Field names follow the API reference (core/v1 Pod, Node, Event, ConfigMap; events.k8s.io/v1
Event; jobset.x-k8s.io/v1alpha2 JobSet; kueue.x-k8s.io/v1beta2 Workload). Message texts are the
sources' own: workloads/waiting/ and workloads/cloud_errors.py cite where each comes from.
"""

from __future__ import annotations

import functools
import zlib
from typing import Any

NS, JOB = "torchrec", "dlrm"
T0 = "2026-11-26T10:00:00Z"


# --- the pod spec as the stack renders it -----------------------------------------------------

def _plain(value: Any) -> Any:
    """Pulumi input types (core.AffinityArgs, ...) as the API's JSON: camelCase dicts."""
    import pulumi._types as pulumi_types

    if pulumi_types.is_input_type(type(value)):
        return _plain(pulumi_types.input_type_to_dict(value))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@functools.lru_cache(maxsize=None)
def stack_pools(cloud: str) -> dict[str, Any]:
    """The shipped stack's GPU pools (contract GpuPool: labels and taints) as that cloud's own
    pool code builds them: infra/aws/node_groups.gpu_pool_plan, infra/azure/node_pools.plan_pools,
    infra/gcp/node_pools.gpu_pool_labels (GKE spot pools carry the gke-spot label, no taint)."""
    from infra.catalog.cloud import Cloud
    from infra.catalog.machines import machine
    from infra.contract import GpuPool
    from infra.settings.loader import settings_from_mapping
    from infra.settings.model.job import PoolChoice
    from tests.harness import PROJECT, stack_config

    prefix = f"{PROJECT}:"
    settings = settings_from_mapping({k.removeprefix(prefix): v for k, v in
                                      stack_config(cloud).items() if k.startswith(prefix)})
    pools: dict[str, Any] = {}
    if cloud == "azure":
        from infra.azure.node_pools import plan_pools

        for plan in plan_pools(settings):
            gpu = machine(Cloud.AZURE, plan.pool.machine_type)
            pools[plan.key] = GpuPool(plan.pool.name, gpu, plan.pool.min_nodes,
                                      plan.pool.desired_nodes, plan.pool.max_nodes, plan.spot,
                                      plan.node_labels, list(plan.node_taints))
        return pools
    for key, pool in settings.gpu_pools_by_key.items():
        spot = key == PoolChoice.SPOT
        if cloud == "aws":
            from infra.aws.node_groups import gpu_pool_plan

            pools[key.value] = gpu_pool_plan(key.value, pool, machine(Cloud.AWS, pool.machine_type),
                                             spot, fabric=True, placement=True).pool
        else:
            from infra.gcp.node_pools import GPU_TAINT, gpu_pool_labels

            pools[key.value] = GpuPool(pool.name, machine(Cloud.GCP, pool.machine_type),
                                       pool.min_nodes, pool.desired_nodes, pool.max_nodes, spot,
                                       gpu_pool_labels(pool, spot), [GPU_TAINT])
    return pools


def rendered_spec(cloud: str, pools: tuple[str, ...], admitted: str | None) -> dict[str, Any]:
    """The trainer pod's placement as workloads/pod.py renders it for `pools` (the job's pool,
    then on-demand with the fallback policy), and, once Kueue admitted the gang to the flavor of
    pool `admitted`, with that flavor's nodeLabels merged into spec.nodeSelector (workloads/
    kueue.py resource_flavor: nodeLabels = the pool's labels; Kueue's podset.Merge)."""
    from workloads.pod import node_affinity, tolerations

    by_key = stack_pools(cloud)
    chosen = [by_key[k] for k in pools]
    spec: dict[str, Any] = {"tolerations": _plain(tolerations(*chosen)),
                            "affinity": _plain(node_affinity(*chosen))}
    if admitted is not None:
        spec["nodeSelector"] = dict(sorted(by_key[admitted].node_labels.items()))
    return spec


def jobset(*, suspend: bool = False, conditions: list[dict[str, Any]] | None = None,
           queue: str | None = None) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": JOB, "namespace": NS, "uid": "5f0c2d4e-0000-4000-8000-000000000001",
                     "labels": labels, "creationTimestamp": T0},
        "spec": {"suspend": suspend, "replicatedJobs": [{"name": "node", "replicas": 1}]},
        "status": {"conditions": conditions or [], "restarts": 0},
    }


def condition(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": T0}


def trainer_pod(index: int, *, phase: str = "Pending", node: str | None = None,
                placement: dict[str, Any] | None = None, unschedulable: str | None = None,
                waiting: tuple[str, str, str] | None = None) -> dict[str, Any]:
    """A JobSet pod `<jobset>-node-0-<index>` with our labels. unschedulable: the scheduler's
    message; waiting: (container, reason, message);
    placement: nodeSelector/affinity/tolerations, e.g. rendered_spec(...)."""
    name = f"{JOB}-node-0-{index}"
    conditions = []
    if unschedulable is not None:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "message": unschedulable, "lastProbeTime": None,
                           "lastTransitionTime": T0})
    else:
        conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                           "lastTransitionTime": T0})
    status: dict[str, Any] = {"phase": phase, "conditions": conditions, "qosClass": "Guaranteed"}
    if waiting:
        status["containerStatuses"] = [{"name": waiting[0], "ready": False, "restartCount": 0,
                                        "image": "registry.example.com/torchrec/trainer:0123abcd",
                                        "imageID": "", "started": False,
                                        "state": {"waiting": {"reason": waiting[1],
                                                              "message": waiting[2]}}}]
    if phase == "Running":
        status["containerStatuses"] = [{"name": "trainer", "ready": True, "restartCount": 0,
                                        "image": "x", "imageID": "x", "started": True,
                                        "state": {"running": {"startedAt": T0}}}]
    spec: dict[str, Any] = {"containers": [{"name": "trainer", "image": "x"}], **(placement or {})}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": f"pod-uid-{index}",
                     "labels": {"app.kubernetes.io/name": "torchrec-trainer",
                                "app.kubernetes.io/instance": JOB,
                                "jobset.sigs.k8s.io/jobset-name": JOB,
                                "batch.kubernetes.io/job-completion-index": str(index)}},
        "spec": spec, "status": status,
    }


def prepare_pod(phase: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{JOB}-prepare-1a2b3c4d-x7k2p", "namespace": NS,
                     "labels": {"app.kubernetes.io/name": "torchrec-prepare",
                                "app.kubernetes.io/instance": JOB}},
        "spec": {"containers": [{"name": "prepare", "image": "x"}]},
        "status": {"phase": phase, "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": T0}]},
    }


def event(reason: str, message: str, *, on: str = f"{JOB}-node-0-0", kind: str = "Pod",
          namespace: str = NS, source: str = "cluster-autoscaler", type_: str = "Normal",
          time: str = T0) -> dict[str, Any]:
    """A core/v1 Event as /api/v1/namespaces/<ns>/events lists it."""
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{on}.{zlib.crc32((reason + message + time).encode()):x}",
                     "namespace": namespace, "creationTimestamp": time},
        "involvedObject": {"kind": kind, "namespace": namespace, "name": on,
                           "apiVersion": "v1", "uid": "pod-uid-0"},
        "reason": reason, "message": message, "type": type_, "count": 1,
        "source": {"component": source},
        "firstTimestamp": time, "lastTimestamp": time, "eventTime": None,
        "reportingComponent": source, "reportingInstance": "",
    }


def new_event(reason: str, note: str, *, on: str = f"{JOB}-node-0-0",
              controller: str = "cluster-autoscaler", time: str = "2026-11-26T10:00:00.000000Z"
              ) -> dict[str, Any]:
    """The same as events.k8s.io/v1 returns it: regarding, note, reportingController."""
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": f"{on}.18a7f", "namespace": NS, "creationTimestamp": time},
        "eventTime": time, "reportingController": controller, "reportingInstance": "",
        "action": "ScaleUp", "reason": reason, "note": note, "type": "Warning",
        "regarding": {"kind": "Pod", "namespace": NS, "name": on, "apiVersion": "v1"},
    }


def node(name: str, *, provider: str = "gce://my-project/us-central1-a/",
         taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"providerID": f"{provider}{name}", "taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def autoscaler_status(status_yaml: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cluster-autoscaler-status", "namespace": "kube-system",
                     "annotations": {"cluster-autoscaler.kubernetes.io/last-updated":
                                     "2026-11-26 10:05:00.123456789 +0000 UTC"}},
        "data": {"status": status_yaml},
    }


def kueue_workload(reserved: dict[str, Any], admitted: dict[str, Any] | None = None, *,
                   others: tuple[dict[str, Any], ...] = (), active: bool = True,
                   requeue_state: dict[str, Any] | None = None) -> dict[str, Any]:
    """Kueue names a JobSet's Workload jobset-<name>-<hash> and owns it by the JobSet.
    others: more conditions (Evicted, Requeued); requeue_state: status.requeueState."""
    status: dict[str, Any] = {"conditions": [c for c in (reserved, admitted, *others) if c]}
    if requeue_state is not None:
        status["requeueState"] = requeue_state
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": f"jobset-{JOB}-3c9a1", "namespace": NS,
                     "labels": {"kueue.x-k8s.io/job-uid": "5f0c2d4e-0000-4000-8000-000000000001"},
                     "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2",
                                          "kind": "JobSet", "name": JOB, "controller": True,
                                          "blockOwnerDeletion": True,
                                          "uid": "5f0c2d4e-0000-4000-8000-000000000001"}]},
        "spec": {"queueName": "training", "podSets": [{"name": "node", "count": 2}],
                 "active": active},
        "status": status,
    }


# Message texts, each from the source named in workloads/waiting/ or workloads/cloud_errors.py.
INSUFFICIENT_GPU = ("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't "
                    "match Pod's node affinity/selector. preemption: 0/3 nodes are available: "
                    "3 Preemption is not helpful for scheduling.")
GCE_QUOTA = ("Node scale up in zones us-central1-a associated with this pod failed: GCE quota "
             "exceeded. Pod is at risk of not being scheduled.")
GCE_STOCKOUT = ("Node scale up in zones us-central1-a associated with this pod failed: GCE out "
                "of resources. Pod is at risk of not being scheduled.")
TRIGGERED = ("pod triggered scale-up: [{https://www.googleapis.com/compute/v1/projects/my-project/"
             "zones/us-central1-a/instanceGroups/gke-torchrec-gpu-spot-4f1d2c3b-grp 0->2 (max: 2)}]")
BACKOFF = "pod didn't trigger scale-up: 1 in backoff after failed scale-up"
MAX_SIZE = "pod didn't trigger scale-up: 1 max node group size reached, 2 node(s) didn't match Pod's node affinity/selector"
NO_FIT = "pod didn't trigger scale-up: 3 node(s) didn't match Pod's node affinity/selector"
AWS_VCPU = ("W1126 10:01:02.345678       1 auto_scaling_groups.go:556] ASG eks-gpu-ondemand-"
            "a1b2c3d4 scaling failed with description: Launching a new EC2 instance.  Status "
            "Reason: You have requested more vCPU capacity than your current vCPU limit of 0 "
            "allows for the instance bucket that the specified instance type belongs to. Please "
            "visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this "
            "limit. Launching EC2 instance failed.")
AWS_ICE = ("W1126 10:01:02.345678       1 auto_scaling_groups.go:556] ASG eks-gpu-spot-a1b2c3d4 "
           "scaling failed with description: Launching a new EC2 instance.  Status Reason: "
           "Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot "
           "capacity available that matches your request. Launching EC2 instance failed.")
AWS_PLACEHOLDER = ("Failed adding 2 nodes to group eks-gpu-ondemand-a1b2c3d4 due to "
                   "OutOfResource.placeholder-cannot-be-fulfilled; source errors: AWS cannot "
                   "provision any more instances for this node group")
AZURE_QUOTA = ("Scale-up failed for group aks-gpuondemand-12345678-vmss: Code=\"OperationNotAllowed\" "
               "Message=\"Operation could not be completed as it results in exceeding approved "
               "standardNDASv4_A100Family Cores quota. Additional details - Deployment Model: "
               "Resource Manager, Location: eastus, Current Limit: 0, Current Usage: 0, "
               "Additional Required: 96, (Minimum) New Limit Required: 96.\"")
AZURE_ALLOCATION = """\
time: "2026-11-26 10:05:00.123456789 +0000 UTC"
autoscalerStatus: "Running"
clusterWide:
  health:
    status: "Healthy"
nodeGroups:
  -
    name: "aks-gpuspot-98036146-vmss"
    health:
      status: "Healthy"
      cloudProviderTarget: 0
      minSize: 0
      maxSize: 2
    scaleUp:
      status: "Backoff"
      backoffInfo:
        errorCode: "cloudProviderError"
        errorMessage: "failed to increase node group size: Code=\\"ZonalAllocationFailed\\" Message=\\"Allocation failed. We do not have sufficient capacity for the requested VM size in this zone.\\""
      lastProbeTime: "2026-11-26T10:05:00Z"
      lastTransitionTime: "2026-11-26T10:02:00Z"
"""
GCE_POOL_EXHAUSTED = """\
time: "2026-11-26 10:05:00.123456789 +0000 UTC"
autoscalerStatus: "Running"
nodeGroups:
  -
    name: "https://www.googleapis.com/compute/v1/projects/my-project/zones/us-central1-a/instanceGroups/gke-torchrec-gpu-ondemand-grp"
    scaleUp:
      status: "Backoff"
      backoffInfo:
        errorCode: "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
        errorMessage: "Instance 'gke-torchrec-gpu-ondemand-9f8e-abcd' creation failed: The zone 'projects/my-project/zones/us-central1-a' does not have enough resources available to fulfill the request.  '(resource type:compute)'."
"""
KUEUE_MAX = ("couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in "
             "flavor spot, previously considered podsets requests (0) + current podset request "
             "(16) > maximum capacity (8)")
KUEUE_WAIT = ("couldn't assign flavors to pod set node: insufficient unused quota for "
              "nvidia.com/gpu in flavor on-demand, 8 more needed")
UNHEALTHY_TAINT_MESSAGE = ("0/3 nodes are available: 1 node(s) had untolerated taint "
                           "{status-taint.cluster-autoscaler.kubernetes.io/torchrec-cloud-unhealthy: true}, 2 node(s) didn't match Pod's node "
                           "affinity/selector. preemption: 0/3 nodes are available: 3 Preemption "
                           "is not helpful for scheduling.")
# Kueue v0.19.2's own words (pkg/controller/core/workload_controller.go: triggerDeactivation and
# the deactivation branch; reconcileNotReadyTimeout), after its requeuing limit and on a timeout.
DEACTIVATED_MESSAGE = ("The workload is deactivated due to exceeding the maximum number of "
                       "re-queuing retries")
PODS_READY_TIMEOUT_MESSAGE = f"Exceeded the PodsReady timeout {NS}/jobset-{JOB}-3c9a1"
# AKS's Cluster Autoscaler for a scale set VM that failed to provision (azure_scale_set.go:
# OutOfResources, provisioning-state-failed), as clusterstate.go's ScaleUpFailed event.
AZURE_PROVISIONING_FAILED = ("Failed adding 2 nodes to group aks-gpuspot-98036146-vmss due to "
                             "OutOfResource.provisioning-state-failed; source errors: Azure failed "
                             "to provision a node for this node group")
# EC2's reservation refusals as an Auto Scaling group's failed activity repeats them.
AWS_RESERVATION_FULL = ("W1126 10:01:02.345678       1 auto_scaling_groups.go:555] ASG eks-gpu-"
                        "ondemand-a1b2c3d4 scaling failed with description: Launching a new EC2 "
                        "instance. Status Reason: ReservationCapacityExceeded - The targeted "
                        "Capacity Reservation does not enough available instance capacity to "
                        "fulfill your request. Launching EC2 instance failed.")
