"""The default training job: a JobSet (kubernetes-sigs/jobset) whose one replicated Job is an
Indexed Job with one pod per GPU node, restarted as a whole gang after any preemption.

Why JobSet and not a bare Indexed Job: a gang of torchrun agents cannot take back one new
member. With a bare Job and `podFailurePolicy: Ignore`, only the preempted pod is replaced; its
peers keep running until they notice, and a replacement that arrives first joins their old
rendezvous (an in-place restart that torch 2.13 did not survive: docs/architecture.md). JobSet's
failure policy recreates every child Job, and `BlockingRecreate` waits until every old pod is
gone before the new ones start, so each generation rendezvouses from scratch, pod 0 included.
JobSet is what GKE's multi-node training and Kubeflow Trainer v2 build on.

How a pod's end becomes the job's fate (trainer/exit_codes.py, trainer/launch.py):
- the child Job's podFailurePolicy turns exit CONFIG_ERROR or FABRIC_ERROR, exit RESUME or
  NODE_LEFT_OUT (the fabric gate tainted a bad node) and the DisruptionTarget condition
  (eviction, preemption, node shutdown, a lost node's pod garbage collected) into `FailJob`,
  whose message names the exit code or the condition;
- the JobSet's rules then fail everything on a configuration or fabric error, and restart the gang
  without using `maxRestarts` on a resume, a node left out or a disruption; any other failure
  (a crash) exhausts the Job's `backoffLimit: 0` and takes JobSet's default, `RestartJobSet`,
  which counts against `maxRestarts` (= job.backoffLimit);
- the JobSet completes only when every pod exited 0, and only a run that reached its end
  exits 0.
"""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from infra.addon_versions import ADDON_VERSIONS, version_for
from infra.kubernetes_release import minor_key, minor_of
from infra.settings.model.job import JOBSET_REPLICATED_JOB, Job
from trainer.exit_codes import NODE_LEFT_OUT, NO_RETRY, RESUME
from workloads.kueue import queue_label
from workloads.names import JobNames

# The version follows the cluster's Kubernetes minor: infra/addon_versions.py, rows "jobset"
# (v0.10.1 for 1.32-1.34, v0.11.1 for 1.33-1.35, v0.12.0 for 1.34-1.36; each supports "the last
# 3 Kubernetes minor versions" from the Kubernetes it is built against). Every version there has
# every field used here: onJobFailureMessagePatterns (since v0.10.0), BlockingRecreate,
# publishNotReadyAddresses (tests/schemas/jobset-v0.12.0.json; v0.12.0 only added fields).
ADDON = "jobset"


MANIFESTS_DIR = Path(__file__).parent / "manifests"


def manifests_for(version: str) -> Path:
    """The release's manifests.yaml, vendored: the install JobSet's own guide gives
    (kubectl apply --server-side -f https://github.com/kubernetes-sigs/jobset/releases/download/
    <version>/manifests.yaml, site/content/en/docs/installation/_index.md at v0.12.0) is read
    from the repository, so `pulumi up` fetches nothing from GitHub and the file cannot change
    under a pinned version (each file's header says how it was rendered)."""
    return MANIFESTS_DIR / f"jobset-{version}.yaml"


def controller_version(kubernetes_version: str | None) -> str:
    """The JobSet release for the cluster's version ("1.35" or an exact build); with none known
    (a job built without a cluster version), the newest in the table."""
    if kubernetes_version is None:
        return max(ADDON_VERSIONS[ADDON], key=lambda row: minor_key(row.newest)).version
    return version_for(ADDON, minor_of(kubernetes_version))


API_VERSION = "jobset.x-k8s.io/v1alpha2"
# pulumi-kubernetes would otherwise wait for the training to finish.
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}

# The Job controller's message for a FailJob rule on exit codes (kubernetes
# pkg/controller/job/pod_failure_policy.go): "Container %s for pod %s/%s failed with exit code
# %v matching %v rule at index %d". JobSet matches it with RE2.
NO_RETRY_MESSAGE = (rf"failed with exit code ({'|'.join(str(c) for c in NO_RETRY)}) "
                    r"matching FailJob rule")
NODE_LEFT_OUT_MESSAGE = rf"failed with exit code {NODE_LEFT_OUT} matching FailJob rule"


def pod_failure_policy(container: str) -> dict[str, object]:
    """The child Job's rules, first match wins (batch/v1 PodFailurePolicy). The dataset wait
    runs in `container` (workloads/prepare.py waiting_first): its CONFIG_ERROR is in NO_RETRY."""
    return {"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": container, "operator": "In",
                                              "values": list(NO_RETRY)}},
        {"action": "FailJob", "onExitCodes": {"containerName": container, "operator": "In",
                                              "values": [RESUME, NODE_LEFT_OUT]}},
        {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]}


def failure_policy(backoff_limit: int) -> dict[str, object]:
    """The JobSet's rules, first match wins; no match = RestartJobSet (counted)."""
    return {
        "maxRestarts": backoff_limit,
        "restartStrategy": "BlockingRecreate",
        "rules": [
            {"name": "ConfigurationOrFabricError", "action": "FailJobSet",
             "onJobFailureReasons": ["PodFailurePolicy"],
             "onJobFailureMessagePatterns": [NO_RETRY_MESSAGE]},
            # Its own rule, so the JobSet's events name why the gang restarted (the gate's
            # one line in the pod log names the node): not counted, like a preemption; the
            # gate bounds how many nodes it leaves out (trainer/fabric_gate.py).
            {"name": "NodeLeftOutByGate", "action": "RestartJobSetAndIgnoreMaxRestarts",
             "onJobFailureReasons": ["PodFailurePolicy"],
             "onJobFailureMessagePatterns": [NODE_LEFT_OUT_MESSAGE]},
            {"name": "PreemptedOrLostNode", "action": "RestartJobSetAndIgnoreMaxRestarts",
             "onJobFailureReasons": ["PodFailurePolicy"]},
        ],
    }


def jobset_controller(name: str, kubernetes_version: str | None,
                      opts: pulumi.ResourceOptions) -> k8s.yaml.v2.ConfigFile:
    """JobSet's CRD, webhook and controller (namespace jobset-system), at the release for the
    cluster's Kubernetes version."""
    return k8s.yaml.v2.ConfigFile(
        name, file=str(manifests_for(controller_version(kubernetes_version))), opts=opts)


def jobset_spec(nodes: int, backoff_limit: int, suspend: bool, service: str,
                labels: dict[str, str], container: str, template: object) -> dict[str, object]:
    """The JobSet's spec, pure data around the pod template (a PodTemplateSpecArgs under
    Pulumi, a plain dict for `torchrec-cloud submit`): one function for the stack's own job and
    every submitted one (workloads/submitted.py), so they cannot drift apart."""
    return {
        # Only when asked: a new key in a running JobSet's spec would replace it.
        **({"suspend": True} if suspend else {}),
        "failurePolicy": failure_policy(backoff_limit),
        "successPolicy": {"operator": "All"},
        # Our own headless service (workloads/service.py) has this name, so JobSet uses it.
        "network": {"enableDNSHostnames": True, "subdomain": service,
                    "publishNotReadyAddresses": True},
        "replicatedJobs": [{
            "name": JOBSET_REPLICATED_JOB,
            "replicas": 1,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "completionMode": "Indexed",
                    "completions": nodes,
                    "parallelism": nodes,
                    "backoffLimit": 0,  # one crash fails the Job; JobSet counts restarts
                    "podFailurePolicy": pod_failure_policy(container),
                    "template": template,
                },
            },
        }],
    }


def job_set(name: str, names: JobNames, job: Job, container: str,
            template: k8s.core.v1.PodTemplateSpecArgs, opts: pulumi.ResourceOptions,
            queue: str | None = None
            ) -> k8s.apiextensions.CustomResource:
    """`queue`: the Kueue LocalQueue (workloads/kueue.py). Kueue's webhook then creates the
    JobSet suspended and Kueue unsuspends it on admission (Kueue tasks/run/jobsets.md), so the
    spec is not given `suspend` here: that field belongs to Kueue while the JobSet lives. A job
    the user suspends gets no queue label (kueue.queue_label), so Kueue does not unsuspend it."""
    return k8s.apiextensions.CustomResource(
        name,
        api_version=API_VERSION,
        kind="JobSet",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=names.job, namespace=names.namespace,
                                            labels={**names.common_labels,
                                                    **queue_label(queue, job.suspend)},
                                            annotations=SKIP_AWAIT),
        spec=jobset_spec(job.nodes, job.backoff_limit, job.suspend, names.service, names.common_labels,
                         container, template),
        # The spec of a running JobSet is mostly immutable: a change means delete, then create.
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            replace_on_changes=["spec"], delete_before_replace=True)),
    )
