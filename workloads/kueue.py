"""Gang admission with Kueue (kubernetes-sigs/kueue): the JobSet waits, suspended, until its
whole gang fits a GPU pool's quota, and a gang that cannot get nodes is evicted and requeued
by Kueue instead of being failed by JobSet.

Why Kueue: it is the queue JobSet documents for all-or-nothing admission (Kueue
site/content/en/docs/tasks/run/jobsets.md), it installs the same way on EKS, AKS and GKE, and
its ResourceFlavors map one to one onto our spot and on-demand pools.

What it does here (Kueue v0.19.2, config.kueue.x-k8s.io/v1beta2 and kueue.x-k8s.io/v1beta2):
- one ResourceFlavor per GPU pool: nodeLabels = the pool's labels (Kueue injects them into the
  admitted pods as a nodeSelector), tolerations = the pool's taints;
- one ClusterQueue whose nominal GPU quota per flavor is the pool's max nodes x GPUs per node,
  so the gang is admitted only when all of it fits a pool (keps/349-all-or-nothing);
- a LocalQueue in the job's namespace; the JobSet (or PyTorchJob) carries
  `kueue.x-k8s.io/queue-name` and Kueue's webhook creates it suspended until admission
  (tasks/run/jobsets.md, tasks/run/kubeflow/pytorchjobs.md: Kueue sets runPolicy.suspend). Kueue
  deprecates its Kubeflow Trainer v1 integration (PyTorchJob; removal tentatively v0.20): a
  Kueue upgrade past v0.19 needs the JobSet kind;
- job.suspend true: the job is rendered without the queue label, so Kueue (with
  manageJobsWithoutQueueName false) leaves it alone and it stays suspended as asked; setting
  it back recreates the job with the label;
- waitForPodsReady: an admitted gang whose pods are not all Ready within `timeout` (or that
  loses readiness for `recoveryTimeout`, e.g. a spot node gone and not coming back) is
  suspended and requeued with exponential backoff. A suspension deletes the pods; JobSet counts
  no restart for it, so waiting never spends `maxRestarts`. The timeout is the slowest flavor
  machine's node join time (infra/catalog/machines.py node_ready_minutes: a p5, ND or A3 cold start
  plus the image pull), so a slow but healthy scale-up is not taken for missing capacity;
- no requeue bound by default: `backoffLimitCount` null means "the workloads will repeatedly
  and endless re-queueing" (apis/config/v1beta2/configuration_types.go RequeuingStrategy).
  A bound would be a bound on the job's life, not on one shortage: Kueue counts requeues in
  `.status.requeueState.count` and clears it only when the Workload is deactivated, so a
  resumed one starts afresh (pkg/controller/core/workload_controller.go, the inactive branch;
  site concepts/workload.md "Exponential Backoff Requeueing"), never when the gang becomes
  Ready, so spot reclaims over a multi-day run add up. job.spotShortage.maxWaitMinutes, when
  set, is turned into such a count; past it the Workload is deactivated (`.spec.active:
  false`), held with a reason, never Failed, and resumed by setting `spec.active` back to true;
- the requeue backoff is capped below the autoscalers' scale-down-unneeded-time (10 minutes:
  infra/aws/autoscaler.py; AKS's and GKE's defaults), so nodes that joined for one attempt are
  still there when the gang is admitted again;

No capacity fallback: job.spotShortage.policy onDemand is refused on every cloud
(infra/settings/rules.py SPOT_FALLBACK_REFUSED: Kueue would need the autoscaler to answer a
ProvisioningRequest for spot capacity only once spot nodes exist, which none here does), so the
ClusterQueue has one flavor, the job's pool, and is named after the job.

The LocalQueue's spec.clusterQueue is immutable (apis/kueue/v1beta2/localqueue_types.go, "field
is immutable") and it has no finalizer: pointing it at another ClusterQueue replaces it, delete
first, under the job's name (the JobSet's queue label).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.addon_versions import ADDON_VERSIONS, version_for
from infra.contract import GpuPool
from infra.kubernetes_release import minor_key, minor_of
from infra.settings.model.job import JobKind, PoolChoice, SpotShortage

ADDON = "kueue"
# Kueue's own install guide (site/content/en/docs/getting-started/installation.md, "Install by
# Helm"): helm install kueue oci://registry.k8s.io/kueue/charts/kueue --version=<chart version>
CHART = "oci://registry.k8s.io/kueue/charts/kueue"
NAMESPACE = "kueue-system"
API_VERSION = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # on the JobSet (tasks/run/jobsets.md "Queue selection")
JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"
PYTORCHJOB_FRAMEWORK = "kubeflow.org/pytorchjob"  # charts/kueue/values.yaml integrations list
FRAMEWORKS = {JobKind.JOB_SET: JOBSET_FRAMEWORK, JobKind.PYTORCH_JOB: PYTORCHJOB_FRAMEWORK}
GPU_RESOURCE = "nvidia.com/gpu"

# Requeues back off 60 s, 120 s, 240 s, then 300 s each (Kueue's base, stated; its default cap is
# 3600 s): the cap stays below the autoscalers' 10-minute scale-down-unneeded-time.
BACKOFF_BASE_SECONDS = 60
BACKOFF_MAX_SECONDS = 300


def chart_version(kubernetes_version: str | None) -> str:
    """The Kueue release for the cluster's minor (infra/addon_versions.py rows "kueue"); the
    chart's version is the release without the leading v (charts/kueue/Chart.yaml)."""
    if kubernetes_version is None:
        row = max(ADDON_VERSIONS[ADDON], key=lambda r: minor_key(r.newest))
        return row.version.lstrip("v")
    return version_for(ADDON, minor_of(kubernetes_version)).lstrip("v")


def ready_timeout_minutes(pools: Sequence[GpuPool]) -> int:
    """Kueue's PodsReady timeout: the slowest of the flavors' machines to join (the catalog's
    node_ready_minutes), so that a cold start is never evicted as missing capacity."""
    return max(pool.machine.node_ready_minutes for pool in pools)


def requeue_limit(max_wait_minutes: int, ready_minutes: int) -> int:
    """The requeues that one continuous shortage of `max_wait_minutes` takes: each attempt waits
    `ready_minutes`, then backs off BACKOFF_BASE_SECONDS * 2^(n-1) (capped); 0 = held at the
    first timeout. Kueue counts them over the Workload's whole life (module docstring)."""
    spent, count = ready_minutes * 60, 0
    while True:
        backoff = min(BACKOFF_BASE_SECONDS * 2 ** count, BACKOFF_MAX_SECONDS)
        if spent + backoff + ready_minutes * 60 > max_wait_minutes * 60:
            return count
        spent += backoff + ready_minutes * 60
        count += 1


def queue_label(queue: str | None, suspend: bool) -> dict[str, str]:
    """The label that puts a job in Kueue's hands; none for a job the user keeps suspended,
    which Kueue would otherwise unsuspend on admission."""
    return {} if queue is None or suspend else {QUEUE_LABEL: queue}


def requeuing_strategy(shortage: SpotShortage, ready_minutes: int) -> dict[str, object]:
    """No backoffLimitCount unless maxWaitMinutes is set: null requeues without end."""
    strategy: dict[str, object] = {"timestamp": "Eviction"}
    if shortage.max_wait_minutes is not None:
        strategy["backoffLimitCount"] = requeue_limit(shortage.max_wait_minutes, ready_minutes)
    return {**strategy, "backoffBaseSeconds": BACKOFF_BASE_SECONDS,
            "backoffMaxSeconds": BACKOFF_MAX_SECONDS}


def manager_config(shortage: SpotShortage, ready_minutes: int,
                   kind: JobKind = JobKind.JOB_SET) -> dict[str, object]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2), the chart's defaults kept where
    the chart sets them (charts/kueue/values.yaml managerConfig), plus what the gang needs.
    Only the job kind's integration is on: the PyTorchJob CRD exists only with that kind."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        # Only JobSets with a queue-name label are managed: the preparation Job and add-ons
        # (manageJobsWithoutQueueName false, the default) are left alone.
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": [FRAMEWORKS[kind]]},
        # Quota on GPUs only: the pods' CPU, memory, huge pages and fabric devices are the
        # scheduler's business (QuotaCheckStrategy, beta and on by default in v0.19).
        "resources": {"quotaCheckStrategy": "IgnoreUndeclared"},
        "waitForPodsReady": {
            "timeout": f"{ready_minutes}m",
            "recoveryTimeout": f"{ready_minutes}m",
            "blockAdmission": False,
            "requeuingStrategy": requeuing_strategy(shortage, ready_minutes),
        },
    }


def helm_values(shortage: SpotShortage, ready_minutes: int,
                kind: JobKind = JobKind.JOB_SET) -> dict[str, object]:
    import yaml

    return {"managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(
        manager_config(shortage, ready_minutes, kind), sort_keys=False)}}


def controller(name: str, kubernetes_version: str | None, shortage: SpotShortage,
               flavor_list: Sequence["Flavor"], opts: pulumi.ResourceOptions,
               kind: JobKind = JobKind.JOB_SET) -> k8s.helm.v3.Release:
    """Kueue's CRDs, webhook and controller (namespace kueue-system) from its Helm chart."""
    values = helm_values(shortage, ready_timeout_minutes([f.pool for f in flavor_list]), kind)
    return k8s.helm.v3.Release(
        name,
        k8s.helm.v3.ReleaseArgs(
            name="kueue", chart=CHART, version=chart_version(kubernetes_version),
            namespace=NAMESPACE, create_namespace=True, values=values,
            atomic=True, cleanup_on_fail=True),
        opts=opts)


@dataclass(frozen=True)
class Flavor:
    """One ResourceFlavor: a GPU pool under the name Kueue knows it by."""

    name: str
    pool: GpuPool

    @property
    def gpu_quota(self) -> int:
        return self.pool.max_nodes * self.pool.machine.gpu_count


def flavor_name(job_name: str, key: str) -> str:
    return f"{job_name}-{'on-demand' if key == PoolChoice.ON_DEMAND.value else 'spot'}"


def flavors(job_name: str, pool: PoolChoice, pools: Mapping[str, GpuPool]) -> list[Flavor]:
    """The ClusterQueue's flavors: the job's pool (no capacity fallback, module docstring)."""
    return [Flavor(flavor_name(job_name, pool.value), pools[pool.value])]


def resource_flavor(name: str, flavor: Flavor, labels: Mapping[str, str],
                    opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(
        name, api_version=API_VERSION, kind="ResourceFlavor",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=flavor.name, labels=dict(labels)),
        spec={
            "nodeLabels": dict(sorted(flavor.pool.node_labels.items())),
            "tolerations": [{"key": t.key, "operator": "Equal", "value": t.value,
                             "effect": t.effect} for t in flavor.pool.taints],
        },
        opts=opts)


def cluster_queue_spec(flavor_list: Sequence[Flavor]) -> dict[str, object]:
    return {
        "namespaceSelector": {},  # the LocalQueue decides who may use it
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{
            "coveredResources": [GPU_RESOURCE],
            "flavors": [{"name": f.name, "resources": [
                {"name": GPU_RESOURCE, "nominalQuota": f.gpu_quota}]} for f in flavor_list],
        }],
    }


def cluster_queue(name: str, queue_name: str, flavor_list: Sequence[Flavor],
                  labels: Mapping[str, str],
                  opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(
        name, api_version=API_VERSION, kind="ClusterQueue",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=queue_name, labels=dict(labels)),
        spec=cluster_queue_spec(flavor_list), opts=opts)


def local_queue(name: str, queue_name: str, namespace: str, backing_queue: str,
                labels: Mapping[str, str], opts: pulumi.ResourceOptions
                ) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(
        name, api_version=API_VERSION, kind="LocalQueue",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=queue_name, namespace=namespace,
                                            labels=dict(labels)),
        spec={"clusterQueue": backing_queue},
        # spec.clusterQueue is immutable: pointing at another ClusterQueue replaces the
        # LocalQueue under the same name, so the old one goes first.
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            replace_on_changes=["spec.clusterQueue"], delete_before_replace=True)))


# Kueue's WorkloadPriorityClass (kueue.x-k8s.io/v1beta2, cluster-scoped: `value`, `description`
# at the top level; a job names one with PRIORITY_LABEL, Kueue constants.WorkloadPriorityClassLabel).
# Kueue admits a higher value first from the same ClusterQueue. `torchrec-cloud submit
# --priority` names one of these; the stack's own job names none (priority 0, below all three).
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PRIORITY_CLASSES: dict[str, int] = {"low": 100, "normal": 1000, "high": 10000}


def priority_class_name(short: str) -> str:
    return f"torchrec-{short}"


def priority_class_object(short: str) -> dict[str, object]:
    """One WorkloadPriorityClass as plain data (the stack creates it; tests validate it)."""
    return {"apiVersion": API_VERSION, "kind": "WorkloadPriorityClass",
            "metadata": {"name": priority_class_name(short)},
            "value": PRIORITY_CLASSES[short],
            "description": f"torchrec-cloud submit --priority {short}"}


def priority_classes(name: str, labels: Mapping[str, str],
                     opts: pulumi.ResourceOptions) -> k8s.yaml.v2.ConfigGroup:
    """The three classes in one group: their `value` is a top-level field, which
    apiextensions.CustomResource (spec only) cannot carry."""
    objs = []
    for short in PRIORITY_CLASSES:
        obj = priority_class_object(short)
        obj["metadata"] = {**obj["metadata"], "labels": dict(labels)}  # type: ignore[dict-item]
        objs.append(obj)
    return k8s.yaml.v2.ConfigGroup(name, objs=objs, opts=opts)
