"""Why the training gang is not running: one plain-language reason, the evidence and a next step.

Pure: it reads the Kubernetes objects as the API returns them (JSON dicts) and never talks to a
cluster, so `python -m workloads.why` and a later status command share it and the tests feed it
recorded objects. The answers are tried in a fixed precedence: a finished job, then what only
the user can fix (image, admission, quota, capacity, pool size), then what fixes itself (a node
being added, the dataset being prepared).

Where the words come from:
- Cluster Autoscaler pod events (processors/status/eventing_scale_up_processor.go; FAQ "What
  events are emitted by CA?"): `TriggeredScaleUp` "pod triggered scale-up: [{<group> 0->2 (max:
  2)}]" and `NotTriggerScaleUp` "pod didn't trigger scale-up: <n> <reason>, ..." with the reasons
  "max node group size reached", "in backoff after failed scale-up", "not ready for scale-up",
  "max cluster <resources> limit reached" (core/scaleup/orchestrator/skippedreasons.go).
- Its events on kube-system/cluster-autoscaler-status: `FailedToScaleUpGroup` "Scale-up failed for
  group %s: %v" (core/scaleup/orchestrator/executor.go) and `ScaleUpFailed` "Failed adding %v
  nodes to group %v due to %v; source errors: %v" (clusterstate/clusterstate.go); the ConfigMap's
  `status` YAML with nodeGroups[].scaleUp.status "Backoff" and backoffInfo.errorCode/errorMessage
  (clusterstate/utils/status_test.yaml, CA 1.30+).
- GKE's pod event `FailedScaleUp` "Node scale up in zones %v associated with this pod failed: %v.
  Pod is at risk of not being scheduled." (GKE autoscaler's failed scale-up event logger).
- The scheduler: `FailedScheduling` and the pod's PodScheduled=False/Unschedulable condition, e.g.
  "0/3 nodes are available: 3 Insufficient nvidia.com/gpu." and "node(s) had untolerated taint
  {key: value}" (kube-scheduler's NodeResourcesFit and TaintToleration plugins).
- The kubelet: a container waiting with reason ErrImagePull / ImagePullBackOff.
- Kueue (pkg/scheduler/flavorassigner/flavorassigner.go, apis/kueue/v1beta2/workload_types.go):
  the Workload's QuotaReserved=False condition, reasons WaitingForQuota / ExceedsMaxQuota /
  Pending, message "couldn't assign flavors to pod set <name>: insufficient quota for <resource>
  in flavor <flavor>, ... > maximum capacity (...)"; Admitted=False while admission checks wait.
- Kueue v0.19.2, a held or requeued gang (apis/kueue/v1beta2/workload_types.go: spec.active,
  status.requeueState {count, requeueAt}, condition Evicted with reasons PodsReadyTimeout and
  Deactivated; pkg/workload/evict/evict.go IsEvictedByDeactivation: a reason that starts with
  "Deactivated", written "Deactivated" + "DueTo" + the cause, e.g.
  DeactivatedDueToRequeuingLimitExceeded with "The workload is deactivated due to exceeding the
  maximum number of re-queuing retries" (pkg/controller/core/workload_controller.go
  triggerDeactivation); a PodsReadyTimeout eviction says "Exceeded the PodsReady timeout <ns/name>"
  and sets requeueState (workload.go UpdateRequeueState); pkg/controller/jobframework/reconciler.go
  ~585-605 stops the job on Evicted=True and sets Requeued=False with the eviction's reason until
  the backoff ends (Requeued=True, BackoffFinished). A deactivated Workload is never admitted
  again until spec.active is set back to true.
Cloud quota and capacity texts: workloads/cloud_errors.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable

import yaml

from workloads import cloud_errors
from workloads.cloud_errors import Refusal
from workloads.names import JobNames
from workloads.watch import prepare_logs_command

# The taint the fabric and GPU health gate puts on a node it leaves out (issue 22, item 5, "name
# the slow node and leave it out"); the lead aligns it with that helper's constant.
UNHEALTHY_TAINT = "torchrec-cloud/unhealthy"
AUTOSCALER_STATUS = "cluster-autoscaler-status"  # kube-system ConfigMap (FAQ.md)
IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName"})
SCALE_UP_FAILED_EVENTS = frozenset({"FailedScaleUp", "ScaleUpFailed", "FailedToScaleUpGroup"})
# The node labels that mark a spot node, per cloud. The pod carries them as spec.nodeSelector
# (Kueue merges the admitted flavor's nodeLabels there: workloads/kueue.py resource_flavor) or in
# its required node affinity (workloads/pod.py node_affinity, one term per pool it may use).
# GKE spot pools are not tainted: GKE labels their nodes cloud.google.com/gke-spot=true and
# cloud.google.com/gke-provisioning=spot (cloud.google.com/kubernetes-engine/docs/concepts/spot-vms);
# infra/gcp/node_pools.py gpu_pool_labels. EKS managed node groups label capacity type
# eks.amazonaws.com/capacityType=SPOT (docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html);
# this stack's own pools carry torchrec-cloud/capacity=spot (infra/aws/node_groups.py CAPACITY_LABEL).
# AKS spot pools: kubernetes.azure.com/scalesetpriority=spot (learn.microsoft.com/azure/aks/spot-node-pool;
# infra/azure/node_pools.py SPOT_LABEL).
SPOT_LABELS: dict[str, str] = {
    "cloud.google.com/gke-spot": "true",
    "cloud.google.com/gke-provisioning": "spot",
    "eks.amazonaws.com/capacityType": "SPOT",
    "torchrec-cloud/capacity": "spot",
    "kubernetes.azure.com/scalesetpriority": "spot",
}
# Kueue's Evicted reasons (apis/kueue/v1beta2/workload_types.go, v0.19.2).
EVICTED_PODS_READY_TIMEOUT = "PodsReadyTimeout"
EVICTED_DEACTIVATED = "Deactivated"  # a prefix: "DeactivatedDueTo<cause>"


class Kind(str, Enum):
    """The answers, in the order they are tried (the first that applies wins)."""

    NOT_FOUND = "not found"
    COMPLETED = "completed"
    FAILED = "failed"
    RUNNING = "running"
    IMAGE_PULL = "image pull failing"
    HELD = "held by Kueue"
    REQUEUED = "requeued after a timeout"
    ADMISSION = "waiting for admission"
    SUSPENDED = "suspended"
    NO_QUOTA = "no quota"
    NO_CAPACITY = "no capacity"
    SCALE_UP_FAILED = "scale-up failed"
    NO_SCALE_UP = "autoscaler will not scale up"
    NODE_LEFT_OUT = "node left out"
    SCALING_UP = "waiting for a node"
    UNSCHEDULABLE = "unschedulable"
    PREPARING = "dataset preparation running"
    STARTING = "starting"


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    reason: str  # one plain sentence
    evidence: str  # the event, condition or object it came from
    next_step: str


@dataclass(frozen=True)
class ClusterView:
    """What the classifier reads, each as the Kubernetes API returns it."""

    job: str
    namespace: str
    cloud: str | None = None  # "aws", "azure", "gcp"; None: read from the nodes' providerID
    jobset: dict[str, Any] | None = None  # the JobSet (or PyTorchJob) object
    pods: list[dict[str, Any]] = field(default_factory=list)  # every pod of the namespace
    events: list[dict[str, Any]] = field(default_factory=list)  # the namespace's events
    workloads: list[dict[str, Any]] = field(default_factory=list)  # Kueue Workloads there
    nodes: list[dict[str, Any]] = field(default_factory=list)
    autoscaler_status: dict[str, Any] | None = None  # the ConfigMap, if the cluster has one
    autoscaler_events: list[dict[str, Any]] = field(default_factory=list)  # on that ConfigMap
    autoscaler_log: str = ""  # the autoscaler's recent log where it runs as a pod (EKS)


@dataclass(frozen=True)
class Event:
    """core/v1 and events.k8s.io/v1 Events, read the same way."""

    reason: str
    message: str
    kind: str
    name: str
    time: str
    source: str

    @classmethod
    def of(cls, raw: dict[str, Any]) -> "Event":
        target = raw.get("involvedObject") or raw.get("regarding") or {}
        source = (raw.get("source") or {}).get("component") or raw.get("reportingComponent") \
            or raw.get("reportingController") or ""
        time = (raw.get("lastTimestamp") or (raw.get("series") or {}).get("lastObservedTime")
                or raw.get("deprecatedLastTimestamp") or raw.get("eventTime")
                or raw.get("firstTimestamp") or raw.get("metadata", {}).get("creationTimestamp")
                or "")
        return cls(reason=raw.get("reason") or "", message=raw.get("message") or raw.get("note")
                   or "", kind=target.get("kind") or "", name=target.get("name") or "",
                   time=str(time), source=source)

    def line(self) -> str:
        when = f", {self.time}" if self.time else ""
        by = f" ({self.source}{when})" if self.source or when else ""
        return f"{self.kind}/{self.name} {self.reason}{by}: {self.message}"


# ---- reading the objects ---------------------------------------------------------------------

def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def _name(obj: dict[str, Any]) -> str:
    return obj.get("metadata", {}).get("name", "")


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c.get("type", ""): c for c in (obj.get("status") or {}).get("conditions") or []}


def _selected(pods: list[dict[str, Any]], selector: dict[str, str]) -> list[dict[str, Any]]:
    return [p for p in pods if all(_labels(p).get(k) == v for k, v in selector.items())]


def _unscheduled(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The PodScheduled=False condition of a Pending pod, or None if it has a node."""
    scheduled = _conditions(pod).get("PodScheduled")
    if (pod.get("status") or {}).get("phase") == "Pending" and scheduled \
            and scheduled.get("status") == "False":
        return scheduled
    return None


def _waiting(pod: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(container, state.waiting) of each container, init containers first, that waits."""
    status = pod.get("status") or {}
    containers = [*(status.get("initContainerStatuses") or []),
                  *(status.get("containerStatuses") or [])]
    return [(c.get("name", ""), c["state"]["waiting"]) for c in containers
            if (c.get("state") or {}).get("waiting")]


def _is_spot_label(key: str, value: str) -> bool:
    return key in SPOT_LABELS and value.lower() == SPOT_LABELS[key].lower()


def _on_spot(pod: dict[str, Any]) -> bool:
    """The pod is meant for a spot pool: its nodeSelector names a spot label (what Kueue injects
    on admission), or, without one, every required node affinity term does. Tolerations say
    nothing: a GKE spot pool has no spot taint, and a pod that may use both pools (the on-demand
    fallback) tolerates the spot taint even when it is admitted to on-demand."""
    spec = pod.get("spec") or {}
    selector = spec.get("nodeSelector") or {}
    if any(key in SPOT_LABELS for key in selector):
        return any(_is_spot_label(k, str(v)) for k, v in selector.items())
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    return bool(terms) and all(
        any(e.get("operator") == "In" and any(_is_spot_label(e.get("key", ""), v)
                                               for v in e.get("values") or [])
            for e in term.get("matchExpressions") or [])
        for term in terms)


def _cloud(view: ClusterView) -> str | None:
    """From the nodes' providerID (aws://, azure://, gce://), unless the caller said."""
    if view.cloud:
        return view.cloud
    prefixes = {"aws": "aws", "azure": "azure", "gce": "gcp"}
    for node in view.nodes:
        scheme = ((node.get("spec") or {}).get("providerID") or "").split("://")[0]
        if scheme in prefixes:
            return prefixes[scheme]
    return None


def autoscaler_node_groups(status_map: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The node groups of the autoscaler's status ConfigMap (YAML since CA 1.30; the older
    free-text status yields none here, its events still speak)."""
    if not status_map:
        return []
    try:
        status = yaml.safe_load((status_map.get("data") or {}).get("status") or "")
    except yaml.YAMLError:
        return []
    return list(status.get("nodeGroups") or []) if isinstance(status, dict) else []


def _backoffs(status_map: dict[str, Any] | None) -> list[str]:
    """Node groups in scale-up backoff in the autoscaler's status ConfigMap."""
    lines = []
    for group in autoscaler_node_groups(status_map):
        scale_up = group.get("scaleUp") or {}
        if scale_up.get("status") == "Backoff":
            info = scale_up.get("backoffInfo") or {}
            lines.append(f"ConfigMap/kube-system/{AUTOSCALER_STATUS} node group {group.get('name')}"
                         f" scale-up Backoff: {info.get('errorCode', '')}: "
                         f"{info.get('errorMessage', '')}")
    return lines


# ---- advice ----------------------------------------------------------------------------------

# EC2 Spot quotas by instance family (EC2 user guide, "Spot Instance quotas": "All P4, P3 and
# P2 Spot Instance Requests", "All P5 Spot Instance Requests"); their codes are not in that guide,
# so the step looks the code up by name. On-demand P instances share one quota, "Running
# On-Demand P instances", L-417A185B (EC2 user guide, "On-Demand Instance quotas").
AWS_SPOT_P_QUOTAS = {"p5": "All P5 Spot Instance Requests",
                     "p4": "All P4, P3 and P2 Spot Instance Requests",
                     "p3": "All P4, P3 and P2 Spot Instance Requests",
                     "p2": "All P4, P3 and P2 Spot Instance Requests"}
AWS_ON_DEMAND_P_QUOTA = ("Running On-Demand P instances", "L-417A185B")
_INSTANCE_TYPE = re.compile(r"\b(p\d)[a-z-]*\.\d*x?large\b", re.IGNORECASE)
_GPU_FAMILY = {"h100": "p5", "h200": "p5", "a100": "p4", "v100": "p3", "k80": "p2"}


def aws_family(texts: list[str]) -> str | None:
    """The P family ("p4", "p5") named by an instance type (p4d.24xlarge) or an accelerator label
    value (k8s.amazonaws.com/accelerator=nvidia-a100) in any of `texts`."""
    for text in texts:
        if m := _INSTANCE_TYPE.search(text):
            return m.group(1).lower()
    for text in texts:
        for gpu, family in _GPU_FAMILY.items():
            if f"nvidia-{gpu}" in text.lower():
                return family
    return None


def gang_vcpus(family: str | None, nodes: int | None) -> int | None:
    """The vCPUs the whole gang needs: its nodes times the vCPUs of the P family's machines in
    infra/catalog.py (p4: 96, p5: 192), when every machine of the family has the same count;
    None when the family, the count or the node count is unknown."""
    from infra.catalog import MACHINES

    counts = {m.vcpus for m in MACHINES if family and m.cloud.value == "aws"
              and m.name.split(".")[0].rstrip("denx") == family}
    return counts.pop() * nodes if nodes and len(counts) == 1 else None


def quota_step(cloud: str | None, spot: bool, family: str | None = None,
               vcpus: int | None = None) -> str:
    """Where each cloud takes a quota request (docs/aws.md, azure.md, gcp.md say how much);
    `vcpus`: the gang's need, when the machine and node count are known."""
    if cloud == "aws":
        if not spot:
            name, code = AWS_ON_DEMAND_P_QUOTA
            return (f"request quota \"{name}\": aws service-quotas request-service-quota-increase "
                    f"--service-code ec2 --quota-code {code} --desired-value "
                    f"{vcpus or '<vCPUs for job.nodes nodes>'} "
                    "(https://console.aws.amazon.com/servicequotas/home/services/ec2/quotas)")
        names = ([AWS_SPOT_P_QUOTAS[family]] if family in AWS_SPOT_P_QUOTAS
                 else sorted(set(AWS_SPOT_P_QUOTAS.values())))
        name = " or ".join(f"\"{n}\"" for n in names)
        lookup = names[0] if len(names) == 1 else "<name>"
        return (f"request quota {name}: its code is "
                "aws service-quotas list-service-quotas --service-code ec2 --query "
                f"\"Quotas[?QuotaName=='{lookup}'].QuotaCode\", then aws service-quotas "
                "request-service-quota-increase --service-code ec2 --quota-code <code> "
                f"--desired-value {vcpus or '<vCPUs for job.nodes nodes>'} "
                "(https://console.aws.amazon.com/servicequotas/home/services/ec2/quotas)")
    if cloud == "azure":
        return ("request quota: az vm list-usage --location <region> -o table shows the family; "
                "ask in the portal under Quotas > Compute (https://portal.azure.com/#view/"
                "Microsoft_Azure_Capacity/QuotaMenuBlade/~/myQuotas)")
    if cloud == "gcp":
        kind = "PREEMPTIBLE_NVIDIA_*_GPUS" if spot else "NVIDIA_*_GPUS"
        return (f"request quota: {kind} in the region and GPUS_ALL_REGIONS "
                "(gcloud compute regions describe <region>; "
                "https://console.cloud.google.com/iam-admin/quotas)")
    return "request GPU quota for the node pool's machine type in the cloud's quota console"


def reservation_step() -> str:
    """An EC2 reservation that is full or not active yet (aws.capacityReservation)."""
    return ("the capacity reservation (aws.capacityReservation.id) is full or not active yet: see "
            "its state and start time with aws ec2 describe-capacity-reservations "
            "--capacity-reservation-ids <id> --query \"CapacityReservations[].[State,StartDate,"
            "EndDate,AvailableInstanceCount]\"; a Capacity Block launches nothing before its "
            "StartDate")


def azure_provisioning_step(view: ClusterView, spot: bool) -> str:
    """Azure's code behind the autoscaler's "provisioning-state-failed" is only in the node
    resource group's activity log; its name is in every AKS node's providerID."""
    group = "<node resource group>"
    for node in view.nodes:
        m = re.search(r"/resourceGroups/([^/]+)/", (node.get("spec") or {}).get("providerID") or "",
                      re.IGNORECASE)
        if m:
            group = m.group(1)
            break
    return (f"the exact code (AllocationFailed, ZonalAllocationFailed, SkuNotAvailable, a quota): "
            f"az monitor activity-log list -g {group} --status Failed --offset 1h; "
            + capacity_step(spot))


def capacity_step(spot: bool) -> str:
    if spot:
        return ("the spot pool is out of stock: wait, or run on on-demand capacity "
                "(pulumi config set --path job.pool onDemand, then pulumi up), or pick another "
                "zone (gpuZones)")
    return ("the zone has no such machine now: wait, pick another zone (gpuZones), or use a "
            "reservation (gpuPools.onDemand)")


# ---- the answers, in precedence order ----------------------------------------------------------

@dataclass(frozen=True)
class _Facts:
    view: ClusterView
    names: JobNames
    trainers: list[dict[str, Any]]
    preparers: list[dict[str, Any]]
    pending: list[dict[str, Any]]  # our pods with no node yet
    events: list[Event]  # events about our pending pods, oldest first
    all_events: list[Event]  # every event of the namespace, oldest first
    spot: bool
    cloud: str | None


def _facts(view: ClusterView) -> _Facts:
    names = JobNames(job=view.job, namespace=view.namespace, service_account="")
    trainers = _selected(view.pods, names.selector)
    preparers = _selected(view.pods, names.prepare_selector)
    pending = [p for p in [*trainers, *preparers] if _unscheduled(p)]
    pending_names = {_name(p) for p in pending}
    events = sorted((Event.of(e) for e in view.events), key=lambda e: e.time)
    ours = [e for e in events if e.kind == "Pod" and e.name in pending_names]
    return _Facts(view, names, trainers, preparers, pending, ours, events,
                  spot=any(_on_spot(p) for p in trainers), cloud=_cloud(view))


def _finished(f: _Facts) -> Verdict | None:
    if f.view.jobset is None:
        return Verdict(Kind.NOT_FOUND, f"there is no job {f.view.job} in namespace "
                       f"{f.view.namespace}", "no JobSet or PyTorchJob by that name",
                       "check the names in `pulumi stack output job_name`, or run pulumi up")
    conditions = _conditions(f.view.jobset)
    for kind, types in ((Kind.COMPLETED, ("Completed", "Succeeded")), (Kind.FAILED, ("Failed",))):
        for t in types:
            c = conditions.get(t)
            if c and c.get("status") == "True":
                step = ("nothing to wait for: the weights are in checkpoint_uri" if kind == Kind.COMPLETED
                        else f"read the log: kubectl -n {f.view.namespace} logs -l "
                             f"jobset.sigs.k8s.io/jobset-name={f.view.job} --tail=100")
                return Verdict(kind, f"the job has {kind.value}",
                               f"{f.view.jobset.get('kind', 'JobSet')}/{f.view.job} {t}=True "
                               f"({c.get('reason', '')}): {c.get('message', '')}", step)
    return None


def _running(f: _Facts) -> Verdict | None:
    running = [p for p in f.trainers if (p.get("status") or {}).get("phase") == "Running"]
    if running and len(running) == len(f.trainers) and not any(_waiting(p) for p in running):
        return Verdict(Kind.RUNNING, f"the job is running on {len(running)} pods",
                       ", ".join(f"Pod/{_name(p)} Running on {(p.get('spec') or {}).get('nodeName')}"
                                 for p in running),
                       "follow rank 0: the last watch command")
    return None


def _image_pull(f: _Facts) -> Verdict | None:
    for pod in [*f.preparers, *f.trainers]:
        for container, waiting in _waiting(pod):
            if waiting.get("reason") in IMAGE_PULL_REASONS:
                return Verdict(
                    Kind.IMAGE_PULL, "the nodes cannot pull the trainer image",
                    f"Pod/{_name(pod)} container {container} waiting "
                    f"{waiting.get('reason')}: {waiting.get('message', '')}",
                    "check job.image and that the nodes may read its registry "
                    f"(kubectl -n {f.view.namespace} describe pod {_name(pod)})")
    return None


def _owned_workload(f: _Facts) -> dict[str, Any] | None:
    kinds = {"JobSet", "PyTorchJob"}
    for wl in f.view.workloads:
        for owner in wl.get("metadata", {}).get("ownerReferences") or []:
            if owner.get("kind") in kinds and owner.get("name") == f.view.job:
                return wl
    return None


def _held(f: _Facts, wl: dict[str, Any]) -> Verdict | None:
    """A deactivated Workload (spec.active false; Evicted reason Deactivated...): Kueue never
    admits it again by itself."""
    evicted = _conditions(wl).get("Evicted") or {}
    deactivated = (evicted.get("status") == "True"
                   and str(evicted.get("reason", "")).startswith(EVICTED_DEACTIVATED))
    if (wl.get("spec") or {}).get("active", True) is not False and not deactivated:
        return None
    name = _name(wl)
    evidence = (f"Workload/{name} spec.active=false"
                + (f", Evicted=True ({evicted.get('reason', '')}): {evicted.get('message', '')}"
                   if deactivated else ""))
    found = _refusal(f, _refusal_texts(f, after_eviction=True))
    if found:
        evidence += f"; last refusal: {found[0]}"
    return Verdict(Kind.HELD, "held: Kueue deactivated the job's Workload (it gave up requeuing "
                   "it) and will not admit it again by itself", evidence,
                   f"after fixing the cause, reactivate it: kubectl -n {f.view.namespace} patch "
                   f"workload {name} --type merge -p '{{\"spec\":{{\"active\":true}}}}'")


def _requeued(f: _Facts, wl: dict[str, Any]) -> Verdict | None:
    """Evicted for PodsReadyTimeout and waiting out the requeue backoff: no pods exist now, so
    the reason is read from what the autoscaler said about the gang's earlier pods."""
    conditions = _conditions(wl)
    evicted, requeued = conditions.get("Evicted") or {}, conditions.get("Requeued") or {}
    state = (wl.get("status") or {}).get("requeueState") or {}
    if not (evicted.get("status") == "True"
            and evicted.get("reason") == EVICTED_PODS_READY_TIMEOUT
            and requeued.get("status") != "True"):
        return None
    when = state.get("requeueAt") or "after its backoff"
    count = state.get("count")
    evidence = (f"Workload/{_name(wl)} Evicted=True ({EVICTED_PODS_READY_TIMEOUT}): "
                f"{evicted.get('message', '')}; requeueState requeueAt={when}"
                + (f" count={count}" if count is not None else ""))
    found = _refusal(f, _refusal_texts(f, after_eviction=True))
    why, step = "the autoscaler's last word about its pods is below", (
        f"nothing to do: Kueue tries again at {when}; kubectl -n {f.view.namespace} describe "
        f"workload {_name(wl)}")
    if found:
        line, m = found
        why = ("no quota" if m.refusal == Refusal.NO_QUOTA else "no capacity") + f": {line}"
        step = _refusal_step(f, m, line)
        evidence += f"; last refusal: {line}"
    return Verdict(Kind.REQUEUED, f"requeued: the gang's pods were not all ready within "
                   f"waitForPodsReady's timeout, so Kueue evicted it; it is requeued at {when}"
                   + (f" (requeue {count})" if count is not None else "") + f"; why: {why}",
                   evidence, step)


def _admission(f: _Facts) -> Verdict | None:
    wl = _owned_workload(f)
    if wl is None:
        return None
    held = _held(f, wl) or _requeued(f, wl)
    if held is not None:
        return held
    conditions = _conditions(wl)
    reserved, admitted = conditions.get("QuotaReserved"), conditions.get("Admitted")
    if admitted and admitted.get("status") == "True":
        return None
    where = f"Workload/{_name(wl)}"
    if reserved is None or reserved.get("status") != "True":
        c = reserved or {}
        message = c.get("message", "not yet considered by Kueue")
        if c.get("reason") == "ExceedsMaxQuota" or "maximum capacity" in message:
            step = ("the ClusterQueue's quota is smaller than the gang: raise its nominalQuota "
                    "for that flavor, or lower job.nodes")
        else:
            step = ("Kueue admits the whole gang when the quota frees up; see who holds it: "
                    "kubectl get clusterqueue -o wide; kubectl get workloads -A")
        return Verdict(Kind.ADMISSION, "waiting for admission: Kueue has not reserved quota "
                       "for the whole gang", f"{where} QuotaReserved=False "
                       f"({c.get('reason', '')}): {message}", step)
    c = admitted or {}
    return Verdict(Kind.ADMISSION, "waiting for admission: quota is reserved, admission checks "
                   "are not yet satisfied", f"{where} Admitted=False ({c.get('reason', '')}): "
                   f"{c.get('message', '')}",
                   f"kubectl -n {f.view.namespace} describe workload {_name(wl)}")


def _suspended(f: _Facts) -> Verdict | None:
    if (f.view.jobset or {}).get("spec", {}).get("suspend"):
        return Verdict(Kind.SUSPENDED, "the job is suspended, so it has no pods",
                       f"{(f.view.jobset or {}).get('kind', 'JobSet')}/{f.view.job} spec.suspend=true",
                       "pulumi config set --path job.suspend false, then pulumi up")
    return None


def _refusal_texts(f: _Facts, after_eviction: bool = False) -> list[str]:
    """Every line in which the autoscaler reports a cloud's refusal, newest last. With pods
    pending: the events about those pods. After Kueue evicted the gang (no pods now): the events
    about any pod of the job (named <job>-...), since they outlive the deleted pods."""
    if after_eviction:
        events = [e for e in f.all_events if e.kind == "Pod" and e.name.startswith(f"{f.view.job}-")]
    elif f.pending:
        events = f.events
    else:
        return []
    lines = [e.line() for e in events if e.reason in SCALE_UP_FAILED_EVENTS]
    lines += [Event.of(e).line() for e in sorted(f.view.autoscaler_events,
                                                 key=lambda e: Event.of(e).time)
              if Event.of(e).reason in SCALE_UP_FAILED_EVENTS]
    lines += _backoffs(f.view.autoscaler_status)
    lines += [line for line in f.view.autoscaler_log.splitlines() if "scaling failed" in line]
    return lines


def _refusal(f: _Facts, texts: list[str]) -> tuple[str, cloud_errors.CloudPattern] | None:
    """The newest line a cloud pattern recognises."""
    for line in reversed(texts):
        if m := cloud_errors.match(line):
            return line, m
    return None


def _gang_nodes(f: _Facts) -> int | None:
    """The gang's node count: the JobSet's parallelism, else its trainer pods."""
    for replicated in ((f.view.jobset or {}).get("spec") or {}).get("replicatedJobs") or []:
        count = ((replicated.get("template") or {}).get("spec") or {}).get("parallelism")
        if isinstance(count, int):
            return count
    return len(f.trainers) or None


def _placement_texts(f: _Facts) -> list[str]:
    out = []
    for pod in f.trainers:
        spec = pod.get("spec") or {}
        out += [f"{k}={v}" for k, v in (spec.get("nodeSelector") or {}).items()]
        out.append(str(spec.get("affinity") or ""))
    return out


def _refusal_step(f: _Facts, m: cloud_errors.CloudPattern, line: str) -> str:
    if m.refusal == Refusal.NO_QUOTA:
        family = aws_family([line, *_placement_texts(f)])
        return quota_step(f.cloud or m.cloud, f.spot, family, gang_vcpus(family, _gang_nodes(f)))
    if m.refusal == Refusal.NO_RESERVATION:
        return reservation_step()
    if m.likely and m.cloud == "azure":
        return azure_provisioning_step(f.view, f.spot)
    return capacity_step(f.spot)


def _cloud_refusal(f: _Facts) -> Verdict | None:
    texts = _refusal_texts(f)
    found = _refusal(f, texts)
    if found:
        line, m = found
        spot = "spot" if f.spot else "on-demand"
        step = _refusal_step(f, m, line)
        if m.refusal == Refusal.NO_QUOTA:
            return Verdict(Kind.NO_QUOTA, f"no quota: the cloud refused a new {spot} GPU node "
                           "because the account's quota is used up", line, step)
        if m.refusal == Refusal.NO_RESERVATION:
            return Verdict(Kind.NO_CAPACITY, "no capacity in the reservation: the capacity "
                           "reservation the GPU pool launches into is full or not active yet",
                           line, step)
        if m.likely:
            return Verdict(Kind.NO_CAPACITY, f"no capacity (likely a stock-out): the cloud "
                           f"failed to create the {spot} GPU node", line, step)
        return Verdict(Kind.NO_CAPACITY, f"no capacity: the cloud has no {spot} GPU machine "
                       "to give in that zone now (a stock-out)", line, step)
    backoff = [e for e in f.events if e.reason == "NotTriggerScaleUp"
               and "in backoff after failed scale-up" in e.message]
    if texts or backoff:
        line = texts[-1] if texts else backoff[-1].line()
        where = ("aws autoscaling describe-scaling-activities --auto-scaling-group-name <group>"
                 if f.cloud == "aws" else "the node group's activity log in the cloud console")
        return Verdict(Kind.SCALE_UP_FAILED, "the autoscaler tried to add a node and the cloud "
                       "refused; it retries after a backoff", line,
                       f"kubectl -n kube-system describe configmap {AUTOSCALER_STATUS}; the "
                       f"cloud's reason is in {where}")
    return None


def _latest_autoscaler_event(f: _Facts) -> Event | None:
    said = [e for e in f.events if e.reason in ("TriggeredScaleUp", "NotTriggerScaleUp")]
    return said[-1] if said else None


def _no_scale_up(f: _Facts) -> Verdict | None:
    latest = _latest_autoscaler_event(f)
    if latest is None or latest.reason != "NotTriggerScaleUp":
        return None
    if "max node group size reached" in latest.message:
        pool = "gpuPools.spot" if f.spot else "gpuPools.onDemand"
        return Verdict(Kind.NO_SCALE_UP, "the autoscaler will not add a node: the GPU pool is "
                       "at its maximum size", latest.line(),
                       f"raise {pool}.maxNodes to at least job.nodes (pulumi config set --path "
                       f"{pool}.maxNodes <n>, then pulumi up), or free a node")
    if "max cluster" in latest.message or "max total nodes" in latest.message:
        return Verdict(Kind.NO_SCALE_UP, "the autoscaler will not add a node: a cluster-wide "
                       "limit is reached", latest.line(),
                       "raise the cluster autoscaler's resource limits or max total nodes")
    return Verdict(Kind.NO_SCALE_UP, "the autoscaler will not add a node: no node pool it may "
                   "grow fits the pod", latest.line(),
                   "compare the pod's GPU request, node selector and tolerations with the pool "
                   f"(kubectl -n {f.view.namespace} describe pod "
                   f"{f.pending[0]['metadata']['name'] if f.pending else '<pod>'})")


def _node_left_out(f: _Facts) -> Verdict | None:
    if not f.pending:
        return None
    for node in f.view.nodes:
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("key") == UNHEALTHY_TAINT:
                return Verdict(
                    Kind.NODE_LEFT_OUT, f"node {_name(node)} was left out by the health gate; "
                    "the gang waits for a healthy node in its place",
                    f"Node/{_name(node)} taint {UNHEALTHY_TAINT}={taint.get('value', '')}:"
                    f"{taint.get('effect', '')}",
                    "it still counts toward the pool's maxNodes: the autoscaler removes it once "
                    "idle (scale-down-unneeded-time, 10 minutes; not below the pool's minNodes) "
                    "and adds a healthy node; sooner, or at minNodes: raise the pool's maxNodes "
                    "by one; to reuse it after a repair: kubectl taint "
                    f"nodes {_name(node)} {UNHEALTHY_TAINT}-")
    return None


def _scaling_up(f: _Facts) -> Verdict | None:
    latest = _latest_autoscaler_event(f)
    if latest is None or latest.reason != "TriggeredScaleUp":
        return None
    spot = "spot" if f.spot else "on-demand"
    return Verdict(Kind.SCALING_UP, f"waiting for a new {spot} GPU node: the autoscaler has "
                   "asked the cloud for it", latest.line(),
                   "a GPU node takes 5-15 minutes to join and load its drivers; run this "
                   "again: a refusal by the cloud shows here")


def _unschedulable(f: _Facts) -> Verdict | None:
    if not f.pending:
        return None
    pod = f.pending[0]
    condition = _unscheduled(pod) or {}
    message = condition.get("message", "")
    scheduling = [e for e in f.events if e.reason == "FailedScheduling" and e.name == _name(pod)]
    evidence = (scheduling[-1].line() if scheduling else
                f"Pod/{_name(pod)} PodScheduled=False ({condition.get('reason', '')}): {message}")
    if "nvidia.com/gpu" in message or any("nvidia.com/gpu" in e.message for e in scheduling):
        return Verdict(Kind.UNSCHEDULABLE, "no node has a free GPU yet and the autoscaler has "
                       "not answered yet", evidence,
                       "wait a minute and run this again; the autoscaler reacts within seconds")
    return Verdict(Kind.UNSCHEDULABLE, "the pod cannot be placed on any node", evidence,
                   f"kubectl -n {f.view.namespace} describe pod {_name(pod)}")


def _preparing(f: _Facts) -> Verdict | None:
    """The trainer pods run, but their main container waits for layout.json first
    (workloads/prepare.py waiting_first) while a preparation pod has not finished."""
    running = [p for p in f.trainers if (p.get("status") or {}).get("phase") == "Running"]
    # Running only: a Pending preparation pod (no node: quota, a stock-out) falls through to
    # the cloud's refusal and the autoscaler's answer.
    unfinished = [p for p in f.preparers if (p.get("status") or {}).get("phase") == "Running"]
    if not running or len(running) < len(f.trainers) or not unfinished:
        return None
    prep = ", ".join(f"Pod/{_name(p)} {(p.get('status') or {}).get('phase')}" for p in unfinished)
    return Verdict(Kind.PREPARING, "the dataset preparation is still running; the trainer pods "
                   "hold their nodes and start training when it has written layout.json",
                   f"{prep}; {len(running)} trainer pods Running, waiting for it",
                   f"follow it: {prepare_logs_command(f.names)}")


def _starting(f: _Facts) -> Verdict:
    for pod in f.trainers:
        for container, waiting in _waiting(pod):
            return Verdict(Kind.STARTING, "the pods are starting", f"Pod/{_name(pod)} container "
                           f"{container} waiting {waiting.get('reason', '')}",
                           f"kubectl -n {f.view.namespace} get pods -w")
    kind = (f.view.jobset or {}).get("kind", "JobSet")
    return Verdict(Kind.STARTING, "the job exists and its pods are being created",
                   f"{kind}/{f.view.job}: {len(f.trainers)} trainer pods",
                   f"kubectl -n {f.view.namespace} get pods -w")


_RULES: tuple[Callable[[_Facts], Verdict | None], ...] = (
    # The gate's taint before the autoscaler's "max node group size reached": a tainted node
    # still counts toward the pool's size, so the pool looks full while it waits for a
    # healthy node in its place. A preparation before "running": the trainer pods run, waiting
    # for its layout in their main container.
    _finished, _preparing, _running, _image_pull, _admission, _suspended, _cloud_refusal,
    _node_left_out, _no_scale_up, _scaling_up, _unschedulable,
)


def explain(view: ClusterView) -> Verdict:
    """The first answer that applies, in the precedence of Kind."""
    facts = _facts(view)
    for rule in _RULES:
        verdict = rule(facts)
        if verdict is not None:
            return verdict
    return _starting(facts)
