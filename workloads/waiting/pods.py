"""The job's own Kubernetes objects as evidence: the JobSet's conditions and suspend flag, its
pods' phases, containers and PodScheduled condition, the scheduler's FailedScheduling events and
the nodes (the health gate's taint, the providerID that names the cloud, the spot labels a pod is
placed by); it answers finished, running, image pull failing, suspended, node left out,
unschedulable, preparing and starting, and leaves Kueue and the autoscaler to their modules."""

from __future__ import annotations

from typing import Any

from trainer.node_taint import LEGACY_TAINT_KEYS, TAINT_KEY
from workloads.waiting.verdict import Kind, Verdict
from workloads.waiting.view import ClusterView, Facts, conditions_of, name_of
from workloads.watch import prepare_logs_command

# Where the words come from:
# - The scheduler: `FailedScheduling` and the pod's PodScheduled=False/Unschedulable condition,
#   e.g. "0/3 nodes are available: 3 Insufficient nvidia.com/gpu." and "node(s) had untolerated
#   taint {key: value}" (kube-scheduler's NodeResourcesFit and TaintToleration plugins).
# - The kubelet: a container waiting with reason ErrImagePull / ImagePullBackOff.

# The taint the fabric and GPU health gate puts on a node it leaves out (trainer/node_taint.py).
UNHEALTHY_TAINT = TAINT_KEY

IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName"})

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


def unscheduled(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The PodScheduled=False condition of a Pending pod, or None if it has a node."""
    scheduled = conditions_of(pod).get("PodScheduled")
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


def on_spot(pod: dict[str, Any]) -> bool:
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


def cloud_of(view: ClusterView) -> str | None:
    """From the nodes' providerID (aws://, azure://, gce://), unless the caller said."""
    if view.cloud:
        return view.cloud
    prefixes = {"aws": "aws", "azure": "azure", "gce": "gcp"}
    for node in view.nodes:
        scheme = ((node.get("spec") or {}).get("providerID") or "").split("://")[0]
        if scheme in prefixes:
            return prefixes[scheme]
    return None


def finished(f: Facts) -> Verdict | None:
    if f.view.jobset is None:
        return Verdict(Kind.NOT_FOUND, f"there is no job {f.view.job} in namespace "
                       f"{f.view.namespace}", "no JobSet or PyTorchJob by that name",
                       "check the names in `pulumi stack output job_name`, or run pulumi up")
    conditions = conditions_of(f.view.jobset)
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


def all_running(f: Facts) -> Verdict | None:
    running = [p for p in f.trainers if (p.get("status") or {}).get("phase") == "Running"]
    if running and len(running) == len(f.trainers) and not any(_waiting(p) for p in running):
        return Verdict(Kind.RUNNING, f"the job is running on {len(running)} pods",
                       ", ".join(f"Pod/{name_of(p)} Running on {(p.get('spec') or {}).get('nodeName')}"
                                 for p in running),
                       "follow rank 0: the last watch command")
    return None


def image_pull(f: Facts) -> Verdict | None:
    for pod in [*f.preparers, *f.trainers]:
        for container, waiting in _waiting(pod):
            if waiting.get("reason") in IMAGE_PULL_REASONS:
                return Verdict(
                    Kind.IMAGE_PULL, "the nodes cannot pull the trainer image",
                    f"Pod/{name_of(pod)} container {container} waiting "
                    f"{waiting.get('reason')}: {waiting.get('message', '')}",
                    "check job.image and that the nodes may read its registry "
                    f"(kubectl -n {f.view.namespace} describe pod {name_of(pod)})")
    return None


def suspended(f: Facts) -> Verdict | None:
    if (f.view.jobset or {}).get("spec", {}).get("suspend"):
        return Verdict(Kind.SUSPENDED, "the job is suspended, so it has no pods",
                       f"{(f.view.jobset or {}).get('kind', 'JobSet')}/{f.view.job} spec.suspend=true",
                       "pulumi config set --path job.suspend false, then pulumi up")
    return None


def node_left_out(f: Facts) -> Verdict | None:
    if not f.pending:
        return None
    for node in f.view.nodes:
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("key") in LEGACY_TAINT_KEYS:
                key = taint["key"]
                return Verdict(
                    Kind.NODE_LEFT_OUT, f"node {name_of(node)} carries {key}, the health gate's "
                    "taint before 2026-11: the autoscaler copies it into the pool's template and "
                    "may add no node for the gang until it is gone",
                    f"Node/{name_of(node)} taint {key}={taint.get('value', '')}:"
                    f"{taint.get('effect', '')}",
                    f"kubectl taint nodes {name_of(node)} {key}- (once repaired), or kubectl "
                    f"delete node {name_of(node)} to have the pool replace it")
            if taint.get("key") == UNHEALTHY_TAINT:
                return Verdict(
                    Kind.NODE_LEFT_OUT, f"node {name_of(node)} was left out by the health gate; "
                    "the gang waits for a healthy node in its place",
                    f"Node/{name_of(node)} taint {UNHEALTHY_TAINT}={taint.get('value', '')}:"
                    f"{taint.get('effect', '')}",
                    "it still counts toward the pool's maxNodes: the autoscaler removes it once "
                    "idle (scale-down-unneeded-time, 10 minutes; not below the pool's minNodes) "
                    "and adds a healthy node; sooner, or at minNodes: raise the pool's maxNodes "
                    "by one; to reuse it after a repair: kubectl taint "
                    f"nodes {name_of(node)} {UNHEALTHY_TAINT}-")
    return None


def unschedulable(f: Facts) -> Verdict | None:
    if not f.pending:
        return None
    pod = f.pending[0]
    condition = unscheduled(pod) or {}
    message = condition.get("message", "")
    scheduling = [e for e in f.events if e.reason == "FailedScheduling" and e.name == name_of(pod)]
    evidence = (scheduling[-1].line() if scheduling else
                f"Pod/{name_of(pod)} PodScheduled=False ({condition.get('reason', '')}): {message}")
    if "nvidia.com/gpu" in message or any("nvidia.com/gpu" in e.message for e in scheduling):
        return Verdict(Kind.UNSCHEDULABLE, "no node has a free GPU yet and the autoscaler has "
                       "not answered yet", evidence,
                       "wait a minute and run this again; the autoscaler reacts within seconds")
    return Verdict(Kind.UNSCHEDULABLE, "the pod cannot be placed on any node", evidence,
                   f"kubectl -n {f.view.namespace} describe pod {name_of(pod)}")


def preparing(f: Facts) -> Verdict | None:
    """The trainer pods run, but their main container waits for layout.json first
    (workloads/prepare.py waiting_first) while a preparation pod has not finished."""
    running = [p for p in f.trainers if (p.get("status") or {}).get("phase") == "Running"]
    # Running only: a Pending preparation pod (no node: quota, a stock-out) falls through to
    # the cloud's refusal and the autoscaler's answer.
    unfinished = [p for p in f.preparers if (p.get("status") or {}).get("phase") == "Running"]
    if not running or len(running) < len(f.trainers) or not unfinished:
        return None
    prep = ", ".join(f"Pod/{name_of(p)} {(p.get('status') or {}).get('phase')}" for p in unfinished)
    return Verdict(Kind.PREPARING, "the dataset preparation is still running; the trainer pods "
                   "hold their nodes and start training when it has written layout.json",
                   f"{prep}; {len(running)} trainer pods Running, waiting for it",
                   f"follow it: {prepare_logs_command(f.names)}")


def starting(f: Facts) -> Verdict:
    for pod in f.trainers:
        for container, waiting in _waiting(pod):
            return Verdict(Kind.STARTING, "the pods are starting", f"Pod/{name_of(pod)} container "
                           f"{container} waiting {waiting.get('reason', '')}",
                           f"kubectl -n {f.view.namespace} get pods -w")
    kind = (f.view.jobset or {}).get("kind", "JobSet")
    return Verdict(Kind.STARTING, "the job exists and its pods are being created",
                   f"{kind}/{f.view.job}: {len(f.trainers)} trainer pods",
                   f"kubectl -n {f.view.namespace} get pods -w")
