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
_SPOT_WORDS = re.compile(r"spot", re.IGNORECASE)


class Kind(str, Enum):
    """The answers, in the order they are tried (the first that applies wins)."""

    NOT_FOUND = "not found"
    COMPLETED = "completed"
    FAILED = "failed"
    RUNNING = "running"
    IMAGE_PULL = "image pull failing"
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


def _on_spot(pod: dict[str, Any]) -> bool:
    """The pod tolerates a spot taint (EKS capacityType=SPOT, AKS scalesetpriority=spot, GKE
    gke-spot): it is meant for the spot pool."""
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        if _SPOT_WORDS.search(f"{t.get('key', '')}={t.get('value', '')}"):
            return True
    return False


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


def _backoffs(status_map: dict[str, Any] | None) -> list[str]:
    """Node groups in scale-up backoff in the autoscaler's status ConfigMap (YAML since CA 1.30;
    the older free-text status yields nothing here, its events still do)."""
    if not status_map:
        return []
    try:
        status = yaml.safe_load((status_map.get("data") or {}).get("status") or "")
    except yaml.YAMLError:
        return []
    groups = status.get("nodeGroups") or [] if isinstance(status, dict) else []
    lines = []
    for group in groups:
        scale_up = group.get("scaleUp") or {}
        if scale_up.get("status") == "Backoff":
            info = scale_up.get("backoffInfo") or {}
            lines.append(f"ConfigMap/kube-system/{AUTOSCALER_STATUS} node group {group.get('name')}"
                         f" scale-up Backoff: {info.get('errorCode', '')}: "
                         f"{info.get('errorMessage', '')}")
    return lines


# ---- advice ----------------------------------------------------------------------------------

def quota_step(cloud: str | None, spot: bool) -> str:
    """Where each cloud takes a quota request (the README's quota sections say how much)."""
    if cloud == "aws":
        code = "L-7212CCBC" if spot else "L-417A185B"  # All P Spot Instance Requests / Running On-Demand P instances
        return ("request quota: aws service-quotas request-service-quota-increase --service-code "
                f"ec2 --quota-code {code} --desired-value <vCPUs for job.nodes nodes> "
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
    return _Facts(view, names, trainers, preparers, pending, ours,
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


def _admission(f: _Facts) -> Verdict | None:
    wl = _owned_workload(f)
    if wl is None:
        return None
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


def _refusal_texts(f: _Facts) -> list[str]:
    """Every line in which the autoscaler reports a cloud's refusal, newest last."""
    if not f.pending:
        return []
    lines = [e.line() for e in f.events if e.reason in SCALE_UP_FAILED_EVENTS]
    lines += [Event.of(e).line() for e in sorted(f.view.autoscaler_events,
                                                 key=lambda e: Event.of(e).time)
              if Event.of(e).reason in SCALE_UP_FAILED_EVENTS]
    lines += _backoffs(f.view.autoscaler_status)
    lines += [line for line in f.view.autoscaler_log.splitlines() if "scaling failed" in line]
    return lines


def _cloud_refusal(f: _Facts) -> Verdict | None:
    texts = _refusal_texts(f)
    found = [(line, m) for line in reversed(texts) if (m := cloud_errors.match(line))]
    if found:
        line, m = found[0]
        spot = "spot" if f.spot else "on-demand"
        if m.refusal == Refusal.NO_QUOTA:
            return Verdict(Kind.NO_QUOTA, f"no quota: the cloud refused a new {spot} GPU node "
                           "because the account's quota is used up", line,
                           quota_step(f.cloud or m.cloud, f.spot))
        return Verdict(Kind.NO_CAPACITY, f"no capacity: the cloud has no {spot} GPU machine "
                       "to give in that zone now (a stock-out)", line, capacity_step(f.spot))
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
                    f"the autoscaler replaces it; to reuse it after a repair: kubectl taint "
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
    unfinished = [p for p in f.preparers
                  if (p.get("status") or {}).get("phase") in ("Pending", "Running")]
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
    _finished, _preparing, _running, _image_pull, _admission, _suspended, _cloud_refusal,
    _no_scale_up, _node_left_out, _scaling_up, _unschedulable,
)


def explain(view: ClusterView) -> Verdict:
    """The first answer that applies, in the precedence of Kind."""
    facts = _facts(view)
    for rule in _RULES:
        verdict = rule(facts)
        if verdict is not None:
            return verdict
    return _starting(facts)
