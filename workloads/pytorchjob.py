"""The optional Kubeflow variant: the training operator and one elastic PyTorchJob.

The operator is Kubeflow Training Operator v1.9.1 (the last v1 line, which serves
kubeflow.org/v1 PyTorchJob; Kubeflow Trainer v2 replaced it with TrainJob), installed from its
kustomize overlay `manifests/overlays/standalone` at the release tag, exactly what the docs'
`kubectl apply --server-side -k "github.com/kubeflow/training-operator.git/manifests/overlays/
standalone?ref=v1.9.1"` applies. The repository is now github.com/kubeflow/trainer; GitHub
redirects and the tag is unchanged.

Only Worker replicas: with an elasticPolicy the operator points every pod's PET_RDZV_ENDPOINT at
`<job>-worker-0` and the Worker's `pytorchjob-port` (pkg/controller.v1/pytorch/envvar_elastic.go);
a Master replica is for the static MASTER_ADDR mode and would be a second, idle rendezvous.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from infra.settings.model import Job
from workloads.jobset import SKIP_AWAIT
from workloads.names import JobNames

TRAINING_OPERATOR_VERSION = "v1.9.1"
TRAINING_OPERATOR_KUSTOMIZATION = (
    "https://github.com/kubeflow/training-operator/tree/"
    f"{TRAINING_OPERATOR_VERSION}/manifests/overlays/standalone"
)
PORT_NAME = "pytorchjob-port"  # the operator reads the rendezvous port from this port name


def training_operator(name: str, opts: pulumi.ResourceOptions) -> k8s.kustomize.v2.Directory:
    """CRDs, RBAC and the controller in namespace `kubeflow` (server-side apply, as the docs say)."""
    return k8s.kustomize.v2.Directory(name, directory=TRAINING_OPERATOR_KUSTOMIZATION, opts=opts)


def pytorch_job(name: str, names: JobNames, job: Job,
                template: k8s.core.v1.PodTemplateSpecArgs,
                opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(
        name,
        api_version="kubeflow.org/v1",
        kind="PyTorchJob",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=names.job, namespace=names.namespace,
                                            labels=names.common_labels, annotations=SKIP_AWAIT),
        spec={
            "nprocPerNode": str(job.processes_per_node),
            "elasticPolicy": {
                "rdzvBackend": "c10d",
                "minReplicas": job.nodes,  # the sharding plan is made for this world size
                "maxReplicas": job.nodes,
                # No in-place restart by the agent: a node that comes back after a preemption
                # must not join a half-torn gang (trainer/launch.py, ../shared/TESTING.md).
                "maxRestarts": 0,
            },
            "runPolicy": {"backoffLimit": job.backoff_limit, "cleanPodPolicy": "None"},
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": job.nodes,
                    # The operator recreates a pod that exits 128-255 without counting it
                    # (trainer.exit_codes.RESUME is 143: every rank of a preempted gang exits
                    # with it, so the whole gang comes back) and fails the job on 1-127 (bad
                    # flags, a crash). Weaker than the JobSet kind: a crash is not retried.
                    "restartPolicy": "ExitCode",
                    "template": template,
                },
            },
        },
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            replace_on_changes=["spec"], delete_before_replace=True)),
    )
