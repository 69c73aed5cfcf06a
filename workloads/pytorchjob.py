"""The optional Kubeflow variant: the training operator and one elastic PyTorchJob.

The operator is Kubeflow Training Operator v1.9.4 (the v1 line, which serves kubeflow.org/v1
PyTorchJob; Kubeflow Trainer v2 replaced it with TrainJob): its kustomize overlay
`manifests/overlays/standalone`, what the docs' `kubectl apply --server-side -k
"github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=<tag>"` applies,
rendered once and vendored in workloads/manifests/ (how: that file's header). Vendored because
pulumi-kubernetes' kustomize v2 Directory builds only local directories (remote git targets are
pulumi/pulumi-kubernetes issue #3844), and a `.../tree/<tag>/...` URL is no kustomize target at
all. v1.9.4, not v1.9.1: v1.9.1's overlay retags `ghcr.io/kubeflow/training-v1/training-operator`
while its Deployment names `kubeflow/training-operator`, so it ran an unpinned Docker Hub image
(fixed by kubeflow/trainer#2584, in v1.9.2). The operator's admission webhook listens on 9443
(infra/webhooks.py), which GKE's control plane reaches only through the firewall rule
infra/gcp/network.py opens.

Only Worker replicas: with an elasticPolicy the operator points every pod's PET_RDZV_ENDPOINT at
`<job>-worker-0` and the Worker's `pytorchjob-port` (pkg/controller.v1/pytorch/envvar_elastic.go);
a Master replica is for the static MASTER_ADDR mode and would be a second, idle rendezvous.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from pathlib import Path

from infra.addon_versions import ADDON_VERSIONS, version_for
from infra.kubernetes_release import minor_key, minor_of
from infra.settings.model.job import Job
from workloads.jobset import SKIP_AWAIT
from workloads.kueue import queue_label
from workloads.names import JobNames

# Versions: infra/addon_versions.py rows "training-operator"; each one vendored here.
ADDON = "training-operator"
MANIFESTS_DIR = Path(__file__).parent / "manifests"


def manifests_for(version: str) -> Path:
    return MANIFESTS_DIR / f"training-operator-{version}.yaml"


def operator_version(kubernetes_version: str | None) -> str:
    """The operator release for the cluster's version; with none known, the newest listed."""
    if kubernetes_version is None:
        return max(ADDON_VERSIONS[ADDON], key=lambda row: minor_key(row.newest)).version
    return version_for(ADDON, minor_of(kubernetes_version))


# The newest vendored release (what a job without a known cluster version gets).
TRAINING_OPERATOR_MANIFESTS = manifests_for(operator_version(None))
PORT_NAME = "pytorchjob-port"  # the operator reads the rendezvous port from this port name


def training_operator(name: str, kubernetes_version: str | None,
                      opts: pulumi.ResourceOptions) -> k8s.yaml.v2.ConfigFile:
    """CRDs, RBAC, webhook and the controller in namespace `kubeflow`, from the vendored file of
    the release for the cluster's version (applied server-side: the provider is built with
    server-side apply, as the docs ask)."""
    path = manifests_for(operator_version(kubernetes_version))
    return k8s.yaml.v2.ConfigFile(name, file=str(path), opts=opts)


def pytorch_job(name: str, names: JobNames, job: Job,
                template: k8s.core.v1.PodTemplateSpecArgs,
                opts: pulumi.ResourceOptions, queue: str | None = None
                ) -> k8s.apiextensions.CustomResource:
    """`queue`: the Kueue LocalQueue (workloads/kueue.py, Kueue's kubeflow.org/pytorchjob
    integration): Kueue's webhook sets runPolicy.suspend and unsuspends the job on admission
    (Kueue tasks/run/kubeflow/pytorchjobs.md)."""
    return k8s.apiextensions.CustomResource(
        name,
        api_version="kubeflow.org/v1",
        kind="PyTorchJob",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=names.job, namespace=names.namespace,
                                            labels={**names.common_labels,
                                                    **queue_label(queue, job.suspend)},
                                            annotations=SKIP_AWAIT),
        spec={
            "nprocPerNode": str(job.processes_per_node),
            "elasticPolicy": {
                "rdzvBackend": "c10d",
                "minReplicas": job.nodes,  # the sharding plan is made for this world size
                "maxReplicas": job.nodes,
                # No in-place restart by the agent: a node that comes back after a preemption
                # must not join a half-torn gang (trainer/launch.py, docs/architecture.md).
                "maxRestarts": 0,
            },
            # suspend only when asked: a new key in a running job's spec would replace it.
            "runPolicy": {"backoffLimit": job.backoff_limit, "cleanPodPolicy": "None",
                          **({"suspend": True} if job.suspend else {})},
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": job.nodes,
                    # The operator recreates a pod that exits 128-255 without counting it
                    # (trainer.exit_codes.RESUME is 143: every rank of a preempted gang exits
                    # with it, so the whole gang comes back; NODE_LEFT_OUT, 200, alike: the
                    # fabric gate tainted a bad node and every rank exits 200) and fails the job on 1-127 (bad
                    # flags, a crash). Weaker than the JobSet kind: a crash is not retried.
                    "restartPolicy": "ExitCode",
                    "template": template,
                },
            },
        },
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            replace_on_changes=["spec"], delete_before_replace=True)),
    )
